import type { DeliveryEvent, PrecheckResult } from './types.js';

export const DAY_MS = 24 * 60 * 60 * 1000;

/** Clock skew the platforms tolerate on an event time ahead of theirs. */
export const FUTURE_TOLERANCE_MS = 5 * 60 * 1000;

export const OK: PrecheckResult = { ok: true };

export function skip(skipReason: string): PrecheckResult {
  return { ok: false, skipReason };
}

export function present(v: string | null | undefined): v is string {
  return typeof v === 'string' && v.trim() !== '';
}

/** The first failing check wins; checks run in the order given. */
export function firstFailure(...checks: Array<() => string | undefined>): PrecheckResult {
  for (const check of checks) {
    const reason = check();
    if (reason !== undefined) return skip(reason);
  }
  return OK;
}

/** `platformPossessive` reads like "Meta's". */
export function tooOld(
  e: DeliveryEvent,
  nowMs: number,
  maxEventAgeMs: number,
  platformPossessive: string,
): string | undefined {
  if (!Number.isFinite(e.eventTimeMs)) return 'event time is not a number';
  return nowMs - e.eventTimeMs > maxEventAgeMs
    ? `event is older than ${platformPossessive} ${Math.round(maxEventAgeMs / DAY_MS)}-day window`
    : undefined;
}

export function inFuture(e: DeliveryEvent, nowMs: number): string | undefined {
  return e.eventTimeMs - nowMs > FUTURE_TOLERANCE_MS
    ? 'event time is more than 5 minutes in the future'
    : undefined;
}

/** Checks every platform makes: the event time is a number inside the platform's window. */
export function timeWindow(
  e: DeliveryEvent,
  nowMs: number,
  maxEventAgeMs: number,
  platformPossessive: string,
): string | undefined {
  return tooOld(e, nowMs, maxEventAgeMs, platformPossessive) ?? inFuture(e, nowMs);
}

/** Only a website event needs the browser's User-Agent; others are matched on what they carry. */
export function missingUserAgent(e: DeliveryEvent): string | undefined {
  if ((e.actionSource ?? 'website') !== 'website') return undefined;
  return present(e.userAgent) ? undefined : 'missing user agent (required for website events)';
}

export function missingSourceUrl(e: DeliveryEvent): string | undefined {
  if ((e.actionSource ?? 'website') !== 'website') return undefined;
  return present(e.eventSourceUrl) ? undefined : 'missing event source URL (required for website events)';
}
