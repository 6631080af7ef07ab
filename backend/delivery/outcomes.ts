import { retryLockConflicts } from '../db/lock-conflict.js';
import { withTx, type Pool, type Queryable } from '../db/pool.js';
import type { Deps } from '../deps.js';
import { DELIVER_JOB_MAX_ATTEMPTS, DELIVER_TASK } from '../domain/outbox/delivery-wake.js';
import { lockConversions, refreshCapiStatuses } from '../domain/outbox/sends.js';
import type { Platform } from '../platforms/types.js';
import type { Claim } from './claim.js';

/** What happened to one send in this attempt. */
export type SendOutcome =
  | { sendId: string; kind: 'sent' }
  | { sendId: string; kind: 'retry'; error: string; delayMs: number }
  | { sendId: string; kind: 'failed'; error: string }
  | { sendId: string; kind: 'skipped'; reason: string };

/** The metric label of each outcome (`capigram_sends_total{outcome}`). */
const METRIC_OUTCOME = { sent: 'delivered', retry: 'retry', failed: 'failed', skipped: 'skipped' } as const;

export interface OutcomeBatch {
  claim: Pick<Claim, 'leaseUntil'>;
  platform: Platform;
  outcomes: SendOutcome[];
  /** Conversion of each send (absent for PageViews), for capiStatus. */
  conversionOf: ReadonlyMap<string, string | null>;
  /** What the platform answered (sent outcomes only). */
  responseSummary?: unknown;
}

/**
 * Writes outcomes in one transaction: the sends, the capiStatus of their conversions, and a
 * wake-up job for each retry time. Only sends whose lease is still this claim's are touched; the
 * ids written are returned. Locks: conversions by id, then sends (docs/architecture.md#lock-order).
 * A transaction PostgreSQL ends for a lock conflict is written again: these outcomes are what the
 * platform already answered, and losing them would send the events again when the lease ends.
 */
export async function writeOutcomes(
  deps: Pick<Deps, 'metrics'> & { pool: Pool },
  b: OutcomeBatch,
): Promise<string[]> {
  const conversionIds = [
    ...new Set(
      b.outcomes.map((o) => b.conversionOf.get(o.sendId)).filter((c): c is string => typeof c === 'string'),
    ),
  ];
  const written = await retryLockConflicts(() =>
    withTx(deps.pool, async (tx) => {
      // Conversions first, then sends: the order every writer of both follows, so none deadlock.
      await lockConversions(tx, conversionIds);
      let rows: { id: string; created_at: Date }[] = [];
      if (b.outcomes.length > 0) {
        const res = await tx.query<{ id: string; created_at: Date }>(
          `UPDATE sends s SET
           status = CASE o.kind WHEN 'retry' THEN 'pending' ELSE o.kind END,
           sent_at = CASE WHEN o.kind = 'sent' THEN now() ELSE s.sent_at END,
           response_summary = CASE WHEN o.kind = 'sent' THEN $5::jsonb ELSE s.response_summary END,
           last_error = CASE WHEN o.kind IN ('retry', 'failed') THEN o.error WHEN o.kind = 'sent' THEN NULL ELSE s.last_error END,
           skip_reason = CASE WHEN o.kind = 'skipped' THEN o.error END,
           -- a skipped send was never put to the platform: its claim was no attempt
           attempts = CASE WHEN o.kind = 'skipped' THEN s.attempts - 1 ELSE s.attempts END,
           next_attempt_at = CASE WHEN o.kind = 'retry' THEN now() + o.delay_ms * interval '1 millisecond' ELSE s.next_attempt_at END,
           in_flight = false,
           updated_at = now()
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[]) AS o(id, kind, error, delay_ms)
         WHERE s.id = o.id AND s.status = 'pending' AND s.next_attempt_at = $6
         RETURNING s.id, s.created_at`,
          [
            b.outcomes.map((o) => o.sendId),
            b.outcomes.map((o) => o.kind),
            b.outcomes.map((o) => (o.kind === 'skipped' ? o.reason : o.kind === 'sent' ? null : o.error)),
            b.outcomes.map((o) => (o.kind === 'retry' ? o.delayMs : 0)),
            b.responseSummary === undefined ? null : JSON.stringify(b.responseSummary),
            b.claim.leaseUntil,
          ],
        );
        rows = res.rows;
      }
      const ours = new Set(rows.map((r) => r.id));
      await scheduleRetries(
        tx,
        b.outcomes.filter(
          (o): o is Extract<SendOutcome, { kind: 'retry' }> => o.kind === 'retry' && ours.has(o.sendId),
        ),
      );
      await refreshCapiStatuses(tx, conversionIds);
      return rows;
    }),
  );

  const byId = new Map(b.outcomes.map((o) => [o.sendId, o]));
  const nowMs = Date.now();
  for (const r of written) {
    const o = byId.get(r.id)!;
    deps.metrics.sends.inc({ platform: b.platform, outcome: METRIC_OUTCOME[o.kind] });
    if (o.kind === 'sent')
      deps.metrics.deliveryLatency.observe({ platform: b.platform }, (nowMs - r.created_at.getTime()) / 1000);
  }
  return written.map((r) => r.id);
}

/**
 * One wake-up job per distinct retry time (one per failed request: sends that failed together
 * share a delay), unkeyed so that it never moves another wake-up. It claims whatever is due by
 * then. Without it a retry would wait for the sweep, up to a poll interval late.
 */
async function scheduleRetries(
  tx: Queryable,
  retries: Extract<SendOutcome, { kind: 'retry' }>[],
): Promise<void> {
  const delays = [...new Set(retries.map((r) => r.delayMs))];
  if (delays.length === 0) return;
  await tx.query(
    `SELECT graphile_worker.add_job($1, '{}'::json, run_at := now() + d * interval '1 millisecond', max_attempts := $3::int)
     FROM unnest($2::int[]) AS d`,
    [DELIVER_TASK, delays, DELIVER_JOB_MAX_ATTEMPTS],
  );
}
