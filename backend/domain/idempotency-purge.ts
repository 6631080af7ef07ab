import type { Queryable } from '../db/pool.js';

/** Idempotency rows live two days: replays are answered for 24 h, the second day is slack. */
export const IDEMPOTENCY_RETENTION_MS = 2 * 24 * 60 * 60 * 1000;

/** Deletes idempotency rows older than the retention; returns how many went. */
export async function purgeIdempotencyKeys(db: Queryable, now: Date): Promise<number> {
  const cutoff = new Date(now.getTime() - IDEMPOTENCY_RETENTION_MS);
  const res = await db.query('DELETE FROM idempotency_keys WHERE created_at < $1', [cutoff]);
  return res.rowCount ?? 0;
}
