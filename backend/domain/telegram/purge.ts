import type { Queryable } from '../../db/pool.js';

/**
 * Telegram resends an update for at most 24 hours, so its de-duplication record is needed no
 * longer than that; a week leaves ample slack for a webhook that was down.
 */
export const TELEGRAM_UPDATE_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

/** Deletes de-duplication records past the retention; returns how many went. */
export async function purgeTelegramUpdates(db: Queryable, now: Date): Promise<number> {
  const cutoff = new Date(now.getTime() - TELEGRAM_UPDATE_RETENTION_MS);
  const res = await db.query('DELETE FROM telegram_updates WHERE received_at < $1', [cutoff]);
  return res.rowCount ?? 0;
}
