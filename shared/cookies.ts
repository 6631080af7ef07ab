/**
 * First-party cookies written by the reverse proxy and by `tracker.js` alike (CONTRACT.md).
 *
 * They are deliberately not `HttpOnly`: the proxy and the browser script must be able to share one
 * browser id and one session, and a script cannot overwrite (or read) an `HttpOnly` cookie.
 */
import { parseCookie } from 'cookie';

/** Browser id (`tempId` on the wire): a UUID kept for a year. */
export const TEMP_ID_COOKIE = 'capigram_tid';
/** Session id (`sessionId` on the wire): a UUID that dies after 30 idle minutes. */
export const SESSION_ID_COOKIE = 'capigram_sid';
/**
 * Marker meaning "the tracker already has an `fbp` for this browser". Its value is the `tempId` it
 * vouches for, so a marker left behind by an older browser id never suppresses a needed patch.
 */
export const FBP_PATCHED_COOKIE = 'capigram_fbpp';

/** Meta's own first-party cookies, read as the pixel wrote them. */
export const FBP_COOKIE = '_fbp';
export const FBC_COOKIE = '_fbc';

export const TEMP_ID_MAX_AGE_SECONDS = 365 * 24 * 60 * 60;
export const SESSION_ID_MAX_AGE_SECONDS = 30 * 60;
/** Meta keeps `_fbc` for 90 days; a proxy-built one lives as long. */
export const FBC_MAX_AGE_SECONDS = 90 * 24 * 60 * 60;

export interface CookieScope {
  /** `Secure` is set only when the visitor reached the site over HTTPS. */
  secure: boolean;
  /** Omitted: a host-only cookie on the site's own host. */
  domain?: string | undefined;
}

/**
 * One `Set-Cookie` value with the shared attributes: `Path=/`, `SameSite=Lax`, `Secure` on HTTPS.
 * `Expires` mirrors `Max-Age` (computed from `nowMs`) for clients that only understand the former.
 * Values are written verbatim: `_fbc` must keep the fbclid byte for byte, and UUIDs need no encoding.
 */
export function serializeTrackingCookie(
  name: string,
  value: string,
  maxAgeSeconds: number,
  nowMs: number,
  scope: CookieScope,
): string {
  if (!isCookieSafe(value)) throw new TypeError(`cookie ${name}: value is not a valid cookie value`);
  // Written by hand: this runs on every pageview, and the names and values are known-safe.
  const domain = scope.domain === undefined ? '' : `; Domain=${scope.domain}`;
  return `${name}=${value}; Max-Age=${maxAgeSeconds}${domain}; Path=/; Expires=${httpDate(nowMs + maxAgeSeconds * 1000)}; SameSite=Lax${scope.secure ? '; Secure' : ''}`;
}

/**
 * `Date#toUTCString` has a resolution of one second and costs about as much as the rest of a
 * cookie: a pageview writes one to three cookies, all of them expiring a fixed time from now, so
 * the few dates of the current second are remembered.
 */
const httpDates = new Map<number, string>();
const HTTP_DATES_KEPT = 16;
/** Farthest instant a `Date` holds; beyond it (or NaN) the date is invalid, never cached. */
const MAX_DATE_MS = 8.64e15;

function httpDate(ms: number): string {
  if (!(Math.abs(ms) <= MAX_DATE_MS)) return new Date(ms).toUTCString();
  // Keyed as `Date` rounds: whole milliseconds towards zero, then down to the second.
  const second = Math.floor(Math.trunc(ms) / 1000);
  let date = httpDates.get(second);
  if (date === undefined) {
    date = new Date(ms).toUTCString();
    if (httpDates.size >= HTTP_DATES_KEPT) httpDates.clear();
    httpDates.set(second, date);
  }
  return date;
}

/** True when `value` can be stored as a cookie value without encoding (RFC 6265 cookie-octets). */
export function isCookieSafe(value: string): boolean {
  return /^[\x21\x23-\x2B\x2D-\x3A\x3C-\x5B\x5D-\x7E]*$/.test(value);
}

/**
 * Built once: an options object (and the function in it) made per call costs more than parsing a
 * short header, and the TypeScript loader wraps each new function object to keep its name.
 */
const VERBATIM = { decode: (raw: string): string => raw };

/**
 * Parses a `Cookie` header without percent-decoding, so `_fbp`/`_fbc` reach the ad platform exactly
 * as the pixel wrote them. When a name repeats, the first one wins (the most specific path, per
 * RFC 6265 ordering).
 */
export function readCookies(header: string | undefined): Record<string, string> {
  if (header === undefined || header === '') return {};
  const parsed = parseCookie(header, VERBATIM);
  // A plain object, as before: the parser's has no prototype. Values are never undefined here
  // (the identity decoder returns every value it is given).
  const out: Record<string, string> = {};
  for (const name in parsed) out[name] = parsed[name]!;
  return out;
}

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** Whether a cookie value is a usable id (an RFC 9562 UUID, as the tracker wire requires). */
export function isUuid(value: string | undefined): value is string {
  return value !== undefined && UUID_PATTERN.test(value);
}
