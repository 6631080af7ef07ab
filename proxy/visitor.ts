/**
 * The browser behind a request, as its cookies and URL describe it, and what the proxy sends to
 * the tracker and writes back into the browser for it. Pure functions of their inputs.
 */
import { randomUUID } from 'node:crypto';
import {
  FBC_COOKIE,
  FBC_MAX_AGE_SECONDS,
  FBP_COOKIE,
  FBP_PATCHED_COOKIE,
  isCookieSafe,
  isUuid,
  readCookies,
  serializeTrackingCookie,
  SESSION_ID_COOKIE,
  SESSION_ID_MAX_AGE_SECONDS,
  TEMP_ID_COOKIE,
  TEMP_ID_MAX_AGE_SECONDS,
  type CookieScope,
} from '../shared/cookies.js';
import { decideFbc, rawQueryParam } from '../shared/fbc.js';
import { hasNul } from '../shared/text.js';
import { WIRE_LIMITS, type AttributionFields, type TrackInitBody } from '../shared/tracker-wire.js';
import type { RequestView } from './request-view.js';

export interface Visitor {
  tempId: string;
  tempIdIsNew: boolean;
  sessionId: string;
  sessionIdIsNew: boolean;
  fbp: string | undefined;
  fbc: string | undefined;
  /** TikTok's `_ttp` and Snapchat's `_scid` cookies, as the browser has them (their pixels set them). */
  ttp: string | undefined;
  scid: string | undefined;
  /** The `fbc` was built now from the URL's fbclid and is stored as `_fbc`. */
  fbcBuilt: boolean;
  /** The tracker may hold visits of this browser without `fbp`: send `track/update-fbp`. */
  needsFbpPatch: boolean;
  /** The tracker has (or is being sent) this browser's `fbp`: remember it in the marker cookie. */
  markFbpKnown: boolean;
}

/** A value the tracker wire can carry: not empty, not too long, no NUL (the tracker refuses one). */
function usable(value: string | undefined, max: number): string | undefined {
  return value === undefined || value === '' || value.length > max || hasNul(value) ? undefined : value;
}

/** Reads (or creates) the browser's ids and Meta cookies; `search` is the URL's query string. */
export function readVisitor(cookieHeader: string | undefined, search: string, nowMs: number): Visitor {
  const cookies = readCookies(cookieHeader);
  const existingTempId = cookies[TEMP_ID_COOKIE];
  const existingSessionId = cookies[SESSION_ID_COOKIE];
  const tempIdIsNew = !isUuid(existingTempId);
  const sessionIdIsNew = !isUuid(existingSessionId);
  const tempId = tempIdIsNew ? randomUUID() : existingTempId.toLowerCase();
  const sessionId = sessionIdIsNew ? randomUUID() : existingSessionId.toLowerCase();
  const fbp = usable(cookies[FBP_COOKIE], WIRE_LIMITS.clickId);
  const { fbc, built } = decideFbc(cookies[FBC_COOKIE], rawQueryParam(search, 'fbclid'), nowMs);
  const fbpAlreadyKnown = cookies[FBP_PATCHED_COOKIE]?.toLowerCase() === tempId;
  return {
    tempId,
    tempIdIsNew,
    sessionId,
    sessionIdIsNew,
    fbp,
    fbc,
    ttp: usable(cookies._ttp, WIRE_LIMITS.clickId),
    scid: usable(cookies._scid, WIRE_LIMITS.clickId),
    fbcBuilt: built,
    needsFbpPatch: fbp !== undefined && !tempIdIsNew && !fbpAlreadyKnown,
    markFbpKnown: fbp !== undefined && !fbpAlreadyKnown,
  };
}

/**
 * `Set-Cookie` values for a page or invite response: the browser id when created, the session id
 * always (that is what makes the 30 minutes sliding), a proxy-built `_fbc`, and the fbp marker.
 */
export function visitorCookies(visitor: Visitor, nowMs: number, scope: CookieScope): string[] {
  const cookies: string[] = [];
  if (visitor.tempIdIsNew) {
    cookies.push(
      serializeTrackingCookie(TEMP_ID_COOKIE, visitor.tempId, TEMP_ID_MAX_AGE_SECONDS, nowMs, scope),
    );
  }
  cookies.push(
    serializeTrackingCookie(SESSION_ID_COOKIE, visitor.sessionId, SESSION_ID_MAX_AGE_SECONDS, nowMs, scope),
  );
  if (visitor.fbcBuilt && visitor.fbc !== undefined && isCookieSafe(visitor.fbc)) {
    cookies.push(serializeTrackingCookie(FBC_COOKIE, visitor.fbc, FBC_MAX_AGE_SECONDS, nowMs, scope));
  }
  if (visitor.markFbpKnown) {
    cookies.push(
      serializeTrackingCookie(FBP_PATCHED_COOKIE, visitor.tempId, TEMP_ID_MAX_AGE_SECONDS, nowMs, scope),
    );
  }
  return cookies;
}

function clip(value: string | null | undefined, max: number): string | undefined {
  if (value === undefined || value === null || value === '' || hasNul(value)) return undefined;
  return value.length > max ? value.slice(0, max) : value;
}

/** A click id is useless cut short: too long means absent. */
function clickId(value: string | null | undefined): string | undefined {
  return usable(value ?? undefined, WIRE_LIMITS.clickId);
}

function paramIgnoringCase(query: URLSearchParams, name: string): string | null {
  const wanted = name.toLowerCase();
  for (const [key, value] of query) {
    if (key.toLowerCase() === wanted && value !== '') return value;
  }
  return null;
}

function put<K extends keyof AttributionFields>(
  fields: AttributionFields,
  key: K,
  value: AttributionFields[K] | undefined,
): void {
  if (value !== undefined) fields[key] = value;
}

/** The attribution a page URL, its referrer and the browser carry, fitted to the wire limits. */
export function attributionOf(
  view: RequestView,
  referrer: string | undefined,
  visitor: Visitor,
): AttributionFields {
  // Runs on every pageview: fields are set only when present (absent ones stay off the wire)
  // rather than built whole and filtered, and a URL without a query is not parsed for one.
  const fields: AttributionFields = {};
  if (view.origin !== undefined) put(fields, 'href', clip(`${view.origin}${view.target}`, WIRE_LIMITS.url));
  put(fields, 'landingPage', clip(view.target, WIRE_LIMITS.url));
  put(fields, 'referrer', clip(referrer, WIRE_LIMITS.url));
  put(fields, 'userAgent', clip(view.userAgent, WIRE_LIMITS.userAgent));
  put(fields, 'fbc', visitor.fbc);
  put(fields, 'fbp', visitor.fbp);
  put(fields, 'ttp', visitor.ttp);
  put(fields, 'scid', visitor.scid);
  if (view.search.length > 1) {
    const query = new URLSearchParams(view.search);
    put(fields, 'gclid', clickId(query.get('gclid')));
    put(fields, 'gbraid', clickId(query.get('gbraid')));
    put(fields, 'wbraid', clickId(query.get('wbraid')));
    put(fields, 'ttclid', clickId(query.get('ttclid')));
    put(fields, 'sccid', clickId(paramIgnoringCase(query, 'sccid')));
    put(fields, 'utmSource', clip(query.get('utm_source'), WIRE_LIMITS.utm));
    put(fields, 'utmMedium', clip(query.get('utm_medium'), WIRE_LIMITS.utm));
    put(fields, 'utmCampaign', clip(query.get('utm_campaign'), WIRE_LIMITS.utm));
    put(fields, 'utmContent', clip(query.get('utm_content'), WIRE_LIMITS.utm));
    put(fields, 'utmTerm', clip(query.get('utm_term'), WIRE_LIMITS.utm));
  }
  return fields;
}

/** A `track/init` body with a fresh `visitRequestId` (kept for every retry of this visit). */
export function initBody(websiteId: string, visitor: Visitor, attribution: AttributionFields): TrackInitBody {
  return {
    websiteId,
    tempId: visitor.tempId,
    sessionId: visitor.sessionId,
    visitRequestId: randomUUID(),
    ...attribution,
  };
}
