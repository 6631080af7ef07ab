import pg from 'pg';
import type { Pool, PoolClient } from '../../db/pool.js';
import { QueueExpiry } from '../../db/queue-expiry.js';

import type { DeliveryWaker } from '../outbox/delivery-wake.js';
import {
  recordVisitAlone,
  settleVisit,
  visitsCall,
  type NewVisit,
  type RecordedVisit,
  type VisitAdmission,
  type VisitStatementRow,
} from './visits.js';

/**
 * `track/init`'s visits, several to a transaction when they arrive together.
 *
 * A visit is one statement, but alone it still costs a round trip and a commit (a WAL flush) of
 * its own, which at 50 clients weigh more than its rows (docs/benchmarks.md#tracker). So visits
 * that wait while others are in flight go together, as business events do
 * (`db/transaction-batch.ts`, `conversions/event-batches.ts`): one statement records them all
 * (`visitsCall`), so that PostgreSQL pays a statement's set-up once for the batch, not once per
 * visit. A lone visit (nothing in flight) runs at once as it always did, in a statement of its own.
 *
 * What keeps the batch equal to the visits recorded one by one:
 * - each visit is answered as it would be alone: a rate-limit refusal or a visitRequestId of
 *   another browser is an answer, not an error, and the refused visit's count is committed as it
 *   would be alone;
 * - a batch holds each rate-limit counter and each (site, visitRequestId) once, takes its counters
 *   in the order of their keys, and no two batches of a process in flight hold one counter or one
 *   (site, visitRequestId); so batches of one process never wait on each other, and batches of two
 *   processes that meet wait rather than deadlock (should PostgreSQL still end one, the next rule
 *   applies);
 * - any failure of the statement (PostgreSQL refused it, a deadlock, no connection) kept nothing
 *   of the batch, and each of its visits is recorded again alone, with the answer it would have
 *   had alone: one visit's bad data costs the others nothing;
 * - a round trip that broke after it was sent is the one case whose outcome is unknown: every
 *   visit of the batch gets the error, as a lone visit whose statement's connection broke does.
 *
 * A visit answers 2xx only after the statement that holds it (and its PageView sends) committed.
 */

/** Visits per shared transaction at most; more wait for the next. */
export const MAX_BATCH_VISITS = 32;
/**
 * Batches in flight at once per pool. Two, as for business events: one batch's commit overlaps the
 * next one's statements (see docs/benchmarks.md#tracker for the figures).
 */
export const MAX_VISIT_BATCHES_IN_FLIGHT = 2;
/** How long a visit may wait for a transaction before it is answered 503 (the pool's own wait). */
export const VISIT_QUEUE_WAIT_MS = 10_000;

/** How a shared transaction ended, with how many visits it held. */
export type VisitBatchOutcome = 'committed' | 'ran_alone' | 'unknown';
export type VisitBatchObserver = (visits: number, outcome: VisitBatchOutcome) => void;

interface Job {
  queuedAt: number;
  visit: NewVisit;
  admission: VisitAdmission | undefined;
  /** The counter and the (site, visitRequestId) it writes, as held by a batch in flight. */
  keys: string[];
  resolve(v: RecordedVisit): void;
  reject(error: unknown): void;
}

/**
 * One per process (`process-state.ts`), over its pool: visits of two processes never share a
 * transaction, and meet only in PostgreSQL (as the rules above expect).
 */
export class VisitBatcher {
  observer: VisitBatchObserver = () => undefined;
  /** How long a visit may wait; `VISIT_QUEUE_WAIT_MS` unless a test shortens it. */
  queueWaitMs = VISIT_QUEUE_WAIT_MS;
  private queue: Job[] = [];
  private readonly expiry = new QueueExpiry<Job>(
    () => this.queue,
    () => this.queueWaitMs,
    'the database is too busy to record this visit now; retry shortly',
  );
  private inFlight = 0;
  private readonly held = new Set<string>();

  constructor(
    private readonly pool: Pool,
    private readonly waker: Pick<DeliveryWaker, 'wake'>,
  ) {}

  /** Stops the expiry timer (the process is closing; what is in flight finishes on its own). */
  close(): void {
    this.expiry.disarm();
  }

  record(visit: NewVisit, admission: VisitAdmission | undefined): Promise<RecordedVisit> {
    const keys: string[] = [];
    if (admission?.key !== undefined) keys.push(`counter:${admission.key}`);
    if (visit.visitRequestId !== undefined) keys.push(`visit:${visit.siteId}:${visit.visitRequestId}`);
    return new Promise<RecordedVisit>((resolve, reject) => {
      this.queue.push({ queuedAt: performance.now(), visit, admission, keys, resolve, reject });
      this.pump();
      this.expiry.arm();
    });
  }

  private pump(): void {
    while (this.inFlight < MAX_VISIT_BATCHES_IN_FLIGHT && this.queue.length > 0) {
      const batch = this.take();
      if (batch.length === 0) return;
      this.inFlight += 1;
      void this.run(batch).finally(() => {
        this.inFlight -= 1;
        for (const job of batch) for (const key of job.keys) this.held.delete(key);
        this.pump();
      });
    }
  }

  /** The oldest waiting visits that can go together; the rest keep their places. */
  private take(): Job[] {
    const batch: Job[] = [];
    const rest: Job[] = [];
    for (const job of this.queue) {
      if (batch.length >= MAX_BATCH_VISITS || job.keys.some((k) => this.held.has(k))) {
        rest.push(job);
        continue;
      }
      batch.push(job);
      for (const key of job.keys) this.held.add(key);
    }
    this.queue = rest;
    // The counters in key order (see above); visits of one counter keep their arrival order.
    return batch
      .map((job, i) => ({ job, i }))
      .sort((a, b) => compare(a.job.keys[0] ?? '', b.job.keys[0] ?? '') || a.i - b.i)
      .map((p) => p.job);
  }

  private async run(jobs: Job[]): Promise<void> {
    if (jobs.length === 1) {
      const [job] = jobs;
      await this.alone(job!);
      return;
    }
    const call = visitsCall(jobs);
    if (call === null) {
      this.report(jobs.length, 'ran_alone');
      await Promise.all(jobs.map((job) => this.alone(job)));
      return;
    }
    let client: PoolClient | undefined;
    let sent = false;
    try {
      client = await this.pool.connect();
      sent = true;
      // One statement for the whole batch: it commits on its own, all of it or nothing.
      const { rows } = await client.query<VisitStatementRow & { n: number }>({
        name: call.name,
        text: call.sql,
        values: [...call.values],
      });
      client.release();
      client = undefined;
      this.report(jobs.length, 'committed');
      if (rows.some((r) => r.sends > 0)) this.waker.wake();
      const byN = new Map(rows.map((r) => [r.n, r]));
      await Promise.all(
        jobs.map((job, i) =>
          settleVisit(this.pool, byN.get(i + 1), job.admission).then(job.resolve, job.reject),
        ),
      );
    } catch (error) {
      if (sent && !(error instanceof pg.DatabaseError)) {
        // The round trip broke after it was sent: whether it committed is unknown, as for a lone visit.
        client?.release(error instanceof Error ? error : true);
        this.report(jobs.length, 'unknown');
        for (const job of jobs) job.reject(error);
        return;
      }
      // PostgreSQL refused the statement or nothing reached it: nothing of the batch was
      // committed, and each visit runs alone.
      client?.release();
      this.report(jobs.length, 'ran_alone');
      await Promise.all(jobs.map((job) => this.alone(job)));
    }
  }

  private async alone(job: Job): Promise<void> {
    try {
      job.resolve(await recordVisitAlone(this.pool, this.waker, job.visit, job.admission));
    } catch (error) {
      job.reject(error);
    }
  }

  /** Tells the observer, which must never keep a visit from its answer. */
  private report(visits: number, outcome: VisitBatchOutcome): void {
    try {
      this.observer(visits, outcome);
    } catch {
      // Metrics only.
    }
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * `recordVisit`, batched with the other visits of this process that wait at the same time (same
 * arguments, same results and errors).
 */
export function recordVisitBatched(
  deps: { local: { visitBatches: VisitBatcher } },
  visit: NewVisit,
  admission?: VisitAdmission,
): Promise<RecordedVisit> {
  return deps.local.visitBatches.record(visit, admission);
}
