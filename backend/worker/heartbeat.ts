import type { Pool, Queryable } from '../db/pool.js';

/**
 * No job waits for a dead runner. graphile-worker 0.17 locks a job under its worker pool's id and
 * releases it when that runner finishes or stops gracefully; a runner that dies without stopping
 * (SIGKILL, an out-of-memory kill, a machine gone) leaves its jobs locked until graphile-worker's
 * own lock timeout, four hours later. It has no heartbeat of its own, and `force_unlock_workers`
 * needs to be told which ids are dead. So every runner beats here, under every id its jobs are
 * locked under, and sweeps: jobs (and job queues) locked under an id that stopped beating are
 * released with `force_unlock_workers`, and any runner takes them at its next poll.
 *
 * Safe for live runners: an id counts as dead only when its last beat is `DEAD_AFTER_MS` old, six
 * beats missed, and only for jobs locked at least that long ago (a runner beats right after it
 * starts, before that it has locked nothing for long). An id that never beat (a runner of an
 * earlier release, during a rolling upgrade) is given `NEVER_BEAT_GRACE_MS`. A runner cut off
 * from the database for longer than `DEAD_AFTER_MS` may see a job it was running released and run
 * elsewhere; its own completion is then ignored by graphile-worker (it is no longer the locker).
 * Every task tolerates that (Telegram actions are keyed, delivery claims sends under a lease).
 */

/** How often a runner beats and sweeps. */
export const BEAT_MS = 5_000;
/** An id whose last beat is older is dead. */
export const DEAD_AFTER_MS = 30_000;
/** An id that never beat is dead once its jobs have been locked this long. */
export const NEVER_BEAT_GRACE_MS = 5 * 60_000;
/** Beats of runners that stopped are forgotten after a day. */
const FORGET_AFTER_MS = 24 * 3600_000;

export async function beat(db: Queryable, workerIds: readonly string[]): Promise<void> {
  if (workerIds.length === 0) return;
  await db.query(
    `INSERT INTO worker_heartbeats (worker_id, beat_at) SELECT id, now() FROM unnest($1::text[]) AS id
     ON CONFLICT (worker_id) DO UPDATE SET beat_at = now()`,
    [[...workerIds]],
  );
}

/** Releases the jobs of dead ids (see above); returns the ids released. */
export async function releaseDeadWorkers(
  db: Queryable,
  { deadAfterMs = DEAD_AFTER_MS, neverBeatGraceMs = NEVER_BEAT_GRACE_MS } = {},
): Promise<string[]> {
  const { rows } = await db.query<{ dead: string[] | null; n: number }>(
    `WITH locked AS (
       SELECT locked_by, locked_at FROM graphile_worker._private_jobs WHERE locked_by IS NOT NULL
       UNION ALL
       SELECT locked_by, locked_at FROM graphile_worker._private_job_queues WHERE locked_by IS NOT NULL),
     dead AS (
       SELECT DISTINCT l.locked_by AS id FROM locked l
       LEFT JOIN worker_heartbeats h ON h.worker_id = l.locked_by
       WHERE l.locked_at < now() - $1::int * interval '1 millisecond'
         AND (h.beat_at < now() - $1::int * interval '1 millisecond'
              OR (h.worker_id IS NULL AND l.locked_at < now() - $2::int * interval '1 millisecond'))),
     unlocked AS (
       SELECT graphile_worker.force_unlock_workers(array_agg(id)) FROM dead HAVING count(*) > 0)
     SELECT (SELECT array_agg(id) FROM dead) AS dead, (SELECT count(*) FROM unlocked)::int AS n`,
    [deadAfterMs, neverBeatGraceMs],
  );
  const dead = rows[0]?.dead ?? [];
  if (dead.length > 0)
    await db.query('DELETE FROM worker_heartbeats WHERE worker_id = ANY($1::text[])', [dead]);
  return dead;
}

/** Forgets the beats of ids (a runner that stopped, or long-dead ones). */
export async function forgetBeats(db: Queryable, workerIds: readonly string[]): Promise<void> {
  await db.query(
    `DELETE FROM worker_heartbeats WHERE worker_id = ANY($1::text[]) OR beat_at < now() - $2::int * interval '1 millisecond'`,
    [[...workerIds], FORGET_AFTER_MS],
  );
}

export interface Heartbeat {
  /** Stops beating; `forget` removes the beats too (the runner stopped and holds nothing). */
  stop(opts?: { forget?: boolean }): Promise<void>;
}

/**
 * Beats for `workerIds()` now and every `BEAT_MS`, and sweeps the dead ids' jobs each time.
 * Errors (the database away) are reported and the next tick tries again.
 */
export function startHeartbeat(
  pool: Pool,
  workerIds: () => readonly string[],
  onError: (err: unknown) => void,
  beatMs = BEAT_MS,
  onBeat: () => void = () => undefined,
): Heartbeat {
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  const tick = () => {
    running = (async () => {
      try {
        await beat(pool, workerIds());
        onBeat();
        await releaseDeadWorkers(pool);
      } catch (err) {
        if (!stopped) onError(err);
      }
    })();
  };
  tick();
  const timer = setInterval(tick, beatMs);
  timer.unref();
  return {
    async stop({ forget = false } = {}) {
      stopped = true;
      clearInterval(timer);
      await running;
      if (forget) await forgetBeats(pool, workerIds()).catch(() => undefined);
    },
  };
}
