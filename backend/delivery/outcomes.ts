import { retryLockConflicts } from '../db/lock-conflict.js';
import type { Pool } from '../db/pool.js';
import { runTransaction } from '../db/prepared-batch.js';
import type { Deps } from '../deps.js';
import { DELIVER_JOB_FLAGS, DELIVER_JOB_MAX_ATTEMPTS, DELIVER_TASK } from '../domain/outbox/delivery-wake.js';
import { lockConversionsStatement, outcomesStatement, type OutcomeRow } from '../domain/outbox/sends.js';
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
 * Writes outcomes in one round trip and one commit: the sends, the capiStatus of their
 * conversions, and a wake-up job for each retry time, as one statement (`outcomesStatement`),
 * after the conversions' locks when there are conversions (conversions, then sends: the lock
 * order of every writer of both, docs/architecture.md#lock-order). Only sends whose lease is
 * still this claim's are touched; the ids written are returned. A transaction PostgreSQL ends for
 * a lock conflict is written again: these outcomes are what the platform already answered, and
 * losing them would send the events again when the lease ends.
 */
export async function writeOutcomes(
  deps: Pick<Deps, 'metrics'> & { pool: Pool },
  b: OutcomeBatch,
): Promise<string[]> {
  if (b.outcomes.length === 0) return [];
  const conversionIds = [
    ...new Set(
      b.outcomes.map((o) => b.conversionOf.get(o.sendId)).filter((c): c is string => typeof c === 'string'),
    ),
  ];
  const write = outcomesStatement(
    b.outcomes.map((o) => ({
      id: o.sendId,
      kind: o.kind,
      error: o.kind === 'skipped' ? o.reason : o.kind === 'sent' ? null : o.error,
      delay_ms: o.kind === 'retry' ? o.delayMs : 0,
    })),
    b.responseSummary,
    b.claim.leaseUntil,
    { task: DELIVER_TASK, maxAttempts: DELIVER_JOB_MAX_ATTEMPTS, flags: DELIVER_JOB_FLAGS },
  );
  // PageViews only: no conversion to lock.
  const calls = conversionIds.length === 0 ? [write] : [lockConversionsStatement(conversionIds), write];
  const written = await retryLockConflicts(
    async () => (await runTransaction(deps.pool, calls, { genericPlans: true })).at(-1) as OutcomeRow[],
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
