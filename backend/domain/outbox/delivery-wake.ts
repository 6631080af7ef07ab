import type { Pool } from '../../db/pool.js';

/**
 * Waking the delivery worker after sends were committed.
 *
 * The sends table is the queue (see `sends.ts`); a graphile-worker job is only the signal that
 * something is due. Writing that job inside every producing transaction (as one job per send used
 * to) cost the hot paths a PL/pgSQL job upsert and a `NOTIFY` per request, and PostgreSQL
 * serialises the commits of notifying transactions: measured, it halved `track/init` with a pixel.
 * So producers commit their sends alone and then call `wakeDelivery`, which adds one keyed
 * `deliver_due` job (the key folds repeated wake-ups into one queued job) outside their
 * transaction:
 *
 * - the first wake-up after a quiet spell goes out at once, so a lone event is not delayed;
 * - during a burst, the wake-ups of one process are coalesced to one per `WAKE_SPACING_MS`: the
 *   job claims every due send anyway, so one per burst is enough;
 * - if the process dies between its commit and the wake-up, or the wake-up fails, the worker's
 *   sweep (`backend/delivery/sweep.ts`, every poll interval) finds the due sends: nothing is lost,
 *   it is only later.
 *
 * A wake-up must follow the commit, never precede it: a worker woken before the commit could find
 * nothing due, finish, and leave the send to the sweep.
 */
export const DELIVER_TASK = 'deliver_due';

/** Jobs only fail when the database does (platform failures are handled by the task itself). */
export const DELIVER_JOB_MAX_ATTEMPTS = 25;

/** At most one wake-up per process this often while sends keep coming. */
export const WAKE_SPACING_MS = 10;

// A wake-up already queued, due and not yet taken by a worker will see our sends (they were
// committed before we looked, so before any worker takes that job and claims): then nothing is
// written. Otherwise add_job upserts the keyed job (which also revives one waiting out a failure's
// backoff, or one that has used up its attempts), or, when the queued one is being run already,
// adds a new one beside it. Skipping the write matters under load, where most wake-ups find one
// queued.
const WAKE_SQL = `SELECT graphile_worker.add_job($1::text, '{}'::json, job_key := $1::text, job_key_mode := 'replace', max_attempts := $2::int, flags := $3::text[])
  WHERE NOT EXISTS (SELECT 1 FROM graphile_worker.jobs
                    WHERE key = $1::text AND locked_at IS NULL AND run_at <= now() AND attempts < max_attempts)`;

/**
 * The flag every delivery job carries. A worker process that has just started a delivery pass
 * takes no other delivery job until that pass is done or has run a while (`delivery/pass-gate.ts`):
 * the wake-ups that arrive meanwhile find the one job they queued still waiting and write
 * nothing, and the next pass claims everything they announced at once.
 */
export const DELIVER_JOB_FLAGS: readonly string[] = ['deliver'];

/**
 * The wake-up as a statement: sent by the waker, by `wakeDeliveryNow` and by the sweep. Named, so
 * that each connection plans it once: unnamed, planning it cost twice its execution (measured
 * with `pg_stat_statements.track_planning`: 0.47 ms of planning against 0.25 ms of execution per
 * call, at up to a hundred calls a second per process).
 */
const WAKE_STATEMENT = {
  name: 'capigram_wake_delivery',
  text: WAKE_SQL,
  values: [DELIVER_TASK, DELIVER_JOB_MAX_ATTEMPTS, `{${DELIVER_JOB_FLAGS.join(',')}}`],
} as const;

/** `WAKE_STATEMENT` as the driver takes it (a query config of its own, with its values). */
export function wakeQuery(): { name: string; text: string; values: unknown[] } {
  return { ...WAKE_STATEMENT, values: [...WAKE_STATEMENT.values] };
}

type ErrorSink = (err: unknown) => void;

/**
 * The wake-ups of one pool, spaced: one in flight at a time, then a pause, then one more if any
 * was asked for meanwhile. Held by the process (`process-state.ts`); a failed wake-up goes to
 * `onError` and is left to the sweep.
 */
export class DeliveryWaker {
  private inFlight = false;
  private cooling = false;
  private wanted = false;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly onError: ErrorSink = () => undefined,
  ) {}

  /**
   * Tells a delivery worker that sends are due. Call it after the transaction that created or
   * re-queued them has committed. Never throws and never waits.
   */
  wake(): void {
    if (this.closed) return;
    if (this.inFlight || this.cooling) {
      this.wanted = true;
      return;
    }
    this.fire();
  }

  private fire(): void {
    this.inFlight = true;
    this.wanted = false;
    this.pool
      .query(wakeQuery())
      .catch((err: unknown) => this.onError(err))
      .finally(() => {
        this.inFlight = false;
        this.cooling = true;
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.cooling = false;
          if (this.wanted && !this.closed) this.fire();
        }, WAKE_SPACING_MS);
        this.timer.unref();
      });
  }

  /** No more wake-ups (the process is closing; the sweep finds whatever is left). */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }
}

/**
 * One wake-up, awaited: for a short-lived process (the CLI) that must not exit before it is
 * queued. A failure is swallowed for the same reason as above: the sends are committed, and the
 * sweep will find them.
 */
export async function wakeDeliveryNow(pool: Pool): Promise<void> {
  await pool.query(wakeQuery()).catch(() => undefined);
}
