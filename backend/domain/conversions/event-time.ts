/**
 * Bounds on a caller-supplied `eventTime` (Unix milliseconds). The platforms refuse events from
 * the future and long past; seconds sent where milliseconds are expected are the classic mistake,
 * and would otherwise read as a date in January 1970.
 */
export const EVENT_TIME_FUTURE_TOLERANCE_MS = 5 * 60 * 1000;
export const EVENT_TIME_MAX_AGE_MS = 90 * 24 * 60 * 60 * 1000;
/** 1973-03-03 in milliseconds, or the year 5138 in seconds: below it, a value is seconds. */
const SMALLEST_MILLISECONDS = 100_000_000_000;

/** Why `eventTimeMs` is unacceptable at `nowMs`, or undefined when it is fine. */
export function eventTimeProblem(eventTimeMs: number, nowMs: number): string | undefined {
  if (!Number.isSafeInteger(eventTimeMs) || eventTimeMs <= 0)
    return 'must be a positive integer of Unix milliseconds';
  if (eventTimeMs < SMALLEST_MILLISECONDS) return 'must be Unix milliseconds; this value looks like seconds';
  if (eventTimeMs - nowMs > EVENT_TIME_FUTURE_TOLERANCE_MS) return 'is more than 5 minutes in the future';
  if (nowMs - eventTimeMs > EVENT_TIME_MAX_AGE_MS) return 'is more than 90 days in the past';
  return undefined;
}
