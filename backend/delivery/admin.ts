import { z } from 'zod';
import { withTx, type Pool, type Queryable } from '../db/pool.js';
import { requireSite } from '../domain/admin/sites.js';
import { wakeDeliveryNow } from '../domain/outbox/delivery-wake.js';
import { ERASED_SKIP_REASON } from '../domain/erasure/erase-lead.js';
import {
  lockConversions,
  refreshCapiStatus,
  refreshCapiStatuses,
  requeueSends,
} from '../domain/outbox/sends.js';
import { ApiError, validationError } from '../errors.js';

/** Operator views of the outbox: `npm run admin -- sends list|retry`. */

export const SEND_STATUSES = ['pending', 'sent', 'failed', 'skipped'] as const;
/** What a send carries: a landing page's PageView, or a conversion (a join, a business event). */
export const SEND_KINDS = ['pageview', 'conversion'] as const;

export const ListSendsInput = z.object({
  siteId: z.string().trim().min(1, 'a site (id or websiteId) is required'),
  status: z.enum(SEND_STATUSES).optional(),
  kind: z.enum(SEND_KINDS).optional(),
  /** One pixel of the site (its pixelId): a site with two pixels on one platform tells them apart. */
  pixelId: z.uuid('pixel must be a pixelId printed by pixel list').optional(),
  limit: z.coerce
    .number()
    .int('limit must be an integer')
    .min(1, 'limit must be at least 1')
    .max(1000, 'limit must be at most 1000')
    .default(50),
});

export interface SendListItem {
  sendId: string;
  platform: string;
  status: string;
  attempts: number;
  /** The last platform error, or why the send was skipped. */
  lastError: string | null;
  conversionId: string | null;
  visitId: string | null;
  pixelId: string;
  /** `PageView`, or the conversion's event type (`Subscribe`, `Purchase`, `Custom`…). */
  eventType: string;
}

/** A site's sends, newest first. */
export async function listSends(
  db: Queryable,
  input: z.input<typeof ListSendsInput>,
): Promise<{ sends: SendListItem[] }> {
  const parsed = ListSendsInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'sends list');
  const { siteId, status, kind, pixelId, limit } = parsed.data;
  const site = await requireSite(db, siteId);
  const { rows } = await db.query<{
    id: string;
    platform: string;
    pixel_id: string;
    event_type: string;
    status: string;
    attempts: number;
    error: string | null;
    conversion_id: string | null;
    visit_id: string | null;
  }>(
    `SELECT s.id, s.platform, s.pixel_id, COALESCE(c.event_type, 'PageView') AS event_type, s.status, s.attempts,
            COALESCE(s.skip_reason, s.last_error) AS error, s.conversion_id, s.visit_id
     FROM sends s JOIN pixels p ON p.id = s.pixel_id
     LEFT JOIN conversions c ON c.id = s.conversion_id
     WHERE p.site_id = $1 AND ($2::text IS NULL OR s.status = $2)
       AND ($3::text IS NULL OR ($3 = 'pageview') = (s.visit_id IS NOT NULL))
       AND ($4::uuid IS NULL OR s.pixel_id = $4)
     ORDER BY s.created_at DESC, s.id
     LIMIT $5`,
    [site.id, status ?? null, kind ?? null, pixelId ?? null, limit],
  );
  return {
    sends: rows.map((r) => ({
      sendId: r.id,
      platform: r.platform,
      status: r.status,
      attempts: r.attempts,
      lastError: r.error,
      conversionId: r.conversion_id,
      visitId: r.visit_id,
      pixelId: r.pixel_id,
      eventType: r.event_type,
    })),
  };
}

const SendId = z.uuid();

/**
 * Puts a failed or skipped send back in the queue with a fresh attempt budget, due now, then
 * wakes a worker. A sent one is refused: delivering it again would be deduplicated by
 * the platform at best, counted twice at worst. Unknown ids are NOT_FOUND.
 */
export async function retrySend(pool: Pool, sendId: string): Promise<{ sendId: string; status: 'pending' }> {
  if (!SendId.safeParse(sendId).success) throw new ApiError('NOT_FOUND', `send ${sendId} does not exist`);
  const result = await withTx(pool, async (tx) => {
    const found = await tx.query<{
      conversion_id: string | null;
      status: string;
      skip_reason: string | null;
    }>('SELECT conversion_id, status, skip_reason FROM sends WHERE id = $1', [sendId]);
    const send = found.rows[0];
    if (!send) throw new ApiError('NOT_FOUND', `send ${sendId} does not exist`);
    // The person's identifiers are gone, and with them the consent to send anything about them.
    if (send.skip_reason === ERASED_SKIP_REASON)
      throw new ApiError(
        'VALIDATION_FAILED',
        `send ${sendId} was cancelled when its person's data was erased`,
      );
    if (send.conversion_id) await lockConversions(tx, [send.conversion_id]);
    const { rows } = await tx.query<{ status: string }>('SELECT status FROM sends WHERE id = $1 FOR UPDATE', [
      sendId,
    ]);
    const { status } = rows[0]!;
    if (status === 'sent')
      throw new ApiError(
        'VALIDATION_FAILED',
        `send ${sendId} was already delivered; the platform would not count it again`,
      );
    // A pending send is being delivered or waiting for its retry: its time is left alone (moving
    // it would break a worker's lease), and the sweep finds it when it is due.
    if (status === 'pending') return { sendId, status: 'pending' as const };
    await requeueSends(tx, [sendId], false);
    if (send.conversion_id) await refreshCapiStatus(tx, send.conversion_id);
    return { sendId, status: 'pending' as const };
  });
  await wakeDeliveryNow(pool);
  return result;
}

/** At most this many failed sends are put back by one `retryFailedSends`; the rest by the next. */
export const RETRY_FAILED_BATCH = 5_000;

/**
 * Puts every failed send of a site's active pixels back in the queue, as `retrySend` does one
 * (the dashboard's "Retry all failed", after a token was fixed, say). Sends of inactive pixels are
 * left alone: they would only be skipped. The oldest `RETRY_FAILED_BATCH` go first; `more` says
 * whether others are left.
 */
export async function retryFailedSends(
  pool: Pool,
  siteIdOrWebsiteId: string,
): Promise<{ retried: number; more: boolean }> {
  const site = await requireSite(pool, siteIdOrWebsiteId);
  const result = await withTx(pool, async (tx) => {
    const { rows } = await tx.query<{ id: string; conversion_id: string | null }>(
      `SELECT x.id, x.conversion_id FROM sends x JOIN pixels p ON p.id = x.pixel_id
       WHERE p.site_id = $1 AND p.active AND x.status = 'failed' ORDER BY x.created_at, x.id LIMIT $2`,
      [site.id, RETRY_FAILED_BATCH + 1],
    );
    const chosen = rows.slice(0, RETRY_FAILED_BATCH);
    const conversions = [...new Set(chosen.flatMap((r) => (r.conversion_id ? [r.conversion_id] : [])))];
    // The conversions' locks first, as delivery takes them, so that their capiStatus stays true.
    await lockConversions(tx, conversions);
    const updated = await requeueSends(
      tx,
      chosen.map((r) => r.id),
      true,
    );
    await refreshCapiStatuses(tx, [
      ...new Set(updated.flatMap((r) => (r.conversion_id ? [r.conversion_id] : []))),
    ]);
    return { retried: updated.length, more: rows.length > RETRY_FAILED_BATCH };
  });
  if (result.retried > 0) await wakeDeliveryNow(pool);
  return result;
}
