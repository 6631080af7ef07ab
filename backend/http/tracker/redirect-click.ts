import { createHash, randomUUID } from 'node:crypto';
import { decideFbc, rawQueryParam } from '../../../shared/fbc.js';
import { hasNul } from '../../../shared/text.js';
import { WIRE_LIMITS } from '../../../shared/tracker-wire.js';
import type { VisitAttribution } from '../../domain/tracker/visits.js';

/**
 * What `GET /r/{siteId}/{channelId}` learns from the ad click itself: there is no page and no
 * script, only the URL the ad opened, its Referer and Capigram's own cookies.
 */

export interface RedirectClick {
  attribution: VisitAttribution;
  /** The ad platform's id of this click, from the URL (fbclid byte for byte), if it has one. */
  clickId: string | undefined;
}

/**
 * Click ids and UTM parameters from the query. A value the wire cannot carry (too long, or with a
 * NUL, which PostgreSQL cannot store) is dropped rather than cut: the visitor still gets the link.
 */
export function redirectClick(
  search: string,
  query: (name: string) => string | undefined,
  cookieFbc: string | undefined,
  nowMs: number,
): RedirectClick {
  const fit = (value: string | undefined, max: number) =>
    value === undefined || value === '' || value.length > max || hasNul(value) ? undefined : value;
  const fbclid = fit(rawQueryParam(search, 'fbclid'), WIRE_LIMITS.clickId);
  const attribution: VisitAttribution = {
    fbc: decideFbc(cookieFbc, fbclid, nowMs).fbc,
    gclid: fit(query('gclid'), WIRE_LIMITS.clickId),
    gbraid: fit(query('gbraid'), WIRE_LIMITS.clickId),
    wbraid: fit(query('wbraid'), WIRE_LIMITS.clickId),
    ttclid: fit(query('ttclid'), WIRE_LIMITS.clickId),
    // Snap writes its click id as ScCid.
    sccid: fit(query('ScCid') ?? query('sccid'), WIRE_LIMITS.clickId),
    utmSource: fit(query('utm_source'), WIRE_LIMITS.utm),
    utmMedium: fit(query('utm_medium'), WIRE_LIMITS.utm),
    utmCampaign: fit(query('utm_campaign'), WIRE_LIMITS.utm),
    utmContent: fit(query('utm_content'), WIRE_LIMITS.utm),
    utmTerm: fit(query('utm_term'), WIRE_LIMITS.utm),
  };
  return {
    attribution,
    clickId:
      fbclid ??
      attribution.gclid ??
      attribution.gbraid ??
      attribution.wbraid ??
      attribution.ttclid ??
      attribution.sccid,
  };
}

/**
 * The visitRequestId of a redirect click. The same ad click (its click id) opened again in the
 * same browser session (the cookies this redirect set) is the same visit, so a reload or a double tap neither counts twice nor
 * spends a second link; anything else is a new click with a fresh id.
 */
export function clickRequestId(q: {
  siteId: string;
  channelId: string;
  tempId: string;
  sessionId: string;
  clickId: string | undefined;
}): string {
  if (q.clickId === undefined) return randomUUID();
  const identity = [
    q.siteId,
    q.channelId.toLowerCase(),
    q.tempId.toLowerCase(),
    q.sessionId.toLowerCase(),
    q.clickId,
  ].join('\n');
  const hex = createHash('sha256').update(identity).digest('hex');
  // An RFC 9562 version 8 (custom) UUID built from the hash.
  const variant = ((parseInt(hex[16] ?? '0', 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}
