import { performance } from 'node:perf_hooks';
import { DELIVER_JOB_FLAGS } from '../domain/outbox/delivery-wake.js';

/**
 * Delivery passes back to back in one job, and one young pass at a time per worker process.
 *
 * Producers wake delivery after their commits (`domain/outbox/delivery-wake.ts`); a wake-up
 * writes a job only when none is waiting. A worker with idle slots used to take each such job at
 * once, so under steady load every wake-up (one per producer process every few milliseconds)
 * became a job beside the running one: an `add_job` and its NOTIFY, a fetch, a completion, and a
 * claim of the few sends committed since, each paying the statements' fixed costs.
 *
 * So while a pass this process started is young, its slots take no delivery job
 * (graphile-worker's `forbiddenFlags`: every delivery job carries `DELIVER_JOB_FLAGS`). The job a
 * wake-up queued meanwhile waits, the wake-ups after it see it waiting and write nothing, and the
 * slot whose pass ends takes it straight away (graphile-worker fetches the next job as soon as
 * one completes): the next pass claims everything committed during this one. Nothing waits
 * longer than a pass, and a pass stuck on a slow platform stops holding the others back once it
 * is `YOUNG_MS` old: the waiting job is then taken at a slot's next look (a wake-up's NOTIFY, or
 * the poll interval), as before. Other worker processes are not held back: they deliver beside
 * this one, splitting the due sends by SKIP LOCKED.
 */
const YOUNG_MS = 500;

/**
 * How long one job goes on with pass after pass while each finds something. Sends committed during
 * a pass are claimed by the next at once, with no wake-up job, fetch or completion between them;
 * the bound lets a graceful shutdown find the job done soon, and the job a wake-up queued
 * meanwhile takes over.
 */
const JOB_PASSES_MS = 1000;

/**
 * The least time from one pass's start to the next's within a job (see `drain`): under steady
 * load a pass then finds the sends of a few producer commits, not of one.
 */
const PASS_SPACING_MS = 25;

export class DeliveryGate {
  private readonly started = new Set<{ at: number }>();

  /** Runs one delivery pass; while it is young, `forbiddenFlags()` keeps other delivery jobs away. */
  async pass<T>(fn: () => Promise<T>): Promise<T> {
    const token = { at: performance.now() };
    this.started.add(token);
    try {
      return await fn();
    } finally {
      this.started.delete(token);
    }
  }

  /** Passes back to back until one claims nothing or the job has gone on for `JOB_PASSES_MS`. */
  async drain(fn: () => Promise<{ claimed: number }>): Promise<void> {
    const started = performance.now();
    for (;;) {
      const at = performance.now();
      const { claimed } = await this.pass(fn);
      if (claimed === 0 || performance.now() - started >= JOB_PASSES_MS) return;
      const rest = at + PASS_SPACING_MS - performance.now();
      if (rest > 0) await new Promise((r) => setTimeout(r, rest));
    }
  }

  /** For graphile-worker, before each fetch: the flags of the jobs this process should not take now. */
  forbiddenFlags(): string[] | null {
    const now = performance.now();
    for (const { at } of this.started) if (now - at < YOUNG_MS) return [...DELIVER_JOB_FLAGS];
    return null;
  }
}
