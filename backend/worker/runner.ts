import { EventEmitter } from 'node:events';
import { Logger, run, type Runner, type TaskList, type WorkerEvents } from 'graphile-worker';
import type { Deps } from '../deps.js';
import { startSweep } from '../delivery/sweep.js';
import { startForwardSweep } from '../domain/telegram/forwards.js';
import { startWebhookSweep } from '../domain/webhooks/deliver.js';
import { UPGRADE_WEBHOOKS_TASK } from '../domain/telegram/webhook-upgrade.js';
import { startHeartbeat } from './heartbeat.js';
import { CRONTAB, createTaskList } from './tasks/index.js';

/** The workers of a runner that stopped on its own, and when the last of them has finished its job. */
export interface Orphans {
  /** The ids its jobs are locked under (its pool's and its workers'). */
  workerIds: string[];
  /** Resolves when every worker of the runner has stopped (its running job, if any, ended). */
  idle: Promise<void>;
}

export interface WorkerOptions {
  concurrency?: number;
  /** Extra tasks (tests add their own); merged over the service's. */
  extraTasks?: TaskList;
  crontab?: string;
  /** graphile-worker's poll interval, and the delivery sweep's. */
  pollIntervalMs?: number;
  /**
   * Called once if the runner stops without `stop()` or `kill()` having been called on it (see
   * below for when graphile-worker does that), with the ids its jobs are locked under, which
   * nobody else will release for four hours. The sweep has stopped by then.
   */
  onUnexpectedStop?: (reason: string, orphans: Orphans) => void;
  /** How often the runner beats and sweeps dead runners' jobs (worker/heartbeat.ts); tests shorten it. */
  heartbeatMs?: number;
  /** Called after each beat the database took (`npm run worker` marks a file for its health check). */
  onBeat?: () => void;
}

/**
 * graphile-worker on the service's own database. Signal handling is ours (main.ts): on shutdown we
 * stop taking jobs, let running ones finish, and graphile-worker releases whatever is left.
 *
 * How a runner dies on its own (graphile-worker 0.17.3, read in node_modules and measured by
 * restarting PostgreSQL under it):
 *
 * - Its LISTEN client reconnects by itself with backoff, and a worker whose `getJob` fails retries
 *   at the poll interval: an outage while the workers are idle is survived.
 * - But a job that ends while the database is away cannot be marked complete or failed. Its
 *   completion batcher (on with `completeJobBatchDelay: 0`, below) gives up at the first error (its
 *   retry loop rethrows inside the loop), reports `pool:fatalError` and calls the pool's
 *   `gracefulShutdown("Could not completeJobs; queue is in an inconsistent state")`. The workers
 *   exit; the jobs they held stay locked (graphile-worker only resets locks after four hours).
 * - `runner.promise` then does not reliably settle: its backpressure, once set, is never cleared,
 *   so from the second failure on each failure takes two off the batcher's pending count and adds
 *   one; the count goes below zero, its release (which waits for exactly zero) never resolves,
 *   and neither do the pool's and the runner's promises (measured: still pending long after the
 *   database was back). Awaiting the promise is therefore no way to notice; a process with
 *   nothing else keeping it alive (`npm run worker`) even ends with status 0 on an empty event
 *   loop, which `Restart=on-failure` does not restart. The pool's own `pool:gracefulShutdown` /
 *   `pool:forcefulShutdown` events do tell, as they come before any of that.
 *
 * So a runner has stopped unexpectedly when its pool starts shutting down (or its promise settles)
 * without our `stop()`/`kill()`. The sweep stops at once (it would only queue wake-ups nobody
 * takes) and `onUnexpectedStop` decides what to do: `worker/supervisor.ts`.
 */
export async function startWorker(deps: Deps, opts: WorkerOptions = {}): Promise<Runner> {
  const pollInterval = opts.pollIntervalMs ?? 1000;
  // Our own emitter, passed in, so that the pool and its workers are seen being created (that
  // happens inside `run()`, before it returns the runner and its emitter).
  const events: WorkerEvents = new EventEmitter();
  const workerIds: string[] = [];
  let live = 0;
  let allStopped: () => void = () => undefined;
  const idle = new Promise<void>((ok) => (allStopped = ok));
  // Jobs are locked under the pool's id (graphile-worker 0.17 fetches them for the whole pool),
  // and under a worker's own id in older versions: both are what `force_unlock_workers` needs.
  events.on('pool:create', ({ workerPool }) => workerIds.push(workerPool.id));
  events.on('worker:create', ({ worker }) => {
    workerIds.push(worker.workerId);
    live++;
  });
  events.on('worker:stop', () => {
    if (--live === 0) allStopped();
  });

  const runner = await run({
    pgPool: deps.pool,
    concurrency: opts.concurrency ?? 8,
    noHandleSignals: true,
    pollInterval,
    taskList: { ...createTaskList(deps), ...opts.extraTasks },
    crontab: opts.crontab ?? CRONTAB,
    // Delivery jobs wait while a pass of this process is young (delivery/pass-gate.ts).
    forbiddenFlags: () => deps.local.deliveryGate.forbiddenFlags(),
    logger: workerLogger(deps),
    events,
    // graphile-worker 0.17 only waits for a job's completion at shutdown when completions are
    // batched; with a batch delay of 0 they are, so a job finishing during stop() is released
    // instead of staying locked for four hours.
    preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
  });
  events.on('job:success', ({ job }) =>
    deps.metrics.jobs.inc({ task: job.task_identifier, outcome: 'success' }),
  );
  events.on('job:error', ({ job, error }) => {
    deps.metrics.jobs.inc({ task: job.task_identifier, outcome: 'error' });
    deps.log.warn(
      { task: job.task_identifier, jobId: job.id, attempts: job.attempts, err: String(error) },
      'job failed',
    );
  });
  events.on('job:failed', ({ job }) =>
    deps.metrics.jobs.inc({ task: job.task_identifier, outcome: 'failed' }),
  );
  // Bots registered before an update type was added to ALLOWED_UPDATES get it now, not at the next cron tick.
  await runner.addJob(UPGRADE_WEBHOOKS_TASK, {}, { jobKey: UPGRADE_WEBHOOKS_TASK, maxAttempts: 1 });
  // Sends nobody announced (see delivery/sweep.ts) are found at graphile-worker's own poll rate.
  const stopDeliverySweep = startSweep(deps.pool, pollInterval, (err) =>
    deps.log.warn({ err: String(err) }, 'delivery sweep failed'),
  );
  // Likewise the update forwards whose worker died mid-forward (domain/telegram/forwards.ts).
  const stopForwardSweep = startForwardSweep(deps.pool, pollInterval, (err) =>
    deps.log.warn({ err: String(err) }, 'forward sweep failed'),
  );
  // And the webhook events (domain/webhooks/deliver.ts).
  const stopWebhookSweep = startWebhookSweep(deps.pool, pollInterval, (err) =>
    deps.log.warn({ err: String(err) }, 'webhook sweep failed'),
  );
  const stopSweep = () => {
    stopDeliverySweep();
    stopForwardSweep();
    stopWebhookSweep();
  };
  // Beats for this runner's ids and releases the jobs of runners that stopped beating
  // (worker/heartbeat.ts).
  const heartbeat = startHeartbeat(
    deps.pool,
    () => workerIds,
    (err) => deps.log.warn({ err: String(err) }, 'runner heartbeat failed'),
    opts.heartbeatMs,
    opts.onBeat,
  );

  let asked = false;
  let ended = false;
  const onEnd = (reason: string) => {
    if (ended) return;
    ended = true;
    stopSweep();
    if (asked) return;
    // Its workers may still be running a job: beating goes on until they have all stopped, so
    // that no other runner releases (and runs again) a job still running here.
    void idle.then(() => heartbeat.stop());
    // The runner's cron and its listeners on the pool outlive its dead worker pool until the
    // runner itself is stopped: stopped here, so that a restarted runner does not run beside a
    // second cron, and repeated restarts leak nothing. (Its pool is no longer active, so this
    // does not wait on the pool's stuck shutdown: deferred, as the pool is marked inactive just
    // after it announces its shutdown.)
    setImmediate(
      () => void runner.stop(`the worker pool stopped on its own: ${reason}`).catch(() => undefined),
    );
    opts.onUnexpectedStop?.(reason, { workerIds: [...workerIds], idle });
  };
  events.on('pool:gracefulShutdown', ({ message }) => onEnd(message));
  events.on('pool:forcefulShutdown', ({ message }) => onEnd(message));
  void runner.promise.then(
    () => onEnd('the runner exited'),
    (err: unknown) => onEnd(`the runner failed: ${String(err)}`),
  );
  return {
    ...runner,
    stop: async (reason?: string) => {
      asked = true;
      try {
        await runner.stop(reason);
      } finally {
        // Stopped gracefully: its jobs were released, its beats go.
        await heartbeat.stop({ forget: true });
      }
    },
    kill: async (reason?: string) => {
      asked = true;
      try {
        await runner.kill(reason);
      } finally {
        await heartbeat.stop();
      }
    },
  };
}

function workerLogger(deps: Pick<Deps, 'log'>): Logger {
  const log = deps.log.child({ component: 'worker' });
  // graphile-worker's Logger takes a factory of (level, message, meta) functions.
  return new Logger(() => (level, message, meta) => {
    const line = workerLine(level, meta);
    const fn = { error: log.error, warn: log.warn, info: log.info, debug: log.debug }[line.level];
    fn.call(log, line.fields, message);
  });
}

/**
 * One short log line per graphile-worker message. Its job messages carry the whole job row: its
 * payload and key name Telegram users and visits (a welcome's chat, a webhook's lead) and run to
 * hundreds of characters. Only the task, the job id, the attempt and the duration are kept. A job
 * done is routine (debug); a failure stays a warning or an error.
 */
export function workerLine(
  level: string,
  meta: Record<string, unknown> | undefined,
): { level: 'error' | 'warn' | 'info' | 'debug'; fields: Record<string, unknown> } {
  const job = meta?.job as { id?: unknown; task_identifier?: unknown; attempts?: unknown } | undefined;
  const fields: Record<string, unknown> =
    job && typeof job === 'object'
      ? {
          task: job.task_identifier,
          jobId: job.id,
          attempt: job.attempts,
          ...(typeof meta?.duration === 'number' ? { ms: Math.round(meta.duration) } : {}),
        }
      : { meta };
  if (level === 'error') return { level: 'error', fields };
  if (level === 'warning') return { level: 'warn', fields };
  if (level === 'info' && !(job && meta?.success === true)) return { level: 'info', fields };
  return { level: 'debug', fields };
}
