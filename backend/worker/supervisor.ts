import type { Runner } from 'graphile-worker';
import type { Deps } from '../deps.js';
import type { WorkerState } from '../deps.js';
import { startWorker, type Orphans, type WorkerOptions } from './runner.js';

/**
 * Delivery that never stops silently. graphile-worker's runner can stop on its own (a PostgreSQL
 * restart while jobs run: see `runner.ts`); nothing in it starts again. So:
 *
 * - `restart` (the inline worker of `npm start`): a new runner is started with backoff until one
 *   starts (starting one needs the database, so this also waits out the outage), and the jobs the
 *   dead runner's workers held locked are released once they have finished.
 * - `exit` (`npm run worker`): `ended` resolves; the process releases what it can and exits
 *   non-zero, and its supervisor (systemd, Docker, Kubernetes) starts a fresh one.
 *
 * Either way `running()` is false meanwhile, which /readyz reports as a stalled delivery.
 */
export interface SupervisedWorker extends WorkerState {
  /** Resolves with the reason when the runner stopped on its own (`exit` mode only). */
  ended: Promise<string>;
  /** Stops the runner (and any pending restart). */
  stop(): Promise<void>;
}

export interface SuperviseOptions {
  onUnexpectedStop: 'restart' | 'exit';
  worker?: Omit<WorkerOptions, 'onUnexpectedStop'>;
  /** First and longest wait between restart attempts. */
  restartDelayMs?: { min: number; max: number };
}

/**
 * How long an exiting worker process waits for its running jobs to end and then to release them
 * before it goes anyway: a delivery job keeps trying to write what a platform accepted for as long
 * as its lease lasts (40 s, `delivery/options.ts`), and leaving before would send those events
 * again; then 10 s to release the locks.
 */
const EXIT_RELEASE_MS = 50_000;

const UNLOCK_SQL = 'SELECT graphile_worker.force_unlock_workers($1::text[])';

export async function superviseWorker(deps: Deps, opts: SuperviseOptions): Promise<SupervisedWorker> {
  const { min, max } = opts.restartDelayMs ?? { min: 500, max: 30_000 };
  let runner: Runner | null = null;
  let stopped = false;
  let attempt = 0;
  let retryTimer: NodeJS.Timeout | null = null;
  /** Set when an exiting process stops trying to release its jobs. */
  let giveUp = false;
  let endedWith: (reason: string) => void = () => undefined;
  const ended = new Promise<string>((ok) => (endedWith = ok));

  const onUnexpectedStop = (reason: string, orphans: Orphans) => {
    runner = null;
    if (stopped) return;
    if (opts.onUnexpectedStop === 'exit') {
      deps.log.error(
        { reason },
        'the job worker stopped on its own; exiting so that the supervisor restarts the process',
      );
      // Its running jobs end first (a delivery job writes what the platform accepted once the
      // database is back), then its locked jobs are released if the database answers (best
      // effort: otherwise the runners' sweep of dead workers releases them, worker/heartbeat.ts).
      // (A timer that keeps the process alive: with the runner gone nothing else may, and Node
      // would end the process with 0 on an empty event loop.)
      const bound = new Promise((r) => setTimeout(r, EXIT_RELEASE_MS));
      void Promise.race([releaseOrphans(orphans), bound]).finally(() => {
        giveUp = true;
        endedWith(reason);
      });
      return;
    }
    deps.log.error({ reason }, 'the job worker stopped on its own; restarting it');
    void releaseOrphans(orphans);
    scheduleRestart();
  };

  /**
   * Releases the dead runner's locked jobs once its workers are idle (a job still running there
   * must not run twice), retrying with backoff while the database is away.
   */
  const releaseOrphans = async (orphans: Orphans) => {
    await orphans.idle;
    for (let i = 0; !stopped && !giveUp; i++) {
      try {
        await deps.pool.query(UNLOCK_SQL, [orphans.workerIds]);
        return;
      } catch {
        await new Promise((r) => setTimeout(r, Math.min(max, min * 2 ** i)).unref());
      }
    }
  };

  const start = () => startWorker(deps, { ...opts.worker, onUnexpectedStop });

  const scheduleRestart = () => {
    // Exponential with jitter, so that a fleet restarted by one database failover does not stampede.
    const delay = Math.min(max, min * 2 ** attempt) * (0.5 + Math.random() / 2);
    attempt++;
    retryTimer = setTimeout(() => {
      retryTimer = null;
      void tryRestart();
    }, delay);
  };

  const tryRestart = async () => {
    if (stopped) return;
    try {
      const r = await start();
      if (stopped) {
        await r.stop();
        return;
      }
      runner = r;
      attempt = 0;
      deps.log.error('the job worker was restarted');
    } catch (err) {
      deps.log.warn({ err: String(err), attempt }, 'the job worker could not be restarted yet');
      scheduleRestart();
    }
  };

  runner = await start();
  return {
    running: () => runner !== null,
    ended,
    async stop() {
      stopped = true;
      if (retryTimer) clearTimeout(retryTimer);
      const r = runner;
      runner = null;
      await r?.stop();
    },
  };
}
