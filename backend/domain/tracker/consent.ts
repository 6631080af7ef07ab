import { createHash, randomUUID } from 'node:crypto';
import type { Consent, ConsentMode } from '../../../shared/tracker-wire.js';

/**
 * The visitor's consent to tracking (docs/consent.md), and what a visit without it keeps: enough
 * to be counted in the funnel (its site, time, kind and the page's path), nothing that identifies
 * the browser or the ad click. Pure functions, applied where a visit is written (`visitCall`), so
 * that no path into the visits table can store more.
 */

/** A visit's consent: what its request says, else what the site's mode implies for silence. */
export function isConsented(said: Consent | undefined, mode: ConsentMode): boolean {
  return said === undefined ? mode === 'implied' : said === 'granted';
}

/**
 * A URL without its query and fragment: the click ids (`fbclid`, `gclid`, …) and UTM tags a page
 * URL carries live there. Anything that is not a URL is dropped rather than guessed at.
 */
export function withoutQuery(url: string | undefined): string | undefined {
  if (url === undefined || url === '') return undefined;
  const cut = url.search(/[?#]/);
  const bare = cut < 0 ? url : url.slice(0, cut);
  return bare === '' ? undefined : bare;
}

/** The fields a visit without consent keeps: the page (path only) and the referring page (path only). */
export interface ConsentlessPage {
  href?: string | undefined;
  landingPage?: string | undefined;
  referrer?: string | undefined;
}

export function consentlessPage(a: ConsentlessPage): ConsentlessPage {
  return {
    href: withoutQuery(a.href),
    landingPage: withoutQuery(a.landingPage),
    referrer: withoutQuery(a.referrer),
  };
}

/**
 * The browser and session ids a visit without consent is stored under, in place of the ones its
 * request carried (the values of Capigram's cookies, which must not be kept): derived from the
 * visit's own request id, so that a retry of the same pageview is still the same visit, and
 * random without one. Neither can be tied to the browser's cookies.
 */
export function consentlessIds(
  siteId: string,
  visitRequestId: string | undefined,
): { tempId: string; sessionId: string } {
  if (visitRequestId === undefined) return { tempId: randomUUID(), sessionId: randomUUID() };
  return {
    tempId: uuidFrom(`consentless-tid:${siteId}:${visitRequestId}`),
    sessionId: uuidFrom(`consentless-sid:${siteId}:${visitRequestId}`),
  };
}

/** A version-4-shaped UUID from the first 16 bytes of a SHA-256. */
function uuidFrom(text: string): string {
  const b = createHash('sha256').update(text).digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x40;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
