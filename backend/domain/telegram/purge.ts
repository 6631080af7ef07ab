import type { Queryable } from '../../db/pool.js';

/**
 * Telegram resends an update for at most 24 hours, so its de-duplication record is needed no
 * longer than that; a week leaves ample slack for a webhook that was down.
 */
const TELEGRAM_UPDATE_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

const JOIN_QUERY_RETENTION_MS = 24 * 60 * 60 * 1000;

/**
 * Deletes de-duplication records past the retention, and the records of update forwards sent or
 * dropped as long ago (their bodies went when they were); returns how many went.
 */
export async function purgeTelegramUpdates(db: Queryable, now: Date): Promise<number> {
  const cutoff = new Date(now.getTime() - TELEGRAM_UPDATE_RETENTION_MS);
  const res = await db.query('DELETE FROM telegram_updates WHERE received_at < $1', [cutoff]);
  const forwards = await db.query(
    'DELETE FROM telegram_forwards WHERE created_at < $1 AND (delivered_at IS NOT NULL OR dropped_at IS NOT NULL)',
    [cutoff],
  );
  // A guard bot's join query is answered within 10 seconds; its row says nothing a day later.
  const queries = await db.query('DELETE FROM join_request_queries WHERE received_at < $1', [
    new Date(now.getTime() - JOIN_QUERY_RETENTION_MS),
  ]);
  return (res.rowCount ?? 0) + (forwards.rowCount ?? 0) + (queries.rowCount ?? 0);
}
