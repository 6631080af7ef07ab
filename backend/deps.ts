import type { Config } from './config.js';
import type { SecretBox } from './crypto/secret-box.js';
import type { Pool } from './db/pool.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';
import type { ProcessState } from './process-state.js';

/**
 * What the service's parts are built from. Domain services take `Pick<Deps, …>` of what they use,
 * so a test builds exactly the parts it needs, all real.
 */
export interface Deps {
  config: Config;
  pool: Pool;
  /**
   * A session-mode pool (DATABASE_DIRECT_URL) for what a transaction-mode pooler cannot carry: the
   * job worker (LISTEN, session advisory locks) and migrations. Absent: `pool` is one.
   */
  directPool?: Pool;
  /** The read replica reports read from (REPORTS_DATABASE_URL). Absent: `pool`. */
  reportsPool?: Pool;
  log: Logger;
  metrics: Metrics;
  box: SecretBox;
  adminToken: string;
  /** The clock; tests move it instead of waiting. */
  now: () => Date;
  /** What this process holds in memory (queues, a cache); made with the process, closed with it. */
  local: ProcessState;
  /** Set in a process that runs the job worker: whether its runner works (for /readyz). */
  worker?: WorkerState;
}

/** What this process knows of its own job worker; absent in a process without one. */
export interface WorkerState {
  /** False while the runner is down (stopped on its own, not yet restarted). */
  running(): boolean;
}

/** The pool reports read from: the replica when there is one. */
export function reportsDb(deps: Pick<Deps, 'pool' | 'reportsPool'>): Pool {
  return deps.reportsPool ?? deps.pool;
}

/**
 * The dependencies of a job worker: everything it does runs on the session-mode pool, since
 * graphile-worker LISTENs and its tasks take session advisory locks.
 */
export function workerDeps<D extends Pick<Deps, 'pool' | 'directPool'>>(deps: D): D {
  return deps.directPool ? { ...deps, pool: deps.directPool } : deps;
}
