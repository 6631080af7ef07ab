import type { Pool, Queryable } from '../db/pool.js';
import { withTx } from '../db/pool.js';
import { DELIVER_TASK, deliveryJobKey } from '../domain/sends.js';
import type { Platform } from '../platforms/types.js';

/**
 * Claiming sends for delivery. A pending send is due when `next_attempt_at` has passed; claiming
 * moves `next_attempt_at` to the end of a lease, so no other job takes it, removes the claimed
 * sends' own queued jobs, and schedules a "lease job" for the lease's end, all in one transaction.
 * If the worker dies mid-request, the lease job finds the sends due again and delivers them; if
 * it lives, it removes the lease job when the outcomes are written. The lease end (millisecond
 * precision, so it survives the round trip through a JS Date) is also the token that proves the
 * claim is still ours when outcomes are written.
 */

export interface SendState {
  pixelId: string;
  platform: Platform;
  status: string;
  due: boolean;
}

/** The job's fast path: one read tells whether there is anything to do. */
export async function sendState(db: Queryable, sendId: string): Promise<SendState | null> {
  const { rows } = await db.query<{ pixel_id: string; platform: Platform; status: string; due: boolean }>(
    'SELECT pixel_id, platform, status, next_attempt_at <= now() AS due FROM sends WHERE id = $1',
    [sendId],
  );
  const r = rows[0];
  return r ? { pixelId: r.pixel_id, platform: r.platform, status: r.status, due: r.due } : null;
}

export interface ClaimedSend {
  id: string;
  /** Attempts started so far, this one included. */
  attempts: number;
  createdAt: Date;
}

export interface Claim {
  pixelId: string;
  sends: ClaimedSend[];
  /** The lease's end, and the claim's token. */
  leaseUntil: Date;
  /** graphile-worker job key of the lease job. */
  leaseJobKey: string;
}

export function leaseJobKey(sendId: string): string {
  return `deliver_lease:${sendId}`;
}

const LEASE_END_SQL = `date_trunc('milliseconds', now()) + $2::int * interval '1 millisecond'`;

/** Whose sends to claim: a job's own send (and its pixel's), or more of a pixel's after a full batch. */
export type ClaimTarget = { sendId: string } | { pixelId: string };

/**
 * Claims up to `max` due sends of a pixel, oldest first, and removes their queued jobs. With a `sendId`, that send is claimed
 * too and its row is locked first and waited for: if another worker's claim holds it, we learn
 * the outcome of that claim instead of skipping it (a claim that never commits, because its
 * worker died, leaves the send to us). The others are taken with SKIP LOCKED, so concurrent
 * claims of one pixel split the due sends between them and never wait on each other.
 */
export async function claimBatch(pool: Pool, target: ClaimTarget, max: number, leaseMs: number): Promise<Claim | null> {
  return withTx(pool, async (tx) => {
    let ownId: string | null = null;
    let pixelId: string;
    if ('sendId' in target) {
      await tx.query(`SET LOCAL lock_timeout = '10s'`);
      const own = await tx.query<{ pixel_id: string }>(
        `SELECT pixel_id FROM sends WHERE id = $1 AND status = 'pending' AND next_attempt_at <= now() FOR UPDATE`,
        [target.sendId],
      );
      // After waiting for a lock, PostgreSQL re-evaluates the WHERE clause on the row's latest
      // version: a send that a competing claim has just leased is not due any more.
      if (own.rows[0] === undefined) return null;
      ownId = target.sendId;
      pixelId = own.rows[0].pixel_id;
    } else {
      pixelId = target.pixelId;
    }
    const { rows } = await tx.query<{ id: string; attempts: number; created_at: Date; lease_until: Date }>(
      `UPDATE sends SET attempts = attempts + 1, next_attempt_at = ${LEASE_END_SQL}, updated_at = now()
       WHERE id = $1 OR id IN (
         SELECT id FROM sends
         WHERE pixel_id = $3 AND status = 'pending' AND next_attempt_at <= now() AND ($1::uuid IS NULL OR id <> $1)
         ORDER BY next_attempt_at LIMIT $4
         FOR UPDATE SKIP LOCKED)
       RETURNING id, attempts, created_at, next_attempt_at AS lease_until`,
      [ownId, leaseMs, pixelId, ownId === null ? max : max - 1],
    );
    if (rows.length === 0) return null;
    // The claimed sends' own jobs have nothing left to do. Jobs already running (ours, or one
    // waiting for a send we hold) are locked and stay; they finish as no-ops.
    await tx.query(
      `SELECT count(*) FROM graphile_worker.complete_jobs(ARRAY(SELECT id FROM graphile_worker.jobs WHERE key = ANY($1::text[])))`,
      [rows.map((r) => deliveryJobKey(r.id))],
    );
    const first = ownId ?? rows[0]!.id;
    const leaseUntil = rows[0]!.lease_until;
    const key = leaseJobKey(first);
    await scheduleJob(tx, first, leaseUntil, key);
    const sends = rows.map((r) => ({ id: r.id, attempts: r.attempts, createdAt: r.created_at }));
    return { pixelId, sends, leaseUntil, leaseJobKey: key };
  });
}

/**
 * Moves the lease of the claim's unfinished sends further out (and its lease job with it). Sends
 * whose lease is no longer ours (it ran out and another worker took them) are dropped.
 */
export async function extendLease(pool: Pool, claim: Claim, sendIds: readonly string[], leaseMs: number): Promise<{ leaseUntil: Date; sendIds: string[] }> {
  return withTx(pool, async (tx) => {
    const { rows } = await tx.query<{ id: string; lease_until: Date }>(
      `UPDATE sends SET next_attempt_at = ${LEASE_END_SQL}, updated_at = now()
       WHERE id = ANY($1::uuid[]) AND status = 'pending' AND next_attempt_at = $3
       RETURNING id, next_attempt_at AS lease_until`,
      [sendIds, leaseMs, claim.leaseUntil],
    );
    if (rows.length === 0) return { leaseUntil: claim.leaseUntil, sendIds: [] };
    const leaseUntil = rows[0]!.lease_until;
    await scheduleJob(tx, rows[0]!.id, leaseUntil, claim.leaseJobKey);
    return { leaseUntil, sendIds: rows.map((r) => r.id) };
  });
}

/** A `deliver_send` job for `sendId` at `runAt`; a job key replaces the earlier job of that key. */
export async function scheduleJob(tx: Queryable, sendId: string, runAt: Date | null, jobKey?: string): Promise<void> {
  await tx.query(
    `SELECT graphile_worker.add_job($1, json_build_object('sendId', $2::uuid), run_at := $3::timestamptz, job_key := $4, max_attempts := 25)`,
    [DELIVER_TASK, sendId, runAt, jobKey ?? null],
  );
}

export async function removeJob(tx: Queryable, jobKey: string): Promise<void> {
  await tx.query('SELECT graphile_worker.remove_job($1)', [jobKey]);
}
