import pg from 'pg';
import { ApiError } from '../errors.js';
import { conflictPause, isLockConflict, LOCK_CONFLICT_TRIES } from './lock-conflict.js';
import type { Pool, PoolClient } from './pool.js';
import { isDatabaseUnavailable } from './unavailable.js';
import { QueueExpiry } from './queue-expiry.js';
import { ensurePrepared, execute, type PreparedCall } from './prepared-batch.js';

/**
 * Work under a lock, several to a transaction when they arrive together. Generic: what the lock
 * is (`BatchLocks.lockStatement`) and which rows the work may change (`BatchLocks.lockRows`)
 * are the caller's; the business events run here under the lead lock (see
 * `domain/conversions/event-batches.ts`), the way graphile-worker's local queue keeps its
 * batching out of the tasks.
 *
 * Each work is a `LockedWork`: a read taken under its lock, the work on the rows read, an optional
 * claim made right after the lock and an optional record of the result committed with it.
 *
 * An event alone costs PostgreSQL more in round trips and in its commit than in its rows (see
 * docs/benchmarks.md#business-api). So events that wait while others are in flight go together:
 * one transaction takes their locks and their reads in one round trip, runs each event's rules
 * in turn on the rows it read, and sends every event's write with the COMMIT in another; with
 * Idempotency-Keys, the answers to store, each with its key's claim in the same row, go in that
 * round trip too, carried by the writes' statement (`SharedStatement.carries`, which fills in what
 * of an answer its rows decide) or in one of their own. A lone event is a batch of one, with the
 * round trips the work alone (`withLeadLock`) would take.
 *
 * What keeps the batch equal to the events run one by one:
 * - one batch never holds two events of one (account, Telegram user), nor two of one
 *   Idempotency-Key, and none that a batch in flight holds; so no event's read can miss another
 *   event of the batch that it would have seen, and no batch waits on another of this process;
 * - every lock is taken in the one order of docs/architecture.md#lock-order, the order a lone
 *   event and delivery follow too: the lead locks in the order of their keys (in the first round
 *   trip, with the reads), then the existing conversions the events may change, by id, with their
 *   sends, by id (`locks`, in one more round trip when there are two or more), before any event's
 *   rules run; the Idempotency-Keys' claims come last, in the order of their keys, written with
 *   their answers in the round trip of the COMMIT (after the writes a statement carrying them
 *   makes first). So batches, lone events and delivery's outcome
 *   writes (of this or other processes) that meet wait for each other rather than deadlock;
 * - a key another request (of another process) holds fails its claim: the batch is rolled back;
 * - a batch PostgreSQL ends for a deadlock or a serialization failure anyway kept nothing and is
 *   run again as it was, a few times, before its events are run alone;
 * - any other failure before the COMMIT was sent (an event's rule refusing it, a statement
 *   failing, a claimed key) rolls the whole batch back, and every event of it is run again alone
 *   by `withLeadLock`, which answers each event as it would have been answered alone; a failure
 *   of the round trip that carried the COMMIT is the one case whose outcome is unknown, and it is
 *   reported to every event of the batch, as a lone event reports it.
 */

/**
 * A statement the works of a batch share: the statements of one `kind` go as one, `statement` of
 * their inputs in the batch's order (alone, of the one input), which PostgreSQL runs for the
 * price of one statement's set-up (docs/benchmarks.md#business-api).
 */
export interface SharedStatement {
  kind: string;
  input: unknown;
  statement: (inputs: unknown[]) => PreparedCall;
  /**
   * Records (`LockedWork.persist`'s writes) of kind `kind` that this statement can write itself:
   * then they go in it, `statement` of its inputs and theirs, instead of in a statement of their own.
   */
  carries?: { kind: string; statement: (inputs: unknown[], records: unknown[]) => PreparedCall } | undefined;
}

/** A read the works of a batch share; `rowsOf` picks the rows of the `i`-th input from the statement's. */
export interface SharedRead<R> extends SharedStatement {
  rowsOf: (rows: readonly unknown[], i: number) => R[];
}

/** A last write the works of a batch share; each work reads its own result from all the statement's rows. */
export type SharedWrite = SharedStatement;

/** What the work under the lock ends with: its result, or a last write sent with the COMMIT and the result read from its rows. */
export type LockedFinish<T> =
  | { result: T }
  | {
      last: SharedWrite;
      result: (rows: never[]) => T;
      /**
       * The result's record, made before the result is known, for a `last` that carries it
       * (`SharedStatement.carries`): with it the record costs no round trip of its own; without it
       * a work with `persist` sends `last` alone and records its result with the COMMIT.
       */
      record?: SharedWrite | null | undefined;
    };

/**
 * The statements for `shared` (one per kind, in order of first use), the statement of each, and
 * its place among that statement's inputs.
 */
export function shareStatements(shared: readonly SharedStatement[]): {
  calls: PreparedCall[];
  callOf: number[];
  inputOf: number[];
} {
  const kinds = new Map<string, { at: number; first: SharedStatement; inputs: unknown[] }>();
  const inputOf: number[] = [];
  const callOf = shared.map((one) => {
    let group = kinds.get(one.kind);
    if (group === undefined) kinds.set(one.kind, (group = { at: kinds.size, first: one, inputs: [] }));
    inputOf.push(group.inputs.length);
    group.inputs.push(one.input);
    return group.at;
  });
  const calls = [...kinds.values()].map((g) => g.first.statement(g.inputs));
  return { calls, callOf, inputOf };
}

/**
 * The statements for the last writes `lasts` and the records `records`, to send together: a
 * record goes in a last write's statement that carries its kind, any other in a statement of its
 * own after the writes' (in the order given). `callOf[i]`: the statement of `lasts[i]`.
 */
export function writeStatements(
  lasts: readonly SharedWrite[],
  records: readonly SharedWrite[],
): { calls: PreparedCall[]; callOf: number[] } {
  const writes = shareStatements(lasts);
  // The statement that carries each kind of record: the first that can.
  const carrierOf = new Map<string, number>();
  lasts.forEach((w, i) => {
    if (w.carries !== undefined && !carrierOf.has(w.carries.kind))
      carrierOf.set(w.carries.kind, writes.callOf[i]!);
  });
  const carried = new Map<number, { records: unknown[]; carries: NonNullable<SharedWrite['carries']> }>();
  const own: SharedWrite[] = [];
  for (const record of records) {
    const at = carrierOf.get(record.kind);
    if (at === undefined) {
      own.push(record);
      continue;
    }
    const carries = lasts.find((w, i) => writes.callOf[i] === at && w.carries?.kind === record.kind)!
      .carries!;
    const group = carried.get(at) ?? { records: [], carries };
    group.records.push(record.input);
    carried.set(at, group);
  }
  const calls = writes.calls.map((call, at) => {
    const group = carried.get(at);
    if (group === undefined) return call;
    const inputs = lasts.filter((_, i) => writes.callOf[i] === at).map((w) => w.input);
    return group.carries.statement(inputs, group.records);
  });
  return { calls: [...calls, ...shareStatements(own).calls], callOf: writes.callOf };
}

/**
 * A claim the transaction makes (the business API's Idempotency-Key), written by the work's
 * `persist` with its answer: one insert, sent with the COMMIT, that fails with a unique violation
 * (`isClaimConflict`) when another request holds the claim. A concurrent holder makes the insert
 * wait for its transaction; if that one commits, the transaction is rolled back and `taken()` is
 * thrown. Last, after every other lock: a transaction waiting for a claim holds all its other
 * locks already, and the holder it waits for, past all of its own, waits for nothing but claims,
 * which every transaction takes in the order of their ids; so no two transactions ever hold a
 * claim and a lock crosswise.
 */
export interface LockedClaim {
  /** What the claim claims (two claims with one id never run in one batch). */
  id: string;
  taken: () => Error;
}

/** Work in one transaction under a lock (`withLeadLock` alone, or batched here). */
export interface LockedWork<T, R> {
  /** The first read, in the lock's round trip (one statement for the reads of a batch). */
  read: SharedRead<R>;
  /** The work on the rows read. */
  fn: (tx: PoolClient, rows: R[]) => Promise<LockedFinish<T>>;
  /**
   * A write that records the result in the same transaction (the business API's idempotent
   * answer): it travels with the COMMIT, so the answer is stored exactly when the work is.
   */
  persist?: ((result: T) => SharedWrite | null) | undefined;
  claim?: LockedClaim | undefined;
  /**
   * The existing rows the work may lock, from its read's rows. Alone, the work locks its own; a
   * batch locks those of all its works first, in id order (`BatchLocks.lockRows`).
   */
  locks?: ((rows: R[]) => readonly string[]) | undefined;
}

/** A work to batch: its lock's key, and how it runs alone when its batch cannot take it. */
export interface BatchedWork<T, R> extends LockedWork<T, R> {
  /** Safe to write into the lock statement's text; two works of one key never share a batch. */
  lockKey: string;
  alone: () => Promise<T>;
}

/** What a batcher's locks are. */
export interface BatchLocks {
  /** The statement that takes the locks of `keys` (distinct, sorted), in the one lock order. */
  lockStatement: (keys: readonly string[]) => string;
  /** Locks the rows (two or more) that the batch's works may change, before any work runs. */
  lockRows: (tx: PoolClient, ids: readonly string[]) => Promise<void>;
}

/** Events in flight at most per batch; more wait for the next. */
export const MAX_BATCH_EVENTS = 32;
/**
 * Batches in flight at once per pool: two, so that one batch's commit overlaps the next one's
 * reads. More only makes the batches smaller and dearer (`npm run bench -- api`, two runs each:
 * two in flight 0.57–0.59 of the bare ceiling, four 0.51–0.54, eight 0.44–0.48).
 */
export const MAX_BATCHES_IN_FLIGHT = 2;

/**
 * How long an event may wait for a transaction before it is answered 503 (the pool's own wait for
 * a connection): only reached when PostgreSQL holds every open transaction on locks, or is gone.
 */
export const QUEUE_WAIT_MS = 10_000;

type Fn<T, R> = LockedWork<T, R>['fn'];
type RowLocks<R> = (rows: R[]) => readonly string[];

interface Job {
  /** `performance.now()` when it was queued. */
  queuedAt: number;
  lockKey: string;
  claimId: string | undefined;
  read: SharedRead<unknown>;
  fn: Fn<unknown, unknown>;
  persist: ((result: unknown) => SharedWrite | null) | undefined;
  claim: LockedClaim | undefined;
  locks: RowLocks<unknown> | undefined;
  alone: () => Promise<unknown>;
  resolve(result: unknown): void;
  reject(error: unknown): void;
}

/** Where a job stands inside its batch. */
interface Placed {
  job: Job;
  finish?: LockedFinish<unknown>;
  result?: unknown;
}

/** How a shared transaction ended, with how many events it held. */
export type BatchOutcome = 'committed' | 'ran_alone' | 'refused' | 'unavailable' | 'unknown';
export type BatchObserver = (events: number, outcome: BatchOutcome) => void;

/** The batches of one pool, held by the process (see `process-state.ts`). */
export class TransactionBatcher {
  observer: BatchObserver = () => undefined;
  private queueWaitMs = QUEUE_WAIT_MS;
  private queue: Job[] = [];
  /** Armed while events wait: one timer for all of them, not one per event. */
  private readonly expiry = new QueueExpiry<Job>(
    () => this.queue,
    () => this.queueWaitMs,
    'the database is too busy to take this event now; retry shortly',
  );
  private inFlight = 0;
  private readonly heldLocks = new Set<string>();
  private readonly heldClaims = new Set<string>();

  constructor(
    private readonly pool: Pool,
    private readonly locking: BatchLocks,
  ) {}

  /** Runs the work, batched with the others that wait at the same time (same results and errors as alone). */
  run<T, R>({ lockKey, read, fn, persist, claim, locks, alone }: BatchedWork<T, R>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({
        queuedAt: performance.now(),
        lockKey,
        claimId: claim?.id,
        read,
        fn: fn as Fn<unknown, unknown>,
        persist: persist as ((result: unknown) => SharedWrite | null) | undefined,
        claim,
        locks: locks as RowLocks<unknown> | undefined,
        alone,
        resolve: resolve as (result: unknown) => void,
        reject,
      });
      this.pump();
      this.expiry.arm();
    });
  }

  /** How many works wait for a transaction (none of them in one yet). */
  get waiting(): number {
    return this.queue.length;
  }

  /** The process is closing: the expiry timer goes (events still queued are answered as they run). */
  close(): void {
    this.expiry.disarm();
  }

  /** Replaces `QUEUE_WAIT_MS` (tests). */
  setQueueWait(ms: number): void {
    this.queueWaitMs = ms;
    // The armed timer was set for the old wait.
    this.expiry.disarm();
    this.expiry.arm();
  }

  /** Starts batches while there is room and work that no batch in flight conflicts with. */
  private pump(): void {
    while (this.inFlight < MAX_BATCHES_IN_FLIGHT && this.queue.length > 0) {
      const batch = this.take();
      if (batch.length === 0) return;
      this.inFlight += 1;
      void this.runBatch(batch).finally(() => {
        this.inFlight -= 1;
        for (const job of batch) {
          this.heldLocks.delete(job.lockKey);
          if (job.claimId !== undefined) this.heldClaims.delete(job.claimId);
        }
        this.pump();
      });
    }
  }

  /** The oldest waiting events that can go together, in arrival order; the rest keep their places. */
  private take(): Job[] {
    const batch: Job[] = [];
    const rest: Job[] = [];
    for (const job of this.queue) {
      const clash =
        this.heldLocks.has(job.lockKey) || (job.claimId !== undefined && this.heldClaims.has(job.claimId));
      if (batch.length >= MAX_BATCH_EVENTS || clash) {
        rest.push(job);
        continue;
      }
      batch.push(job);
      this.heldLocks.add(job.lockKey);
      if (job.claimId !== undefined) this.heldClaims.add(job.claimId);
    }
    this.queue = rest;
    return batch;
  }

  private async runBatch(jobs: Job[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const placed: Placed[] = jobs.map((job) => ({ job }));
      const ended = await this.attempt(jobs, placed, attempt < LOCK_CONFLICT_TRIES);
      if (ended === 'again') {
        await conflictPause(attempt);
        continue;
      }
      if (ended === 'committed') {
        this.report(jobs.length, 'committed');
        for (const p of placed) p.job.resolve(p.result);
      }
      return;
    }
  }

  /**
   * One run of the batch's transaction: committed, to be run again (PostgreSQL ended it for a lock
   * conflict, and `retry` allows another run), or settled otherwise (its events answered).
   */
  private async attempt(
    jobs: Job[],
    placed: Placed[],
    retry: boolean,
  ): Promise<'committed' | 'again' | 'settled'> {
    let client: PoolClient | undefined;
    let commitSent = false;
    try {
      client = await this.pool.connect();
      await this.steps(client, placed, () => (commitSent = true));
      client.release();
      return 'committed';
    } catch (error) {
      if (commitSent && !(error instanceof pg.DatabaseError)) {
        // The round trip carrying the COMMIT broke: whether it committed is unknown, as for a lone event.
        client?.release(error instanceof Error ? error : true);
        this.report(jobs.length, 'unknown');
        for (const job of jobs) job.reject(error);
        return 'settled';
      }
      // PostgreSQL refused a statement (the COMMIT is then skipped) or nothing reached it, or an
      // event's rule refused it: nothing of the batch was committed, and each event runs alone.
      if (client !== undefined) {
        const rolledBack = await client.query('ROLLBACK').then(
          () => true,
          () => false,
        );
        client.release(!rolledBack);
      }
      if (retry && isLockConflict(error)) return 'again';
      if (isDatabaseUnavailable(error)) {
        // The database did not answer (or timed out, or is a standby now): nothing was committed,
        // and running each event alone would only wait on it again, holding this slot as long.
        this.report(jobs.length, 'unavailable');
        for (const job of jobs) job.reject(error);
        return 'settled';
      }
      const [only] = jobs;
      if (jobs.length === 1 && error instanceof ApiError) {
        // A lone event its rules refused: alone it would be refused the same way (its key, if it
        // has one, is claimed only with the COMMIT, as alone), so it is not run again.
        this.report(1, 'refused');
        only!.reject(error);
        return 'settled';
      }
      this.report(jobs.length, 'ran_alone');
      await Promise.all(jobs.map((job) => this.alone(job)));
      return 'settled';
    }
  }

  /** Tells the observer, which must never keep an event from its answer. */
  private report(events: number, outcome: BatchOutcome): void {
    try {
      this.observer(events, outcome);
    } catch {
      // Metrics only.
    }
  }

  private async alone(job: Job): Promise<void> {
    try {
      job.resolve(await job.alone());
    } catch (error) {
      job.reject(error);
    }
  }

  /** The batch's transaction, up to its COMMIT; each event's result is left in its place. */
  private async steps(client: PoolClient, placed: Placed[], sendingCommit: () => void): Promise<void> {
    const reads = shareStatements(placed.map((p) => p.job.read));
    for (const call of reads.calls) await ensurePrepared(client, call);
    const lockKeys = [...new Set(placed.map((p) => p.job.lockKey))].sort(compare);
    // The lead locks, then the reads: one round trip.
    const opened = results(
      await client.query(
        [
          'BEGIN',
          this.locking.lockStatement(lockKeys),
          ...reads.calls.map((call) => execute(client, call)),
        ].join('; '),
      ),
    );
    const rowsRead = placed.map((p, i) =>
      p.job.read.rowsOf(opened[2 + reads.callOf[i]!]!.rows, reads.inputOf[i]!),
    );
    const read = (i: number) => rowsRead[i]!;
    // The existing conversions the events may change, and their sends, locked before any event's
    // rules run, in id order: each event alone would lock its own in the batch's event order.
    const rowLocks = [...new Set(placed.flatMap((p, i) => p.job.locks?.(read(i)) ?? []))];
    if (rowLocks.length > 1) await this.locking.lockRows(client, rowLocks);
    for (const [i, p] of placed.entries()) p.finish = await p.job.fn(client, read(i));
    // The events' last writes, one statement per kind for all of them.
    const writes = placed.filter((p) => 'last' in p.finish!);
    const lasts = writes.map((p) => (p.finish as { last: SharedWrite }).last);
    const settle = (rows: { rows: unknown[] }[], callOf: number[]) => {
      writes.forEach(
        (p, i) =>
          (p.result = (p.finish as { result: (rows: never[]) => unknown }).result(
            rows[callOf[i]!]!.rows as never[],
          )),
      );
      for (const p of placed) if (!('last' in p.finish!)) p.result = p.finish!.result;
    };
    const claimOrder = (p: Placed) => p.job.claimId ?? '';
    const inClaimOrder = [...placed].sort((a, b) => compare(claimOrder(a), claimOrder(b)));
    const recordedLate = (p: Placed) =>
      p.job.persist !== undefined && 'last' in p.finish! && p.finish.record === undefined;
    if (!placed.some(recordedLate)) {
      // Every record is known before the writes (a result's, or one its write carries): the writes
      // and the records, those that claim a key in the order of their keys (the one order of
      // claims), go with the COMMIT. A key another request holds fails its claim, and the batch
      // is rolled back and run alone.
      const records = inClaimOrder.flatMap((p) =>
        'last' in p.finish! ? (p.finish.record ?? []) : (p.job.persist?.(p.finish!.result) ?? []),
      );
      const { calls, callOf } = writeStatements(lasts, records);
      for (const call of calls) await ensurePrepared(client, call);
      sendingCommit();
      settle(
        results(await client.query([...calls.map((call) => execute(client, call)), 'COMMIT'].join('; '))),
        callOf,
      );
      return;
    }
    // Some records need the writes' rows: the writes go first, the records with the COMMIT.
    const { calls, callOf } = shareStatements(lasts);
    for (const call of calls) await ensurePrepared(client, call);
    const writeSql = calls.map((call) => execute(client, call));
    settle(writeSql.length === 0 ? [] : results(await client.query(writeSql.join('; '))), callOf);
    const records = inClaimOrder.flatMap((p) => p.job.persist?.(p.result) ?? []);
    // The answers of one kind in one statement, in that order.
    const answers = shareStatements(records).calls;
    for (const call of answers) await ensurePrepared(client, call);
    sendingCommit();
    await client.query([...answers.map((call) => execute(client, call)), 'COMMIT'].join('; '));
  }
}

/** A multi-statement query's results, one per statement (pg returns a lone result bare). */
function results(r: unknown): { rows: unknown[] }[] {
  return Array.isArray(r) ? (r as { rows: unknown[] }[]) : [r as { rows: unknown[] }];
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
