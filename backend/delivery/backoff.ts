import type { DeliveryOptions } from './options.js';

/**
 * What to do after a transient failure: when to try again, or that it is time to give up.
 * Pure: the caller passes the clock and the random source.
 */
export type RetryDecision = { retry: true; delayMs: number } | { retry: false; reason: string };

export interface RetryInput {
  /** Attempts made so far, the failed one included. */
  attempts: number;
  /** When the send was created, Unix ms. */
  createdAtMs: number;
  nowMs: number;
  /** The wait the platform asked for (Retry-After and the like), if any. */
  platformDelayMs?: number;
  /** A number in [0, 1). */
  random: number;
}

/**
 * Exponential backoff with "equal jitter" (half fixed, half random, so retries of many sends that
 * failed together spread out without ever coming back sooner than half the backoff). A delay the
 * platform asked for is a floor, even above `maxDelayMs`.
 */
export function retryDecision(input: RetryInput, o: DeliveryOptions): RetryDecision {
  if (input.attempts >= o.maxAttempts)
    return { retry: false, reason: `gave up after ${input.attempts} attempts` };
  const exp = Math.min(o.maxDelayMs, o.baseDelayMs * 2 ** Math.max(0, input.attempts - 1));
  const backoff = exp / 2 + (input.random * exp) / 2;
  const delayMs = Math.round(Math.max(backoff, input.platformDelayMs ?? 0) * o.backoffScale);
  if (input.nowMs + delayMs - input.createdAtMs > o.maxAgeMs) {
    return {
      retry: false,
      reason: `gave up after ${input.attempts} attempts: the next one would come more than ${formatDuration(o.maxAgeMs)} after the event was queued`,
    };
  }
  return { retry: true, delayMs };
}

function formatDuration(ms: number): string {
  if (ms % 3600_000 === 0) return `${ms / 3600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${ms / 1000} s`;
}
