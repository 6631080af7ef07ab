import type { Deps } from '../../deps.js';
import { leadLockKey, withLeadLock, type LeadWork } from './lead-lock.js';

/**
 * `withLeadLock`, batched with the other events of the process that wait at the same time (same
 * results and errors): several business events to a transaction when they arrive together
 * (`db/transaction-batch.ts` says how and why). The process's batcher (`process-state.ts`) takes
 * the lead locks, then locks the existing conversions its events may change with their sends: the
 * lock order of a lone event and of delivery (docs/architecture.md#lock-order).
 */
export function withLeadLockBatched<T, R>(
  deps: Pick<Deps, 'pool' | 'local'>,
  work: LeadWork<T, R>,
): Promise<T> {
  return deps.local.eventBatches.run({
    ...work,
    lockKey: leadLockKey(work.accountId, work.telegramUserId),
    alone: () => withLeadLock(deps.pool, work),
  });
}
