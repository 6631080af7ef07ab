import { DEFAULT_API_VERSIONS } from './api-versions.js';
import { platformEventName } from './event-names.js';
import { DAY_MS, firstFailure, missingSourceUrl, missingUserAgent, timeWindow } from './precheck.js';
import {
  assertBatch,
  externalIdsOf,
  hashedUserFields,
  isWebsite,
  nonEmptyObject,
  opt,
  pixelFor,
  stripTrailingSlash,
  toSeconds,
  valueAndCurrency,
} from './request.js';
import {
  allDelivered,
  allFailed,
  allRetry,
  bodySnippet,
  headerValue,
  httpError,
  isNetworkError,
  isRecord,
  numberField,
  parseJsonObject,
  retryAfterMs,
  stringField,
} from './response.js';
import type { DeliveryEvent, PlatformAdapter } from './types.js';

export const META_DEFAULT_API_VERSION = DEFAULT_API_VERSIONS.meta;

/** Error codes Meta documents as temporary: unknown (1), service (2), throttling (4, 17, 341, 80003), temporary block (368). */
export const META_RETRY_CODES: ReadonlySet<number> = new Set([1, 2, 4, 17, 341, 80003, 368]);

/** Code 100 (invalid parameter) is about one event's content; the rest of the batch may be fine. */
const META_EVENT_LEVEL_CODE = 100;

const MAX_BATCH = 1000;
const MAX_EVENT_AGE_MS = 7 * DAY_MS;

function metaEvent(e: DeliveryEvent) {
  const name = platformEventName('meta', e);
  if (name === undefined) throw new Error(`meta: event ${e.eventId} is Custom without a customEventName`);
  const h = e.hashed;
  const money = valueAndCurrency(e);
  return {
    event_name: name,
    event_time: toSeconds(e.eventTimeMs),
    event_id: e.eventId,
    action_source: e.actionSource ?? 'website',
    event_source_url: opt(e.eventSourceUrl),
    // The page the visitor came from, which Meta reads like the pixel's referrer (website events only).
    referrer_url: isWebsite(e) ? opt(e.referrer) : undefined,
    user_data: {
      ...hashedUserFields(h),
      fbc: opt(e.fbc),
      fbp: opt(e.fbp),
      client_ip_address: opt(e.clientIp),
      client_user_agent: opt(e.userAgent),
      external_id: externalIdsOf(e),
    },
    custom_data: nonEmptyObject({
      value: money?.value,
      currency: money?.currency,
      content_name: opt(e.contentName),
      order_id: opt(e.businessOrderId),
    }),
    // Limited Data Use, its country and state left to Meta's geolocation (0, 0).
    ...(e.limitedDataUse === true
      ? {
          data_processing_options: ['LDU'],
          data_processing_options_country: 0,
          data_processing_options_state: 0,
        }
      : {}),
  };
}

/**
 * Meta answers throttling without `Retry-After`; its `x-business-use-case-usage` header gives,
 * per business and call type, `estimated_time_to_regain_access` in minutes. The longest wait wins.
 */
export function metaUsageDelayMs(headers: Record<string, string>): number | undefined {
  const raw = headerValue(headers, 'x-business-use-case-usage');
  const usage = raw === undefined ? undefined : parseJsonObject(raw);
  if (usage === undefined) return undefined;
  let minutes = 0;
  for (const entries of Object.values(usage)) {
    if (!Array.isArray(entries)) continue;
    for (const entry of entries) {
      const m = isRecord(entry) ? numberField(entry, 'estimated_time_to_regain_access') : undefined;
      if (m !== undefined && m > minutes) minutes = m;
    }
  }
  return minutes > 0 ? minutes * 60_000 : undefined;
}

function metaErrorText(error: Record<string, unknown> | undefined, status: number, bodyText: string): string {
  const message = stringField(error, 'message');
  if (message === undefined) return httpError(status, bodySnippet(bodyText));
  const code = numberField(error, 'code');
  const subcode = numberField(error, 'error_subcode');
  const codes = code === undefined ? '' : ` (code ${code}${subcode === undefined ? '' : `/${subcode}`})`;
  const userMsg = stringField(error, 'error_user_msg');
  return `${message}${codes}${userMsg ? `: ${userMsg}` : ''}`;
}

export const metaAdapter: PlatformAdapter = {
  platform: 'meta',
  maxBatch: MAX_BATCH,
  maxEventAgeMs: MAX_EVENT_AGE_MS,

  precheck(e, nowMs) {
    return firstFailure(
      () => timeWindow(e, nowMs, MAX_EVENT_AGE_MS, "Meta's"),
      () => (platformEventName('meta', e) === undefined ? 'Custom event without customEventName' : undefined),
      () =>
        e.eventType === 'Purchase' && valueAndCurrency(e) === undefined
          ? 'Purchase requires value and currency'
          : undefined,
      () => missingUserAgent(e),
      () => missingSourceUrl(e),
    );
  },

  buildRequest(events, pixel, baseUrl, opts = {}) {
    const p = pixelFor(pixel, 'meta');
    assertBatch(events, MAX_BATCH, 'meta');
    const version = opts.apiVersion ?? META_DEFAULT_API_VERSION;
    const url =
      `${stripTrailingSlash(baseUrl)}/${version}/${encodeURIComponent(p.pixelId)}/events` +
      `?access_token=${encodeURIComponent(p.accessToken)}`;
    const body = { data: events.map(metaEvent), test_event_code: opt(p.testEventCode) };
    return {
      method: 'POST',
      url,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    };
  },

  classify(res, events, nowMs) {
    if (isNetworkError(res)) return allRetry(events, `network error: ${res.networkError}`);
    if (res.status >= 200 && res.status < 300) return allDelivered(events);

    const delay = retryAfterMs(res, nowMs) ?? metaUsageDelayMs(res.headers);
    const errorObj = parseJsonObject(res.bodyText)?.error;
    const error = isRecord(errorObj) ? errorObj : undefined;
    const text = metaErrorText(error, res.status, res.bodyText);
    const code = numberField(error, 'code');

    const transient =
      res.status >= 500 ||
      res.status === 408 ||
      res.status === 429 ||
      error?.is_transient === true ||
      (code !== undefined && META_RETRY_CODES.has(code));
    if (transient) return allRetry(events, text, delay);
    return allFailed(events, text, code === META_EVENT_LEVEL_CODE);
  },
};
