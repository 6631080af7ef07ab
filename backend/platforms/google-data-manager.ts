import { conversionActionFor, missingMappingReason } from './google-actions.js';
import { googleClickId, googleConversionChecks, googleUserIdentifiers } from './google.js';
import { DAY_MS, firstFailure } from './precheck.js';
import {
  assertBatch,
  finiteNumber,
  nonEmptyObject,
  opt,
  pixelFor,
  stripTrailingSlash,
  upperCurrency,
} from './request.js';
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
} from './response.js';
import type { ActionSource, DeliveryEvent, EventOutcome, PixelConfigOf, PlatformAdapter } from './types.js';

/**
 * Google conversions through the Data Manager API (`POST /v1/events:ingest`): offline conversions
 * and enhanced conversions for leads for every Google Ads account, with an OAuth token of scope
 * `https://www.googleapis.com/auth/datamanager` and no developer token. Field names are those of
 * the REST mapping of `google/ads/datamanager/v1/*.proto` (lowerCamelCase JSON).
 *
 * Unlike the Google Ads API there is no partial failure: one invalid event fails the whole
 * request (the "fast-fail model"), naming it in a `google.rpc.BadRequest` field violation
 * (`events[3].adIdentifiers.gclid`). Such a request is split (`isolate`) until the bad event fails
 * alone. What Google finds wrong later (an unknown click, denied consent) is read with
 * `requestStatus:retrieve` (`delivery/google-diagnostics.ts`).
 */
/** `IngestEventsRequest.events`: "At most 2000 Event resources can be sent in a single request". */
export const DATA_MANAGER_MAX_EVENTS = 2000;
const MAX_EVENT_AGE_MS = 90 * DAY_MS;

export type DataManagerConsent = 'CONSENT_GRANTED' | 'CONSENT_DENIED';

/** `EventSource`: where the conversion happened. A Telegram join is a message; a CRM's record is other. */
const EVENT_SOURCE: Record<ActionSource, 'WEB' | 'MESSAGE' | 'OTHER'> = {
  website: 'WEB',
  chat: 'MESSAGE',
  system_generated: 'OTHER',
};

function digitsOnly(id: string): string {
  return id.replace(/[\s-]/g, '');
}

/** The conversion action's id: a full resource name (`customers/1/conversionActions/2`) gives its last part. */
export function productDestinationId(action: string): string {
  const id = action.trim();
  const m = /^customers\/\d+\/conversionActions\/(\d+)$/.exec(id);
  return m ? m[1]! : id;
}

function consentStatus(c: 'GRANTED' | 'DENIED' | null | undefined): DataManagerConsent | undefined {
  return c === 'GRANTED' ? 'CONSENT_GRANTED' : c === 'DENIED' ? 'CONSENT_DENIED' : undefined;
}

/** RFC 3339 in UTC with milliseconds, the JSON form of `google.protobuf.Timestamp`. */
export function rfc3339(ms: number): string {
  return new Date(ms).toISOString();
}

interface BuiltEvent {
  destinationReferences: string[];
  transactionId: string;
  eventTimestamp: string;
  eventSource: string;
  adIdentifiers?: Record<string, unknown>;
  userData?: { userIdentifiers: Array<{ emailAddress: string } | { phoneNumber: string }> };
  consent?: { adUserData?: DataManagerConsent; adPersonalization?: DataManagerConsent };
  conversionValue?: number;
  currency?: string;
}

/**
 * One `Event`. With `adUserData` denied, nothing that identifies the person goes (no e-mail, phone,
 * IP or User-Agent): the click id and the consent alone, as Google's consent rules ask.
 */
export function dataManagerEvent(
  e: DeliveryEvent,
  reference: string,
  defaultAdUserData?: 'GRANTED' | 'DENIED',
): BuiltEvent {
  const adUserData = consentStatus(e.adUserDataConsent ?? defaultAdUserData);
  const adPersonalization = consentStatus(e.adPersonalizationConsent);
  const denied = adUserData === 'CONSENT_DENIED';
  const identifiers = denied
    ? []
    : googleUserIdentifiers(e).map((id) =>
        id.hashedEmail !== undefined
          ? { emailAddress: id.hashedEmail }
          : { phoneNumber: id.hashedPhoneNumber! },
      );
  const device = denied
    ? undefined
    : nonEmptyObject({ userAgent: opt(e.userAgent), ipAddress: opt(e.landingIp) });
  const click = googleClickId(e);
  const adIdentifiers =
    click === undefined && device === undefined
      ? undefined
      : { ...click, ...(device ? { landingPageDeviceInfo: device } : {}) };
  const value = finiteNumber(e.value) ? e.value : undefined;
  const currency = value === undefined ? undefined : upperCurrency(e.currency);
  return {
    destinationReferences: [reference],
    // The order's own id when the business has one, so that a later value for it is the same conversion.
    transactionId: opt(e.orderId) ?? e.eventId,
    eventTimestamp: rfc3339(e.eventTimeMs),
    eventSource: EVENT_SOURCE[e.actionSource ?? 'website'],
    ...(adIdentifiers ? { adIdentifiers } : {}),
    ...(identifiers.length > 0 ? { userData: { userIdentifiers: identifiers } } : {}),
    ...(adUserData || adPersonalization
      ? {
          consent: {
            ...(adUserData ? { adUserData } : {}),
            ...(adPersonalization ? { adPersonalization } : {}),
          },
        }
      : {}),
    ...(value !== undefined && currency !== undefined ? { conversionValue: value, currency } : {}),
  };
}

/** The `IngestEventsRequest` body: one destination per conversion action the batch uses. */
export function ingestBody(
  events: readonly DeliveryEvent[],
  p: PixelConfigOf<'google'>,
  defaultAdUserData?: 'GRANTED' | 'DENIED',
): Record<string, unknown> {
  const customerId = digitsOnly(p.customerId);
  const login = opt(p.loginCustomerId);
  const destinations = new Map<string, Record<string, unknown>>();
  const built = events.map((e) => {
    const action = conversionActionFor(p.conversionActions, e.eventType, e.customEventName);
    // The pipeline prechecks with the pixel, so an unmapped event here is a programming error.
    if (action === undefined) throw new Error(missingMappingReason(e.eventType, e.customEventName));
    const id = productDestinationId(action);
    const reference = `action-${id}`;
    if (!destinations.has(reference)) {
      destinations.set(reference, {
        reference,
        operatingAccount: { accountType: 'GOOGLE_ADS', accountId: customerId },
        ...(login !== undefined
          ? { loginAccount: { accountType: 'GOOGLE_ADS', accountId: digitsOnly(login) } }
          : {}),
        productDestinationId: id,
      });
    }
    return dataManagerEvent(e, reference, defaultAdUserData);
  });
  return {
    destinations: [...destinations.values()],
    events: built,
    // Required once any event carries user data: our digests are lowercase hex.
    ...(built.some((e) => e.userData) ? { encoding: 'HEX' } : {}),
    ...(p.validateOnly ? { validateOnly: true } : {}),
  };
}

/** A field violation's event index (`events[12].userData…` → 12), if it names one. */
export function violationEventIndex(field: string): number | undefined {
  const m = /^events\[(\d+)\]/.exec(field);
  return m ? Number(m[1]) : undefined;
}

interface RpcError {
  code?: number;
  status?: string;
  message?: string;
  violations: Array<{ field: string; description: string }>;
  reason?: string;
}

/** The `google.rpc.Status` of an error answer, with its BadRequest and ErrorInfo details. */
export function rpcError(body: Record<string, unknown> | undefined): RpcError | undefined {
  const error = body?.error;
  if (!isRecord(error)) return undefined;
  const violations: RpcError['violations'] = [];
  let reason: string | undefined;
  const details = Array.isArray(error.details) ? error.details.filter(isRecord) : [];
  for (const d of details) {
    if (Array.isArray(d.fieldViolations)) {
      for (const v of d.fieldViolations.filter(isRecord)) {
        violations.push({
          field: stringField(v, 'field') ?? '',
          description: stringField(v, 'description') ?? '',
        });
      }
    }
    if (stringField(d, '@type')?.endsWith('google.rpc.ErrorInfo')) reason = stringField(d, 'reason');
  }
  return {
    code: typeof error.code === 'number' ? error.code : undefined,
    status: stringField(error, 'status'),
    message: stringField(error, 'message'),
    violations,
    reason,
  };
}

/** `STATUS: message (reason; field: description)`: what the operator reads on the send. */
function errorText(e: RpcError): string {
  const head = e.status && e.message ? `${e.status}: ${e.message}` : (e.message ?? e.status ?? 'error');
  const first = e.violations[0];
  const specific = [e.reason, first ? `${first.field}: ${first.description}` : undefined].filter(Boolean);
  return specific.length > 0 ? `${head} (${specific.join('; ')})` : head;
}

export const googleDataManagerAdapter: PlatformAdapter = {
  platform: 'google',
  maxBatch: DATA_MANAGER_MAX_EVENTS,
  maxEventAgeMs: MAX_EVENT_AGE_MS,

  precheck(e, nowMs, pixel) {
    return firstFailure(...googleConversionChecks(e, nowMs, pixel), () => {
      if (googleClickId(e) !== undefined) return undefined;
      if ((e.adUserDataConsent ?? undefined) !== 'DENIED' && googleUserIdentifiers(e).length > 0)
        return undefined;
      return 'no Google click id (gclid, gbraid, wbraid) and no e-mail or phone that may be sent to match the conversion with';
    });
  },

  buildRequest(events, pixel, baseUrl, opts = {}) {
    const p = pixelFor(pixel, 'google');
    assertBatch(events, DATA_MANAGER_MAX_EVENTS, 'google');
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      authorization: `Bearer ${p.oauthToken}`,
    };
    return {
      method: 'POST',
      url: `${stripTrailingSlash(baseUrl)}/v1/events:ingest`,
      headers,
      body: JSON.stringify(ingestBody(events, p, opts.adUserDataConsent)),
    };
  },

  classify(res, events, nowMs): EventOutcome[] {
    if (isNetworkError(res)) return allRetry(events, `network error: ${res.networkError}`);
    const body = parseJsonObject(res.bodyText);
    const rpc = rpcError(body);
    const detail = rpc ? errorText(rpc) : bodySnippet(res.bodyText);
    if (res.status >= 500 || res.status === 429 || res.status === 408) {
      return allRetry(events, httpError(res.status, detail), retryAfterMs(res, nowMs));
    }
    if (res.status >= 200 && res.status < 300) {
      // Accepted: Google processes the events later; `requestId` is how their outcome is asked for.
      return allDelivered(events);
    }
    const failed = allFailed(events, httpError(res.status, detail));
    // A request refused for an event in it (a field violation under `events[i]`, or a bad request
    // that names no field) is split until the event fails alone; one refused for its credentials
    // or destination fails as a whole: splitting would only repeat the refusal.
    const namesEvent = rpc?.violations.some((v) => violationEventIndex(v.field) !== undefined) ?? false;
    const namesOther = rpc?.violations.some((v) => violationEventIndex(v.field) === undefined) ?? false;
    const isolate = res.status === 400 && events.length > 1 && (namesEvent || !namesOther);
    return isolate ? failed.map((o) => ({ ...o, isolate: true as const })) : failed;
  },
};
