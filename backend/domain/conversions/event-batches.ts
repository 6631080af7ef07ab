import type { Pool } from '../../db/pool.js';
import { TransactionBatcher, type BatchObserver } from '../../db/transaction-batch.js';
import { lockConversionsAndSends } from '../outbox/sends.js';
import { leadLockKey, leadLockStatement, withLeadLock, type LeadWork } from './lead-lock.js';

/**
 * Business events under the lead lock, several to a transaction when they arrive together
 * (`db/transaction-batch.ts` says how and why). The batch takes the lead locks, then locks the
 * existing conversions its events may change with their sends: the lock order of a lone event
 * and of delivery (docs/architecture.md#lock-order).
 */
export function leadLockBatcher(pool: Pool): TransactionBatcher {
  return new TransactionBatcher(pool, { lockStatement: leadLockStatement, lockRows: lockConversionsAndSends });
}

const batchers = new WeakMap<Pool, TransactionBatcher>();

/**
 * `withLeadLock`, batched with the other events of the pool that wait at the same time (same
 * arguments, same results and errors).
 */
export function withLeadLockBatched<T, R>(pool: Pool, work: LeadWork<T, R>): Promise<T> {
  return batcherOf(pool).run({
    ...work,
    lockKey: leadLockKey(work.accountId, work.telegramUserId),
    alone: () => withLeadLock(pool, work),
  });
}

/**
 * For the pool's events: `observer` hears how each shared transaction ended (the server's
 * metrics); `queueWaitMs` replaces `QUEUE_WAIT_MS` (tests).
 */
export function configureEventBatches(pool: Pool, settings: { observer?: BatchObserver; queueWaitMs?: number }): void {
  const batcher = batcherOf(pool);
  if (settings.observer !== undefined) batcher.observer = settings.observer;
  if (settings.queueWaitMs !== undefined) batcher.setQueueWait(settings.queueWaitMs);
}

function batcherOf(pool: Pool): TransactionBatcher {
  let batcher = batchers.get(pool);
  if (batcher === undefined) batchers.set(pool, (batcher = leadLockBatcher(pool)));
  return batcher;
}
