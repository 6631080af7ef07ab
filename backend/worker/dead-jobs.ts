import type { Queryable } from '../db/pool.js';
import { DELIVER_TASK } from '../domain/outbox/delivery-wake.js';
import { FORWARD_TASK } from '../domain/telegram/forwards.js';

/**
 * Jobs graphile-worker gave up on stay in its table for good (it deletes only the ones that
 * succeed). Some are made dead without failing much: a keyed `deliver_due` wake-up that is
 * already running when the next wake-up comes loses its key and its remaining attempts (the new
 * wake-up takes over), so a single failure of the running one leaves it dead. Left alone they
 * pile up by the thousand over weeks.
 *
 * - Delivery jobs and update-forward jobs are only signals (the sends and telegram_forwards
 *   tables are the queues, and the sweeps find whatever is due): a dead one carries nothing and
 *   goes at the next cleanup.
 * - Other dead jobs (Telegram actions, invite refills) are kept `DEAD_JOB_KEEP_DAYS` days, so that
 *   an operator can see what failed and why (`last_error`), then go.
 */
export const DEAD_JOB_KEEP_DAYS = 7;

/** Task names whose jobs are wake-ups only (an earlier version's included). */
export const SIGNAL_TASKS = [DELIVER_TASK, 'deliver_send', 'deliver_recover', FORWARD_TASK] as const;

/** Deletes dead jobs as above; returns how many of each kind went. */
export async function purgeDeadJobs(db: Queryable, now: Date): Promise<{ signals: number; others: number }> {
  const { rows } = await db.query<{ signal: boolean; n: number }>(
    `WITH gone AS (
       DELETE FROM graphile_worker._private_jobs j USING graphile_worker._private_tasks t
       WHERE t.id = j.task_id AND j.attempts >= j.max_attempts AND j.locked_at IS NULL
         AND (t.identifier = ANY($1::text[]) OR j.updated_at < $2::timestamptz - make_interval(days => $3::int))
       RETURNING t.identifier = ANY($1::text[]) AS signal)
     SELECT signal, count(*)::int AS n FROM gone GROUP BY signal`,
    [[...SIGNAL_TASKS], now, DEAD_JOB_KEEP_DAYS],
  );
  return { signals: rows.find((r) => r.signal)?.n ?? 0, others: rows.find((r) => !r.signal)?.n ?? 0 };
}
