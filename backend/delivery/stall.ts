import type { Queryable } from '../db/pool.js';
import type { Deps } from '../deps.js';

export type { DeliveryCheck, DeliveryStatus };
import type { DeliveryCheck, DeliveryStatus } from './stall-log.js';

/**
 * Noticing that delivery has stopped. Two signs, either enough:
 *
 * - this process runs the job worker and its runner is not working (it stopped on its own and is
 *   being restarted: see `worker/supervisor.ts`);
 * - the oldest *due* send has waited longer than `DELIVERY_STALL_SECONDS`. That one sees every
 *   process's workers at once, so a web process with `WORKER=off` reports a stall of the
 *   `npm run worker` processes behind it.
 *
 * A send is due when it is pending and its `next_attempt_at` has passed (its `queue_at`, never
 * later, has then passed too). A claimed send has its
 * `next_attempt_at` moved to the end of its lease, so a send in flight is never due, and one whose
 * worker died is due again from the moment its lease ended: its wait is counted from then. A
 * retry waiting out its backoff is not due either. So the age is "how long has work been ready
 * that no worker took", whatever the platforms answer.
 */

/**
 * The oldest due send's wait in seconds (0 when nothing is due). A loose index scan over
 * `sends_queue` (pixel_id, queue_at) WHERE pending, as for `DUE_PIXELS_SQL`: one descent to find
 * each pixel with pending sends and one to read its first send in the queue that is not under a
 * lease, however long the backlog, so a probe every few seconds costs next to nothing even with a
 * million sends queued. (A send whose worker died is read in its place in the queue, which can put
 * it before a send that became due up to a lease earlier: the age is off by a lease at most.)
 */
export const OLDEST_DUE_SQL = `
  WITH RECURSIVE pending(pixel_id) AS (
    (SELECT pixel_id FROM sends WHERE status = 'pending' ORDER BY pixel_id LIMIT 1)
    UNION ALL
    SELECT (SELECT s.pixel_id FROM sends s WHERE s.status = 'pending' AND s.pixel_id > p.pixel_id ORDER BY s.pixel_id LIMIT 1)
    FROM pending p WHERE p.pixel_id IS NOT NULL)
  SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(d.due)), 0)::float8 AS seconds
  FROM pending p
  CROSS JOIN LATERAL (
    SELECT s.next_attempt_at AS due FROM sends s
    WHERE s.pixel_id = p.pixel_id AND s.status = 'pending' AND s.queue_at <= now() AND s.next_attempt_at <= now()
    ORDER BY s.queue_at LIMIT 1) d
  WHERE p.pixel_id IS NOT NULL`;

export async function oldestDueSeconds(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ seconds: number }>(OLDEST_DUE_SQL);
  return Math.max(0, rows[0]?.seconds ?? 0);
}

/** The rule, apart from the database: a pure function so that it can be read (and tested) alone. */
export function deliveryStatus(input: {
  oldestDueSeconds: number;
  workerRunning: boolean | null;
  stallSeconds: number;
}): DeliveryStatus {
  if (input.workerRunning === false) return 'stalled';
  return input.oldestDueSeconds > input.stallSeconds ? 'stalled' : 'ok';
}

export type WatchDeps = Pick<Deps, 'pool' | 'config' | 'log' | 'metrics' | 'worker' | 'local'>;

/** Checks delivery now: sets the gauge, logs a change of status, and says whether it is stalled. */
export async function checkDelivery(deps: WatchDeps): Promise<DeliveryCheck> {
  const age = await oldestDueSeconds(deps.pool);
  deps.metrics.sendsOldestDue.set(age);
  const workerRunning = deps.worker ? deps.worker.running() : null;
  const check: DeliveryCheck = {
    delivery: deliveryStatus({
      oldestDueSeconds: age,
      workerRunning,
      stallSeconds: deps.config.DELIVERY_STALL_SECONDS,
    }),
    oldestDueSeconds: age,
    workerRunning,
  };
  // One memory per process, so that /readyz, /metrics and the periodic watch log a stall once between them.
  deps.local.stallLog.record(check);
  return check;
}

/**
 * Checks every `intervalMs` in the background, so that a stall is logged even when nothing probes
 * /readyz. Errors (the database away) are left to /readyz and the pool's own reporting.
 */
export function watchDelivery(deps: WatchDeps, intervalMs: number): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    checkDelivery(deps)
      .catch(() => undefined)
      .finally(() => (running = false));
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
