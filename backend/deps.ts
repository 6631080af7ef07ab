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
