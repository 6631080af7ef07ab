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
  httpError,
  isNetworkError,
  parseJsonObject,
  retryAfterMs,
  stringField,
} from './response.js';
import type { DeliveryEvent, PlatformAdapter } from './types.js';

const MAX_BATCH = 2000;
const MAX_EVENT_AGE_MS = 37 * DAY_MS;

function snapchatEvent(e: DeliveryEvent) {
  const h = e.hashed;
  const money = valueAndCurrency(e);
  return {
    // Snapchat's table has a name for every event type, so this is always defined.
    event_name: platformEventName('snapchat', e),
    event_time: toSeconds(e.eventTimeMs),
    event_id: e.eventId,
    // Snapchat knows websites, apps and everything else (OFFLINE): a chat or a CRM is the latter.
    action_source: isWebsite(e) ? 'WEB' : 'OFFLINE',
    event_source_url: opt(e.eventSourceUrl),
    user_data: {
      ...hashedUserFields(h),
      external_id: externalIdsOf(e),
      client_ip_address: opt(e.clientIp),
      client_user_agent: opt(e.userAgent),
      sc_click_id: opt(e.sccid),
      sc_cookie1: opt(e.scid),
    },
    // The order under both of Snapchat's names: `order_id` in v3's custom data parameters,
    // `transaction_id` the name its v2 API and the Pixel's purchase events give it.
    custom_data: nonEmptyObject({
      value: money?.value,
      currency: money?.currency,
      order_id: opt(e.businessOrderId),
      transaction_id: opt(e.businessOrderId),
    }),
  };
}

function reasonText(body: Record<string, unknown> | undefined): string | undefined {
  const status = stringField(body, 'status');
  const reason = stringField(body, 'reason') ?? stringField(body, 'message');
  if (status && reason) return `${status}: ${reason}`;
  return reason ?? status;
}

export const snapchatAdapter: PlatformAdapter = {
  platform: 'snapchat',
  maxBatch: MAX_BATCH,
  maxEventAgeMs: MAX_EVENT_AGE_MS,

  precheck(e, nowMs) {
    return firstFailure(
      () => timeWindow(e, nowMs, MAX_EVENT_AGE_MS, "Snapchat's"),
      () => missingUserAgent(e),
      () => missingSourceUrl(e),
    );
  },

  buildRequest(events, pixel, baseUrl) {
    const p = pixelFor(pixel, 'snapchat');
    assertBatch(events, MAX_BATCH, 'snapchat');
    const url =
      `${stripTrailingSlash(baseUrl)}/v3/${encodeURIComponent(p.pixelId)}/events` +
      `?access_token=${encodeURIComponent(p.accessToken)}`;
    return {
      method: 'POST',
      url,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ data: events.map(snapchatEvent) }),
    };
  },

  classify(res, events, nowMs) {
    if (isNetworkError(res)) return allRetry(events, `network error: ${res.networkError}`);
    const body = parseJsonObject(res.bodyText);
    const detail = reasonText(body) ?? bodySnippet(res.bodyText);
    if (res.status >= 500 || res.status === 429 || res.status === 408) {
      return allRetry(events, httpError(res.status, detail), retryAfterMs(res, nowMs));
    }
    if (res.status === 401 || res.status === 403) return allFailed(events, httpError(res.status, detail));
    if (res.status < 200 || res.status >= 300) return allFailed(events, httpError(res.status, detail), true);

    const status = stringField(body, 'status');
    if (status === 'VALID') return allDelivered(events);
    if (status === 'INVALID') return allFailed(events, detail ?? 'INVALID', true);
    // A 2xx without Snapchat's verdict came from something in between; resending is harmless (dedup on event_id).
    return allRetry(
      events,
      httpError(res.status, `unexpected body: ${res.bodyText.trim()}`),
      retryAfterMs(res, nowMs),
    );
  },
};
