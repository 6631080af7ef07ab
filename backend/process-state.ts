import { TransactionBatcher, type BatchObserver } from './db/transaction-batch.js';
import type { Pool } from './db/pool.js';
import { GoogleTokens } from './delivery/google-oauth.js';
import { DeliveryGate } from './delivery/pass-gate.js';
import { StallLog } from './delivery/stall-log.js';
import { KeyLookups } from './domain/api-key-lookup.js';
import { leadLockStatement } from './domain/conversions/lead-lock.js';
import { lockConversionsAndSends } from './domain/outbox/sends.js';
import { DeliveryWaker } from './domain/outbox/delivery-wake.js';
import { VisitBatcher, type VisitBatchObserver } from './domain/tracker/visit-batch.js';
import type { Logger } from './log.js';

/**
 * What one process holds in memory beside its pool: queues that make concurrent requests share
 * round trips, a wake-up spacer, a token cache. Built once per process (`runtime.ts`; the tests
 * build one per app, as a second process would), passed along as `Deps['local']`, and closed with
 * the process, so nothing of it hides in module state.
 */
export interface ProcessState {
  /** The business events' shared transactions (`domain/conversions/event-batches.ts`). */
  eventBatches: TransactionBatcher;
  /** track/init's shared transactions (`domain/tracker/visit-batch.ts`). */
  visitBatches: VisitBatcher;
  /** The event endpoints' API key look-ups, coalesced (`domain/api-key-lookup.ts`). */
  keyLookups: KeyLookups;
  /** Delivery wake-ups after a commit, spaced (`domain/outbox/delivery-wake.ts`). */
  waker: DeliveryWaker;
  /** Keeps this process's worker slots from delivery jobs while a pass is young (`delivery/pass-gate.ts`). */
  deliveryGate: DeliveryGate;
  /** Google access tokens, cached until they run out (`delivery/google-oauth.ts`). */
  googleTokens: GoogleTokens;
  /** When this process last asked for each channel's invite pool refill (`domain/invites/handout.ts`). */
  refillRequests: Map<string, number>;
  /** Whether delivery was last seen stalled, so a stall is logged once (`delivery/stall.ts`). */
  stallLog: StallLog;
  /** The (bot, chat) pairs of unknown chats already warned about (`domain/telegram/webhook.ts`). */
  warnedChats: Set<string>;
  /** Stops the timers and drops the caches. */
  close(): void;
}

export function createProcessState(
  pool: Pool,
  log: Logger,
  o: {
    onWakeError?: (err: unknown) => void;
    onEventBatch?: BatchObserver;
    onVisitBatch?: VisitBatchObserver;
  } = {},
): ProcessState {
  const waker = new DeliveryWaker(pool, o.onWakeError);
  const state: ProcessState = {
    // Business events under the lead lock (`withLeadLockBatched`): the lead locks, then the
    // existing conversions with their sends (docs/architecture.md#lock-order).
    eventBatches: new TransactionBatcher(pool, {
      lockStatement: leadLockStatement,
      lockRows: lockConversionsAndSends,
    }),
    visitBatches: new VisitBatcher(pool, waker),
    keyLookups: new KeyLookups(pool),
    waker,
    deliveryGate: new DeliveryGate(),
    googleTokens: new GoogleTokens(),
    refillRequests: new Map(),
    stallLog: new StallLog(log),
    warnedChats: new Set(),
    close() {
      state.eventBatches.close();
      state.visitBatches.close();
      state.waker.close();
      state.googleTokens.clear();
      state.refillRequests.clear();
      state.warnedChats.clear();
    },
  };
  if (o.onEventBatch !== undefined) state.eventBatches.observer = o.onEventBatch;
  if (o.onVisitBatch !== undefined) state.visitBatches.observer = o.onVisitBatch;
  return state;
}
