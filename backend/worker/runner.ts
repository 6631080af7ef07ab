import { Logger, run, type Runner, type TaskList } from 'graphile-worker';
import type { Deps } from '../deps.js';
import { startSweep } from '../delivery/sweep.js';
import { CRONTAB, createTaskList } from './tasks/index.js';

export interface WorkerOptions {
  concurrency?: number;
  /** Extra tasks (tests add their own); merged over the service's. */
  extraTasks?: TaskList;
  crontab?: string;
  /** graphile-worker's poll interval, and the delivery sweep's. */
  pollIntervalMs?: number;
}

/**
 * graphile-worker on the service's own database. Signal handling is ours (main.ts): on shutdown we
 * stop taking jobs, let running ones finish, and graphile-worker releases whatever is left.
 */
export async function startWorker(deps: Deps, opts: WorkerOptions = {}): Promise<Runner> {
  const pollInterval = opts.pollIntervalMs ?? 1000;
  const runner = await run({
    pgPool: deps.pool,
    concurrency: opts.concurrency ?? 8,
    noHandleSignals: true,
    pollInterval,
    taskList: { ...createTaskList(deps), ...opts.extraTasks },
    crontab: opts.crontab ?? CRONTAB,
    logger: workerLogger(deps),
    // graphile-worker 0.17 only waits for a job's completion at shutdown when completions are
    // batched; with a batch delay of 0 they are, so a job finishing during stop() is released
    // instead of staying locked for four hours.
    preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
  });
  runner.events.on('job:success', ({ job }) => deps.metrics.jobs.inc({ task: job.task_identifier, outcome: 'success' }));
  runner.events.on('job:error', ({ job, error }) => {
    deps.metrics.jobs.inc({ task: job.task_identifier, outcome: 'error' });
    deps.log.warn({ task: job.task_identifier, jobId: job.id, attempts: job.attempts, err: String(error) }, 'job failed');
  });
  runner.events.on('job:failed', ({ job }) => deps.metrics.jobs.inc({ task: job.task_identifier, outcome: 'failed' }));
  // Sends nobody announced (see delivery/sweep.ts) are found at graphile-worker's own poll rate.
  const stopSweep = startSweep(deps.pool, pollInterval, (err) => deps.log.warn({ err: String(err) }, 'delivery sweep failed'));
  void runner.promise.finally(stopSweep).catch(() => undefined);
  return runner;
}

function workerLogger(deps: Pick<Deps, 'log'>): Logger {
  const log = deps.log.child({ component: 'worker' });
  // graphile-worker's Logger takes a factory of (level, message, meta) functions.
  return new Logger(() => (level, message, meta) => {
    const fn = level === 'error' ? log.error : level === 'warning' ? log.warn : level === 'info' ? log.info : log.debug;
    fn.call(log, { meta }, message);
  });
}
