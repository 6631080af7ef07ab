import type { Queryable } from '../../db/pool.js';
import type { CapiStatus } from '../outbox/capi-status.js';
import { createSends, redispatchSends, refreshCapiStatus } from '../outbox/sends.js';

/**
 * (Re)schedules delivery of an existing conversion, in the caller's transaction (which wakes the
 * worker after its commit): its failed and skipped sends to still-active pixels go back to
 * pending, due now (same event id, so a platform that did get it deduplicates), pixels added
 * since get a send, and sends already pending stay as they are (the worker reads the conversion
 * row when it sends, so they carry the update). Sends already sent are never sent again.
 */
export interface Redispatched {
  /** The conversion's pending sends after the call: everything now scheduled. */
  sends: { sendId: string; platform: string }[];
  capiStatus: CapiStatus;
}

export async function redispatchConversion(
  tx: Queryable,
  conversionId: string,
  siteId: string,
): Promise<Redispatched> {
  await redispatchSends(tx, conversionId);
  await createSends(tx, { kind: 'conversion', id: conversionId, siteId });
  return pendingSends(tx, conversionId);
}

/** The conversion's currently scheduled sends and its status, without changing anything but the status cache. */
export async function pendingSends(tx: Queryable, conversionId: string): Promise<Redispatched> {
  const { rows } = await tx.query<{ id: string; platform: string }>(
    `SELECT id, platform FROM sends WHERE conversion_id = $1 AND status = 'pending' ORDER BY created_at, id`,
    [conversionId],
  );
  const capiStatus = await refreshCapiStatus(tx, conversionId);
  return { sends: rows.map((r) => ({ sendId: r.id, platform: r.platform })), capiStatus };
}
