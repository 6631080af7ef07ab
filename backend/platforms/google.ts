import { DEFAULT_API_VERSIONS } from './api-versions.js';
import { conversionActionFor, missingMappingReason } from './google-actions.js';
import { DAY_MS, firstFailure, present, timeWindow } from './precheck.js';
import { assertBatch, finiteNumber, opt, pixelFor, stripTrailingSlash, upperCurrency } from './request.js';
import {
  allDelivered,
  allFailed,
  allRetry,
  bodySnippet,
  httpError,
  isNetworkError,
  isRecord,
  parseJsonObject,
  retryAfterMs,
  stringField,
  truncateError,
} from './response.js';
import type { DeliveryEvent, EventOutcome, PixelConfig, PixelConfigOf, PlatformAdapter } from './types.js';

export const GOOGLE_DEFAULT_API_VERSION = DEFAULT_API_VERSIONS.google;

const MAX_BATCH = 2000;
// The longest click-through conversion window Google Ads allows.
const MAX_EVENT_AGE_MS = 90 * DAY_MS;

/** Row errors Google documents as temporary. Every other row error is permanent. */
const GOOGLE_RETRY_ERRORS: ReadonlySet<string> = new Set([
  'RESOURCE_EXHAUSTED',
  'INTERNAL_ERROR',
  'TRANSIENT_ERROR',
]);
/** The conversion is already recorded: that is what we wanted. */
const GOOGLE_DELIVERED_ERRORS: ReadonlySet<string> = new Set(['CLICK_CONVERSION_ALREADY_EXISTS']);

/**
 * Google refuses offline conversion imports through the Google Ads API to developer tokens it no
 * longer allowlists (since 2026-06-15); the Data Manager API takes them from everyone.
 */
export const NOT_ALLOWLISTED = 'CUSTOMER_NOT_ALLOWLISTED_FOR_THIS_FEATURE';
export const SWITCH_TO_DATA_MANAGER =
  'Google no longer lets this developer token import conversions through the Google Ads API: switch the pixel to the Data Manager API (pixel update --pixel P --api data-manager)';

/** `yyyy-mm-dd hh:mm:ss+00:00` in UTC, the format Google Ads wants for `conversionDateTime`. */
export function googleDateTime(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')}+00:00`;
}

function digitsOnly(id: string): string {
  return id.replace(/[\s-]/g, '');
}

function conversionActionName(p: PixelConfigOf<'google'>, action: string): string {
  const id = action.trim();
  if (id.startsWith('customers/')) return id;
  return `customers/${digitsOnly(p.customerId)}/conversionActions/${id}`;
}

/** Google takes one click id per conversion, the gclid first; gbraid and wbraid come from iOS traffic. */
export function googleClickId(
  e: DeliveryEvent,
): { gclid: string } | { gbraid: string } | { wbraid: string } | undefined {
  if (present(e.gclid)) return { gclid: e.gclid.trim() };
  if (present(e.gbraid)) return { gbraid: e.gbraid.trim() };
  if (present(e.wbraid)) return { wbraid: e.wbraid.trim() };
  return undefined;
}

/**
 * Enhanced conversions: the hashed e-mail (Google's own normal form; a digest stored before it
 * existed falls back to the common one, right for every address but dotted Gmail ones) and the
 * phone in E.164. The upload service takes only these two kinds (names and addresses are refused
 * with UNSUPPORTED_USER_IDENTIFIER), at most five.
 */
export function googleUserIdentifiers(e: DeliveryEvent): Array<Record<string, string>> {
  const ids: Array<Record<string, string>> = [];
  const email = e.hashed.emGoogle ?? e.hashed.em;
  if (email) ids.push({ userIdentifierSource: 'FIRST_PARTY', hashedEmail: email });
  if (e.hashed.phE164) ids.push({ userIdentifierSource: 'FIRST_PARTY', hashedPhoneNumber: e.hashed.phE164 });
  return ids;
}

function apiVersion(v: string | undefined): string {
  if (v === undefined) return GOOGLE_DEFAULT_API_VERSION;
  return v.startsWith('v') ? v : `v${v}`;
}

type RowVerdict = { outcome: 'delivered' } | { outcome: 'retry' | 'failed'; error: string };

/** The `errorCode` object holds one key (`conversionUploadError`, `quotaError`, …) whose value is the code. */
function errorCodeName(err: Record<string, unknown>): string {
  const errorCode = err.errorCode;
  if (isRecord(errorCode)) {
    const first = Object.values(errorCode).find((v) => typeof v === 'string');
    if (typeof first === 'string') return first;
  }
  return 'UNKNOWN';
}

function rowIndex(err: Record<string, unknown>): number | undefined {
  const location = err.location;
  const path = isRecord(location) ? location.fieldPathElements : undefined;
  if (!Array.isArray(path)) return undefined;
  for (const el of path) {
    if (isRecord(el) && el.fieldName === 'conversions' && typeof el.index === 'number') return el.index;
  }
  for (const el of path) {
    if (isRecord(el) && typeof el.index === 'number') return el.index;
  }
  return undefined;
}

function verdictOf(err: Record<string, unknown>): RowVerdict {
  const code = errorCodeName(err);
  if (GOOGLE_DELIVERED_ERRORS.has(code)) return { outcome: 'delivered' };
  if (code === NOT_ALLOWLISTED)
    return { outcome: 'failed', error: `${NOT_ALLOWLISTED}: ${SWITCH_TO_DATA_MANAGER}` };
  const message = stringField(err, 'message');
  const error = truncateError(message ? `${code}: ${message}` : code);
  if (code.startsWith('TOO_RECENT_') || GOOGLE_RETRY_ERRORS.has(code)) return { outcome: 'retry', error };
  return { outcome: 'failed', error };
}

const SEVERITY = { delivered: 0, retry: 1, failed: 2 } as const;

/** A row with several errors takes the worst: failed over retry over delivered. */
function worse(a: RowVerdict | undefined, b: RowVerdict): RowVerdict {
  return a === undefined || SEVERITY[b.outcome] > SEVERITY[a.outcome] ? b : a;
}

function partialFailureErrors(body: Record<string, unknown>): Record<string, unknown>[] {
  const pfe = body.partialFailureError;
  if (!isRecord(pfe)) return [];
  const details = pfe.details;
  const errors: Record<string, unknown>[] = [];
  if (Array.isArray(details)) {
    for (const d of details) {
      const list = isRecord(d) ? d.errors : undefined;
      if (Array.isArray(list)) errors.push(...list.filter(isRecord));
    }
  }
  // A partial failure with no row details still means something failed; Google's summary message names it.
  if (errors.length === 0 && (stringField(pfe, 'message') !== undefined || typeof pfe.code === 'number')) {
    errors.push({
      errorCode: { unknown: 'UNKNOWN' },
      message: stringField(pfe, 'message') ?? 'partial failure',
    });
  }
  return errors;
}

function classifyRows(body: Record<string, unknown>, events: readonly DeliveryEvent[]): EventOutcome[] {
  const verdicts: Array<RowVerdict | undefined> = events.map(() => undefined);
  for (const err of partialFailureErrors(body)) {
    const verdict = verdictOf(err);
    const index = rowIndex(err);
    if (index === undefined) {
      // An error that names no row cannot be pinned down: it applies to every row.
      for (let i = 0; i < verdicts.length; i++) verdicts[i] = worse(verdicts[i], verdict);
    } else if (index >= 0 && index < verdicts.length) {
      verdicts[index] = worse(verdicts[index], verdict);
    }
  }
  return events.map((ev, i): EventOutcome => {
    const v = verdicts[i];
    if (v === undefined || v.outcome === 'delivered') return { eventId: ev.eventId, outcome: 'delivered' };
    return { eventId: ev.eventId, outcome: v.outcome, error: v.error };
  });
}

/** The `GoogleAdsFailure` errors inside a request-level error body (`error.details[].errors[]`). */
function requestErrors(body: Record<string, unknown> | undefined): Record<string, unknown>[] {
  const error = body?.error;
  const details = isRecord(error) ? error.details : undefined;
  if (!Array.isArray(details)) return [];
  return details.flatMap((d) => {
    const list = isRecord(d) ? d.errors : undefined;
    return Array.isArray(list) ? list.filter(isRecord) : [];
  });
}

/** `STATUS: message`, followed by the first specific error, which says what is actually wrong. */
function googleErrorText(body: Record<string, unknown> | undefined): string | undefined {
  const error = body?.error;
  if (!isRecord(error)) return undefined;
  const status = stringField(error, 'status');
  const message = stringField(error, 'message');
  const head = status && message ? `${status}: ${message}` : (message ?? status);
  const first = requestErrors(body)[0];
  if (first === undefined) return head;
  const firstMessage = stringField(first, 'message');
  const specific = firstMessage ? `${errorCodeName(first)}: ${firstMessage}` : errorCodeName(first);
  return head ? `${head} (${specific})` : specific;
}

/** Google puts the wait of a quota error in `quotaErrorDetails.retryDelay` (e.g. `"30s"`), not in a header. */
function quotaRetryDelayMs(body: Record<string, unknown> | undefined): number | undefined {
  for (const err of requestErrors(body)) {
    const details = err.details;
    const quota = isRecord(details) ? details.quotaErrorDetails : undefined;
    const delay = isRecord(quota) ? quota.retryDelay : undefined;
    const m = typeof delay === 'string' ? /^(\d+(?:\.\d+)?)s$/.exec(delay.trim()) : null;
    if (m?.[1] !== undefined) return Math.round(Number(m[1]) * 1000);
  }
  return undefined;
}

/**
 * What any Google conversion needs, whichever API takes it: an age Google accepts, not a page
 * view, and a conversion action the pixel maps its event type to.
 */
export function googleConversionChecks(
  e: DeliveryEvent,
  nowMs: number,
  pixel: PixelConfig | undefined,
): (() => string | undefined)[] {
  return [
    () => timeWindow(e, nowMs, MAX_EVENT_AGE_MS, "Google Ads'"),
    // Counting every landing-page view as a conversion would corrupt the advertiser's numbers.
    () => (e.eventType === 'PageView' ? 'page views are not uploaded to Google Ads' : undefined),
    () => {
      if (pixel?.platform !== 'google') return undefined;
      return conversionActionFor(pixel.conversionActions, e.eventType, e.customEventName) === undefined
        ? missingMappingReason(e.eventType, e.customEventName)
        : undefined;
    },
  ];
}

export const googleAdapter: PlatformAdapter = {
  platform: 'google',
  maxBatch: MAX_BATCH,
  maxEventAgeMs: MAX_EVENT_AGE_MS,

  precheck(e, nowMs, pixel) {
    return firstFailure(...googleConversionChecks(e, nowMs, pixel), () =>
      googleClickId(e) !== undefined || googleUserIdentifiers(e).length > 0
        ? undefined
        : 'no Google click id (gclid, gbraid, wbraid) and no e-mail or phone to match the conversion with',
    );
  },

  buildRequest(events, pixel, baseUrl, opts = {}) {
    const p = pixelFor(pixel, 'google');
    assertBatch(events, MAX_BATCH, 'google');
    if (p.developerToken === undefined) throw new Error('the Google Ads API needs a developer token');
    const customerId = digitsOnly(p.customerId);
    const consent = opts.adUserDataConsent;
    const conversions = events.map((e) => {
      const action = conversionActionFor(p.conversionActions, e.eventType, e.customEventName);
      // The pipeline prechecks with the pixel, so an unmapped event here is a programming error.
      if (action === undefined) throw new Error(missingMappingReason(e.eventType, e.customEventName));
      const value = finiteNumber(e.value) ? e.value : undefined;
      const identifiers = googleUserIdentifiers(e);
      const adUserData = e.adUserDataConsent ?? consent;
      return {
        ...googleClickId(e),
        conversionAction: conversionActionName(p, action),
        conversionDateTime: googleDateTime(e.eventTimeMs),
        conversionValue: value,
        currencyCode: value === undefined ? undefined : upperCurrency(e.currency),
        orderId: opt(e.orderId) ?? e.eventId,
        userIdentifiers: identifiers.length > 0 ? identifiers : undefined,
        consent: adUserData === undefined ? undefined : { adUserData },
        userIpAddress: p.sendUserIpAddress ? opt(e.landingIp) : undefined,
      };
    });
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      authorization: `Bearer ${p.oauthToken}`,
      'developer-token': p.developerToken,
    };
    const login = opt(p.loginCustomerId);
    if (login !== undefined) headers['login-customer-id'] = digitsOnly(login);
    return {
      method: 'POST',
      url: `${stripTrailingSlash(baseUrl)}/${apiVersion(opts.apiVersion)}/customers/${customerId}:uploadClickConversions`,
      headers,
      body: JSON.stringify({
        conversions,
        partialFailure: true,
        ...(p.validateOnly ? { validateOnly: true } : {}),
      }),
    };
  },

  classify(res, events, nowMs) {
    if (isNetworkError(res)) return allRetry(events, `network error: ${res.networkError}`);
    const body = parseJsonObject(res.bodyText);
    const detail = googleErrorText(body) ?? bodySnippet(res.bodyText);
    if (res.status >= 500 || res.status === 429 || res.status === 408) {
      return allRetry(
        events,
        httpError(res.status, detail),
        retryAfterMs(res, nowMs) ?? quotaRetryDelayMs(body),
      );
    }
    if (res.status < 200 || res.status >= 300) {
      const notAllowlisted = requestErrors(body).some((e) => errorCodeName(e) === NOT_ALLOWLISTED);
      return allFailed(
        events,
        notAllowlisted
          ? truncateError(`${SWITCH_TO_DATA_MANAGER} (${detail})`)
          : httpError(res.status, detail),
      );
    }
    if (res.bodyText.trim() === '') return allDelivered(events);
    // Unreadable 2xx: resending is harmless, since a repeat upload answers CLICK_CONVERSION_ALREADY_EXISTS.
    if (body === undefined)
      return allRetry(events, httpError(res.status, `unexpected body: ${res.bodyText.trim()}`));
    return classifyRows(body, events);
  },
};
