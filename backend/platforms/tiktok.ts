import { platformEventName } from './event-names.js';
import { DAY_MS, firstFailure, missingSourceUrl, missingUserAgent, timeWindow } from './precheck.js';
import {
  assertBatch,
  externalIdsOf,
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
  httpError,
  isNetworkError,
  numberField,
  parseJsonObject,
  retryAfterMs,
  stringField,
} from './response.js';
import type { DeliveryEvent, PlatformAdapter } from './types.js';

export const TIKTOK_DEFAULT_API_VERSION = 'v1.3';

/** Throttled (40100) and internal error (40700): TikTok says retry. */
export const TIKTOK_RETRY_CODES: ReadonlySet<number> = new Set([40100, 40700]);
/** Invalid parameter: about an event's content, so the rest of a batch may be fine. */
const TIKTOK_EVENT_LEVEL_CODE = 40002;

const MAX_BATCH = 1000;
// TikTok attributes web events reported up to 7 days after they happened, like Meta.
const MAX_EVENT_AGE_MS = 7 * DAY_MS;

function tiktokEvent(e: DeliveryEvent) {
  const name = platformEventName('tiktok', e);
  if (name === undefined) throw new Error(`tiktok: event ${e.eventId} is Custom without a customEventName`);
  const money = valueAndCurrency(e);
  return {
    event: name,
    event_time: toSeconds(e.eventTimeMs),
    event_id: e.eventId,
    user: {
      email: e.hashed.em,
      phone: e.hashed.phE164,
      external_id: externalIdsOf(e),
      first_name: e.hashed.fn,
      last_name: e.hashed.ln,
      zip_code: e.hashed.zp,
      ttclid: opt(e.ttclid),
      ttp: opt(e.ttp),
      ip: opt(e.clientIp),
      user_agent: opt(e.userAgent),
    },
    page: nonEmptyObject({ url: opt(e.eventSourceUrl), referrer: opt(e.referrer) }),
    properties: nonEmptyObject({
      value: money?.value,
      currency: money?.currency,
      content_name: opt(e.contentName),
      order_id: opt(e.businessOrderId),
    }),
    // Events API 2.0 takes it per event, beside `user` and `properties`.
    ...(e.limitedDataUse === true ? { limited_data_use: true } : {}),
  };
}

export const tiktokAdapter: PlatformAdapter = {
  platform: 'tiktok',
  maxBatch: MAX_BATCH,
  maxEventAgeMs: MAX_EVENT_AGE_MS,

  precheck(e, nowMs) {
    return firstFailure(
      () => timeWindow(e, nowMs, MAX_EVENT_AGE_MS, "TikTok's"),
      () =>
        platformEventName('tiktok', e) === undefined ? 'Custom event without customEventName' : undefined,
      () => missingUserAgent(e),
      () => missingSourceUrl(e),
    );
  },

  buildRequest(events, pixel, baseUrl, opts = {}) {
    const p = pixelFor(pixel, 'tiktok');
    assertBatch(events, MAX_BATCH, 'tiktok');
    const version = opts.apiVersion ?? TIKTOK_DEFAULT_API_VERSION;
    const body = {
      event_source: 'web',
      event_source_id: p.pixelCode,
      test_event_code: opt(p.testEventCode),
      data: events.map(tiktokEvent),
    };
    return {
      method: 'POST',
      url: `${stripTrailingSlash(baseUrl)}/open_api/${version}/event/track/`,
      headers: { 'content-type': 'application/json', 'access-token': p.accessToken },
      body: JSON.stringify(body),
    };
  },

  classify(res, events, nowMs) {
    if (isNetworkError(res)) return allRetry(events, `network error: ${res.networkError}`);
    const delay = retryAfterMs(res, nowMs);
    if (res.status >= 500 || res.status === 429 || res.status === 408) {
      return allRetry(events, httpError(res.status, bodySnippet(res.bodyText)), delay);
    }
    if (res.status < 200 || res.status >= 300)
      return allFailed(events, httpError(res.status, bodySnippet(res.bodyText)));

    const body = parseJsonObject(res.bodyText);
    const code = numberField(body, 'code');
    // A 2xx without TikTok's envelope came from something in between; resending is harmless (dedup on event_id).
    if (code === undefined)
      return allRetry(events, httpError(res.status, `unexpected body: ${res.bodyText.trim()}`), delay);
    if (code === 0) return allDelivered(events);
    const text = `${stringField(body, 'message') ?? 'error'} (code ${code})`;
    if (TIKTOK_RETRY_CODES.has(code)) return allRetry(events, text, delay);
    return allFailed(events, text, code === TIKTOK_EVENT_LEVEL_CODE);
  },
};
