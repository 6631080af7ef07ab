import type { Pool } from '../db/pool.js';
import type { Platform } from '../platforms/types.js';

/**
 * Claiming sends for delivery. A pending send is due when `next_attempt_at` has passed; claiming
 * moves `next_attempt_at` to the end of a lease, so no other worker takes it. If the worker dies
 * mid-request, its sends are due again when the lease ends and the sweep (`sweep.ts`) wakes a
 * worker for them. The lease end (millisecond precision, so it survives the round trip through a
 * JS Date) is also the token that proves the claim is still ours when outcomes are written.
 */

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
}

export interface DuePixel {
  pixelId: string;
  platform: Platform;
}

const LEASE_END_SQL = `date_trunc('milliseconds', now()) + $2::int * interval '1 millisecond'`;

/**
 * The pixels that have due sends. A loose index scan over `sends_due` (pixel_id, next_attempt_at)
 * WHERE pending: one probe per pixel with pending sends, however many sends are queued, so a
 * backlog of a few pixels costs a few index descents, not a scan of the backlog.
 */
export const DUE_PIXELS_SQL = `
  WITH RECURSIVE pending(pixel_id) AS (
    (SELECT pixel_id FROM sends WHERE status = 'pending' ORDER BY pixel_id LIMIT 1)
    UNION ALL
    SELECT (SELECT s.pixel_id FROM sends s WHERE s.status = 'pending' AND s.pixel_id > p.pixel_id ORDER BY s.pixel_id LIMIT 1)
    FROM pending p WHERE p.pixel_id IS NOT NULL)
  SELECT p.pixel_id, x.platform FROM pending p JOIN pixels x ON x.id = p.pixel_id
  WHERE EXISTS (SELECT 1 FROM sends s WHERE s.pixel_id = p.pixel_id AND s.status = 'pending' AND s.next_attempt_at <= now())`;

export async function duePixels(pool: Pool): Promise<DuePixel[]> {
  const { rows } = await pool.query<{ pixel_id: string; platform: Platform }>(DUE_PIXELS_SQL);
  return rows.map((r) => ({ pixelId: r.pixel_id, platform: r.platform }));
}

/**
 * Claims up to `max` due sends of a pixel, oldest due first. SKIP LOCKED: concurrent claims of
 * one pixel split the due sends between them and never wait on each other. One statement, so
 * one round trip and one commit.
 */
export async function claimBatch(
  pool: Pool,
  pixelId: string,
  max: number,
  leaseMs: number,
): Promise<Claim | null> {
  const { rows } = await pool.query<{ id: string; attempts: number; created_at: Date; lease_until: Date }>(
    `UPDATE sends SET attempts = attempts + 1, next_attempt_at = ${LEASE_END_SQL}, in_flight = true, updated_at = now()
     WHERE id IN (
       SELECT id FROM sends
       WHERE pixel_id = $1 AND status = 'pending' AND next_attempt_at <= now()
       ORDER BY next_attempt_at LIMIT $3
       FOR UPDATE SKIP LOCKED)
     RETURNING id, attempts, created_at, next_attempt_at AS lease_until`,
    [pixelId, leaseMs, max],
  );
  if (rows.length === 0) return null;
  return {
    pixelId,
    sends: rows.map((r) => ({ id: r.id, attempts: r.attempts, createdAt: r.created_at })),
    leaseUntil: rows[0]!.lease_until,
  };
}

/**
 * Moves the lease of the claim's unfinished sends further out. Sends whose lease is no longer
 * ours (it ran out and another worker took them) are dropped. The rows are locked in id order, as
 * every locker of several sends takes them (docs/architecture.md#lock-order): a shared event
 * transaction may hold some of them.
 */
export async function extendLease(
  pool: Pool,
  claim: Claim,
  sendIds: readonly string[],
  leaseMs: number,
): Promise<{ leaseUntil: Date; sendIds: string[] }> {
  const { rows } = await pool.query<{ id: string; lease_until: Date }>(
    `UPDATE sends SET next_attempt_at = ${LEASE_END_SQL}, updated_at = now()
     WHERE id IN (SELECT id FROM sends WHERE id = ANY($1::uuid[]) AND status = 'pending' AND next_attempt_at = $3 ORDER BY id FOR UPDATE)
     RETURNING id, next_attempt_at AS lease_until`,
    [sendIds, leaseMs, claim.leaseUntil],
  );
  if (rows.length === 0) return { leaseUntil: claim.leaseUntil, sendIds: [] };
  return { leaseUntil: rows[0]!.lease_until, sendIds: rows.map((r) => r.id) };
}
