import type { Queryable } from '../../db/pool.js';
import { recordConversion, upsertLead, type EventTypeName } from '../outbox/conversion-record.js';
import { visitContext } from '../tracker/visits.js';

/**
 * A payload comes back with a Telegram user (a `/start`, a Mini App open, or the operator's own
 * bot backend through the business API): the click's visit is tied to that user, who becomes a
 * lead of the site, and the entry's event is recorded with the visit's click ids, IP and
 * User-Agent. A payload is one click's: the first user to bring it back has it; anyone else who
 * brings it (a forwarded link) is organic.
 */

export type TieThrough = 'start' | 'app' | 'api';

/** Who may redeem a payload: the bot it was made for (webhook, Mini App), or the entry's account (API key). */
export type TieScope = { botId: string } | { accountId: string; siteId?: string | undefined };

export interface TieResult {
  /** The click's visit is now (or was already) tied to this user. */
  attributed: boolean;
  /** The entry the payload belongs to, when the payload is known in the scope (for the bot's welcome). */
  entryId: string | null;
  visitId: string | null;
  conversionId: string | null;
  /** Why it is not attributed, for the log. */
  reason?: 'unknown' | 'used_by_another_user';
}

interface ClickRow {
  id: string;
  entry_id: string;
  site_id: string;
  visit_id: string | null;
  used_by: number | null;
  conversion_id: string | null;
  bot_id: string;
  account_id: string;
  event_type: EventTypeName | null;
  custom_event_name: string | null;
  fixed_value: string | null;
  fixed_currency: string | null;
  channel_id: string | null;
  username: string | null;
}

/** Ties a payload to a Telegram user in the caller's transaction. The click's row is locked: two redemptions are decided one after the other. */
export async function tieEntry(
  tx: Queryable,
  q: { payload: string; telegramUserId: number; scope: TieScope; through: TieThrough; now: Date },
): Promise<TieResult> {
  const { rows } = await tx.query<ClickRow>(
    `SELECT k.id, k.entry_id, k.site_id, k.visit_id, k.used_by, k.conversion_id, e.bot_id, s.account_id, e.event_type, e.custom_event_name,
       e.fixed_value::text AS fixed_value, e.fixed_currency::text AS fixed_currency, e.channel_id, b.username
     FROM entry_clicks k JOIN entries e ON e.id = k.entry_id JOIN sites s ON s.id = k.site_id JOIN bots b ON b.id = e.bot_id
     WHERE k.payload = $1 FOR UPDATE OF k`,
    [q.payload],
  );
  const click = rows[0];
  const inScope =
    click !== undefined &&
    ('botId' in q.scope
      ? click.bot_id === q.scope.botId
      : click.account_id === q.scope.accountId &&
        (q.scope.siteId === undefined || q.scope.siteId === click.site_id));
  if (!click || !inScope)
    return { attributed: false, entryId: null, visitId: null, conversionId: null, reason: 'unknown' };
  if (click.used_by !== null && click.used_by !== q.telegramUserId) {
    return {
      attributed: false,
      entryId: click.entry_id,
      visitId: null,
      conversionId: null,
      reason: 'used_by_another_user',
    };
  }
  if (click.used_by === q.telegramUserId) {
    // The same user again (a second /start, the app opened anew): already tied, nothing more to send.
    return {
      attributed: true,
      entryId: click.entry_id,
      visitId: click.visit_id,
      conversionId: click.conversion_id,
    };
  }

  await upsertLead(tx, click.site_id, q.telegramUserId, q.now);
  let conversionId: string | null = null;
  // One event per (entry, user): a user who comes through two clicks of the same entry arrived once.
  const { rows: earlier } = await tx.query(
    'SELECT 1 FROM entry_clicks WHERE entry_id = $1 AND used_by = $2 AND conversion_id IS NOT NULL LIMIT 1',
    [click.entry_id, q.telegramUserId],
  );
  const visit = click.visit_id === null ? null : await visitContext(tx, click.visit_id);
  // A visit without consent leads to nothing sent (docs/consent.md).
  if (
    click.event_type !== null &&
    click.visit_id !== null &&
    earlier.length === 0 &&
    visit?.consented !== false
  ) {
    const conversion = await recordConversion(
      tx,
      {
        siteId: click.site_id,
        channelId: click.channel_id,
        telegramUserId: q.telegramUserId,
        visitId: click.visit_id,
        eventType: click.event_type,
        customEventName: click.custom_event_name,
        value: click.fixed_value === null ? null : Number(click.fixed_value),
        currency: click.fixed_currency,
        contentName: click.username === null ? null : `@${click.username}`,
        eventSourceUrl: visit?.href ?? null,
        clientIp: visit?.client_ip ?? null,
        userAgent: visit?.user_agent ?? null,
        eventTime: q.now,
        attributedAt: q.now,
        receivedAt: q.now,
        source: q.through === 'api' ? 'api' : 'webhook',
      },
      true,
    );
    conversionId = conversion.conversionId;
  }
  await tx.query(
    `UPDATE entry_clicks SET used_by = $2, used_at = $3, used_through = $4, conversion_id = $5 WHERE id = $1`,
    [click.id, q.telegramUserId, q.now, q.through, conversionId],
  );
  return { attributed: true, entryId: click.entry_id, visitId: click.visit_id, conversionId };
}

/**
 * The visit an entry tied to this user on the site within the window, newest first: the visit a
 * join without one of our invite links is credited to (the public-channel route through the bot).
 * Telegram dates updates in whole seconds: a tie within the second of the join (its start recorded
 * at the service's millisecond clock) is one made before it.
 */
export async function entryVisitInWindow(
  tx: Queryable,
  q: { siteId: string; telegramUserId: number; at: Date; windowDays: number },
): Promise<string | null> {
  if (q.windowDays <= 0) return null;
  const { rows } = await tx.query<{ visit_id: string }>(
    `SELECT k.visit_id FROM entry_clicks k
     WHERE k.used_by = $2 AND k.site_id = $1 AND k.visit_id IS NOT NULL
       AND k.used_at < $3::timestamptz + interval '1 second' AND k.used_at > $3::timestamptz - make_interval(days => $4)
     ORDER BY k.used_at DESC LIMIT 1`,
    [q.siteId, q.telegramUserId, q.at, q.windowDays],
  );
  return rows[0]?.visit_id ?? null;
}
