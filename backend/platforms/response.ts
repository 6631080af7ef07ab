import type { DeliveryEvent, EventOutcome, PlatformResponse } from './types.js';

/** Longest error text kept in an outcome: enough to diagnose, small enough for a database column. */
export const MAX_ERROR_LENGTH = 500;

export function truncateError(text: string): string {
  const oneLine = text.replace(/\s+/g, ' ').trim();
  return oneLine.length <= MAX_ERROR_LENGTH ? oneLine : `${oneLine.slice(0, MAX_ERROR_LENGTH - 1)}…`;
}

/** Case-insensitive header lookup (fetch lowercases names, hand-built maps may not). */
export function headerValue(headers: Record<string, string>, name: string): string | undefined {
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === wanted) return value;
  }
  return undefined;
}

/**
 * `Retry-After` (RFC 9110: delay-seconds or an HTTP date) as a delay in milliseconds from
 * `nowMs`; a date in the past gives 0; anything unparseable gives undefined.
 */
export function parseRetryAfterMs(value: string | null | undefined, nowMs: number): number | undefined {
  if (value == null) return undefined;
  const text = value.trim();
  if (text === '') return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Date.parse also accepts bare numbers and ISO strings; an HTTP date always starts with a
  // weekday. IMF-fixdate and RFC 850 name their zone; asctime does not and means UTC.
  let at: number;
  if (/^[A-Za-z]{3,9}, /.test(text)) at = Date.parse(text);
  else if (/^[A-Za-z]{3} [A-Za-z]{3} [ \d]\d \d\d:\d\d:\d\d \d{4}$/.test(text))
    at = Date.parse(`${text} GMT`);
  else return undefined;
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}

export function retryAfterMs(res: { headers: Record<string, string> }, nowMs: number): number | undefined {
  return parseRetryAfterMs(headerValue(res.headers, 'retry-after'), nowMs);
}

/** The body as a JSON object, or undefined when it is not one. */
export function parseJsonObject(bodyText: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(bodyText);
    return isRecord(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function stringField(o: Record<string, unknown> | undefined, key: string): string | undefined {
  const v = o?.[key];
  return typeof v === 'string' && v.trim() !== '' ? v : undefined;
}

export function numberField(o: Record<string, unknown> | undefined, key: string): number | undefined {
  const v = o?.[key];
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

export function httpError(status: number, detail: string | undefined): string {
  return truncateError(detail ? `HTTP ${status}: ${detail}` : `HTTP ${status}`);
}

export function bodySnippet(bodyText: string): string | undefined {
  const t = bodyText.trim();
  return t === '' ? undefined : t;
}

export function isNetworkError(res: PlatformResponse): res is { networkError: string } {
  return 'networkError' in res;
}

export function allRetry(events: readonly DeliveryEvent[], error: string, delayMs?: number): EventOutcome[] {
  const e = truncateError(error);
  return events.map((ev) =>
    delayMs === undefined
      ? { eventId: ev.eventId, outcome: 'retry', error: e }
      : { eventId: ev.eventId, outcome: 'retry', error: e, delayMs },
  );
}

export function allFailed(events: readonly DeliveryEvent[], error: string, isolate = false): EventOutcome[] {
  const e = truncateError(error);
  const split = isolate && events.length > 1;
  return events.map((ev) =>
    split
      ? { eventId: ev.eventId, outcome: 'failed', error: e, isolate: true }
      : { eventId: ev.eventId, outcome: 'failed', error: e },
  );
}

export function allDelivered(events: readonly DeliveryEvent[]): EventOutcome[] {
  return events.map((ev) => ({ eventId: ev.eventId, outcome: 'delivered' }));
}
