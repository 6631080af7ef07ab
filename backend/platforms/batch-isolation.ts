import type { EventOutcome } from './types.js';

/**
 * What to do with a batch after `classify`.
 * - `final`: the outcomes stand, event by event.
 * - `split`: the platform rejected the whole request because of some event in it (Meta does
 *   this); discard the outcomes and send each sub-batch as its own request, deciding again for
 *   each. A batch of one is never split, so the recursion ends with the bad event alone and
 *   failed, and every other event delivered. One bad event among n costs about 2·log2(n) requests.
 */
export type IsolationDecision<T> = { action: 'final' } | { action: 'split'; batches: T[][] };

export function decideIsolation<T>(
  batch: readonly T[],
  outcomes: readonly EventOutcome[],
): IsolationDecision<T> {
  const isolate = outcomes.some((o) => o.outcome === 'failed' && o.isolate === true);
  if (!isolate || batch.length <= 1) return { action: 'final' };
  return { action: 'split', batches: bisect(batch) };
}

/** Two halves, the first one the larger when the length is odd; order is kept. */
export function bisect<T>(batch: readonly T[]): T[][] {
  if (batch.length <= 1) return [batch.slice()];
  const mid = Math.ceil(batch.length / 2);
  return [batch.slice(0, mid), batch.slice(mid)];
}
