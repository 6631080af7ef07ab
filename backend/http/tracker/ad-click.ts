import type { Context } from 'hono';
import {
  FBC_COOKIE,
  isUuid,
  readCookies,
  SESSION_ID_COOKIE,
  SESSION_ID_MAX_AGE_SECONDS,
  serializeTrackingCookie,
  TEMP_ID_COOKIE,
  TEMP_ID_MAX_AGE_SECONDS,
} from '../../../shared/cookies.js';
import { hasNul } from '../../../shared/text.js';
import { WIRE_LIMITS } from '../../../shared/tracker-wire.js';
import { ApiError } from '../../errors.js';
import { userAgentOf } from './browser-context.js';
import type { KeylessEnv } from './env.js';
import { isLinkLookup } from './link-preview.js';
import { clickRequestId, redirectClick } from './redirect-click.js';
import { linkLookupAnswer } from './responses.js';
import type { TrackerSurface } from './surface.js';

/**
 * What an ad click straight to Telegram (`/r/…`) learns before it is handed a link: the site, the
 * browser's ids (Capigram's cookies, else new ones), the click ids and UTM tags of the URL, and
 * the visitRequestId that makes a reload the same visit. A link lookup is answered at once.
 * `target` names what the click is for (a channel id, `entry:<id>`), part of that request id.
 */
export async function adClick(
  s: TrackerSurface,
  c: Context<KeylessEnv>,
  siteParam: string,
  target: string,
  siteFound: (siteId: string) => void = () => undefined,
  /** True: the caller counts the rate limit in its own statement, through the returned `admission`. */
  countsOwnLimit = false,
) {
  const { deps } = s;
  const site =
    siteParam.length <= WIRE_LIMITS.websiteId && !hasNul(siteParam)
      ? await s.sites.byIdOrWebsiteId(siteParam)
      : null;
  if (site === null) throw new ApiError('UNKNOWN_WEBSITE', 'this link names no known site');
  siteFound(site.id);
  s.vouched(c, site);
  const browser = c.get('browser');
  if (isLinkLookup(c.req.method, userAgentOf(browser, undefined))) return linkLookupAnswer(c);
  if (!countsOwnLimit) await s.limiter.consume('invite', site.id, browser.ip);

  // An ad link carries no consent of its own: the site's mode decides. Without consent the
  // browser's cookies are neither read nor written, and the visit keeps only its path.
  const consented = site.consentMode === 'implied';
  const url = new URL(c.req.url);
  const cookies = consented ? readCookies(c.req.header('cookie')) : {};
  const knownTempId = cookies[TEMP_ID_COOKIE];
  const knownSessionId = cookies[SESSION_ID_COOKIE];
  const tempId = isUuid(knownTempId) ? knownTempId : crypto.randomUUID();
  const sessionId = isUuid(knownSessionId) ? knownSessionId : crypto.randomUUID();
  const nowMs = deps.now().getTime();
  const click = redirectClick(url.search, (name) => c.req.query(name), cookies[FBC_COOKIE], nowMs);
  const referer = c.req.header('referer');
  const href = `${deps.config.PUBLIC_URL}${url.pathname}${url.search}`;
  const visit = {
    siteId: site.id,
    tempId,
    sessionId,
    visitRequestId: clickRequestId({
      siteId: site.id,
      channelId: target,
      tempId,
      sessionId,
      clickId: click.clickId,
    }),
    attribution: {
      ...click.attribution,
      href: href.length <= WIRE_LIMITS.url ? href : undefined,
      landingPage: `${url.pathname}${url.search}`.slice(0, WIRE_LIMITS.url),
      referrer: referer === undefined || referer.length > WIRE_LIMITS.url ? undefined : referer,
      clientIp: browser.ip,
      userAgent: userAgentOf(browser, undefined),
      consented,
    },
  };
  const setCookies = () => {
    if (!consented) {
      c.header('cache-control', 'no-store');
      return;
    }
    const scope = { secure: s.secureCookies };
    c.header(
      'set-cookie',
      serializeTrackingCookie(TEMP_ID_COOKIE, tempId, TEMP_ID_MAX_AGE_SECONDS, nowMs, scope),
      { append: true },
    );
    c.header(
      'set-cookie',
      serializeTrackingCookie(SESSION_ID_COOKIE, sessionId, SESSION_ID_MAX_AGE_SECONDS, nowMs, scope),
      { append: true },
    );
    c.header('cache-control', 'no-store');
  };
  return { visit, setCookies, admission: s.limiter.visitAdmission('invite', site.id, browser.ip) };
}
