import type { Queryable } from '../../db/pool.js';

/**
 * The copies of a person's identifiers outside the rows erasure anonymises in place, gone in the
 * erasure's transaction:
 *
 * - stored Idempotency-Key answers of the account's keys that name the person (its Telegram id as
 *   `telegramUserId`, its external id as `externalUserId`, or the id of one of its conversions or
 *   visits): the answer becomes 404 LEAD_NOT_FOUND, so that a replay tells the truth and a retry
 *   of an event under the same key does not run again and bring the person back;
 * - the site's webhook events for the person (waiting or delivered: the delivery log);
 * - the updates of the person its bots were still to forward to the operator's backend.
 */
export interface PersonCopies {
  accountId: string;
  siteId: string;
  telegramUserId: number;
  conversionIds: string[];
  visitIds: string[];
  externalIds: string[];
}

const ERASED_ANSWER = JSON.stringify({
  type: 'https://capigram.dev/errors/lead-not-found',
  title: 'Lead not found on the resolved site',
  status: 404,
  code: 'LEAD_NOT_FOUND',
  detail: 'the lead was erased',
});

/** A PostgreSQL ARE pattern matching `text` literally. */
function literal(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** One pattern for every way a stored JSON answer names the person. */
export function personPattern(p: Omit<PersonCopies, 'accountId' | 'siteId'>): string {
  const alternatives = [
    `"telegramUserId"\\s*:\\s*"?${p.telegramUserId}([^0-9]|$)`,
    ...[...p.conversionIds, ...p.visitIds].map((id) => `"${literal(id)}"`),
    ...p.externalIds.map((e) => `"externalUserId"\\s*:\\s*"${literal(JSON.stringify(e).slice(1, -1))}"`),
  ];
  return alternatives.join('|');
}

export async function eraseCopies(tx: Queryable, p: PersonCopies): Promise<void> {
  await tx.query(
    `UPDATE idempotency_keys k SET status_code = 404,
       response_body = jsonb_build_object('contentType', 'application/problem+json', 'text', $3::text)
     FROM api_keys a
     WHERE a.id = k.api_key_id AND a.account_id = $1 AND k.response_body IS NOT NULL
       AND (k.response_body ->> 'text') ~ $2`,
    [p.accountId, personPattern(p), ERASED_ANSWER],
  );
  await tx.query(
    `DELETE FROM webhook_events e USING webhooks w
     WHERE w.id = e.webhook_id AND w.site_id = $1 AND e.telegram_user_id = $2`,
    [p.siteId, p.telegramUserId],
  );
  await tx.query(
    `UPDATE telegram_forwards f SET dropped_at = now(), body_enc = NULL, last_error = 'erased'
     FROM bots b
     WHERE b.id = f.bot_id AND b.account_id = $1 AND f.order_key = 'user:' || $2::text
       AND f.delivered_at IS NULL AND f.dropped_at IS NULL`,
    [p.accountId, p.telegramUserId],
  );
}
