import { Hono, type Context } from 'hono';
import { parseTrustedProxies } from '../../../shared/client-ip.js';
import { hasNul } from '../../../shared/text.js';
import {
  FBC_COOKIE,
  readCookies,
  SESSION_ID_COOKIE,
  SESSION_ID_MAX_AGE_SECONDS,
  serializeTrackingCookie,
  TEMP_ID_COOKIE,
  TEMP_ID_MAX_AGE_SECONDS,
  isUuid,
} from '../../../shared/cookies.js';
import {
  resolveVisitRequestId,
  trackAppBodySchema,
  trackConsentQuerySchema,
  trackDirectInviteBodySchema,
  trackEntryQuerySchema,
  trackInitBodySchema,
  trackInviteQuerySchema,
  trackUpdateFbpBodySchema,
  WIRE_LIMITS,
  type AttributionFields,
  type Consent,
} from '../../../shared/tracker-wire.js';
import type { Deps } from '../../deps.js';
import { isConsented } from '../../domain/tracker/consent.js';
import { patchLatestVisitFbp } from '../../domain/tracker/fbp.js';
import { directInvite, inviteClick } from '../../domain/tracker/invites.js';
import { appOpened } from '../../domain/entries/app-open.js';
import { entryClick, entryFallbackUrl, entryRedirect } from '../../domain/entries/click.js';
import { createSiteDirectory, type TrackerSite } from '../../domain/tracker/sites.js';
import { recordVisitBatched } from '../../domain/tracker/visit-batch.js';
import type { VisitAttribution } from '../../domain/tracker/visits.js';
import { ApiError } from '../../errors.js';
import { readJson, readQuery } from '../json.js';
import { createForwarderKeys } from '../../domain/tracker/forwarders.js';
import { clientContext, userAgentOf } from './browser-context.js';
import { corsResponses, preflight } from './cors.js';
import { checkDomains } from './domains.js';
import { createInstallSignals } from '../../domain/tracker/install-signals.js';
import type { KeylessEnv } from './env.js';
import { isLinkLookup } from './link-preview.js';
import { isBrowserNavigation, navigationFallback, type FallbackTarget } from './navigation-fallback.js';
import { createRateLimiter, rateLimitSettings } from '../../domain/rate-limits.js';
import { clickRequestId, redirectClick } from './redirect-click.js';
import { registerTrackerScriptRoute } from './script.js';

/**
 * The keyless tracker surface (spec: keyless tracker endpoints; CONTRACT.md: URLs, domain
 * validation, responses): `track/init`, `track/update-fbp`, `track/invite`, `track/direct-invite`,
 * `/r/{siteId}/{channelId}` and the browser script. No API key: the public websiteId names the
 * site, and every request is domain-validated (except `/r/`, opened straight from an ad) and
 * rate-limited per (site, browser IP).
 */
export function trackerRoutes(deps: Deps): Hono<KeylessEnv> {
  const trust = parseTrustedProxies(deps.config.TRUSTED_PROXIES);
  const sites = createSiteDirectory(deps.pool);
  const limiter = createRateLimiter(deps.pool, rateLimitSettings(deps.config));
  const forwarders = createForwarderKeys(deps.pool);
  const secureCookies = deps.config.PUBLIC_URL.startsWith('https:');
  // Install checks (first/last visit, refused hosts): recorded off the hot path, see install-signals.ts.
  const install = createInstallSignals(deps.pool, deps.log);
  const keyless = new Hono<KeylessEnv>();

  keyless.use('/backend/track/*', corsResponses(), clientContext(trust, forwarders), async (c, next) => {
    await next();
    // Answers are per visitor: never cached by the browser or anything in between.
    c.res.headers.set('cache-control', 'no-store');
  });
  keyless.use('/r/*', clientContext(trust, forwarders));
  // A Mini App may be served from any origin, and its initData is its own credential (nothing of
  // Capigram's host is sent, and the answer holds nothing but whether the visit was tied): any
  // origin may post it. Registered before the site-origin preflight of the rest of the surface.
  keyless.options('/backend/track/app', (c) =>
    c.body(null, 204, {
      'access-control-allow-origin': c.req.header('origin') ?? '*',
      'access-control-allow-methods': 'POST, OPTIONS',
      'access-control-allow-headers': 'Content-Type',
      'access-control-max-age': '600',
      vary: 'Origin',
    }),
  );
  keyless.options('/backend/track/*', preflight(deps.pool));

  async function siteFor(websiteId: string): Promise<TrackerSite> {
    const site = await sites.byWebsiteId(websiteId);
    if (site === null) throw new ApiError('UNKNOWN_WEBSITE', `websiteId ${websiteId} is not known`);
    return site;
  }

  /** A forwarder key vouches for one site's requests only. */
  function vouched(c: Context<KeylessEnv>, site: TrackerSite): void {
    const forwarderSiteId = c.get('browser').forwarderSiteId;
    if (forwarderSiteId !== undefined && forwarderSiteId !== site.id)
      throw new ApiError('FORBIDDEN', 'this forwarder key belongs to another site');
  }

  /** Domain validation; on success the Origin (if any) is answered by CORS, errors included. */
  function admit(c: Context<KeylessEnv>, site: TrackerSite, href?: string): void {
    vouched(c, site);
    const verdict = checkDomains(
      { origin: c.req.header('origin'), referer: c.req.header('referer'), href },
      site.domains,
    );
    if (!verdict.ok) {
      if (verdict.code === 'DOMAIN_NOT_ALLOWED' && verdict.host !== undefined)
        install.domainRefused(site.id, verdict.host, deps.now());
      throw new ApiError(verdict.code, verdict.detail);
    }
    c.set('corsOrigin', verdict.corsOrigin);
  }

  function requestIdOf(body: {
    visitRequestId?: string | undefined;
    gatewayRequestId?: string | undefined;
  }): string | undefined {
    const resolved = resolveVisitRequestId(body);
    if (!resolved.ok) {
      throw new ApiError(
        'REQUEST_ID_MISMATCH',
        'visitRequestId and gatewayRequestId must hold the same UUID when both are sent',
      );
    }
    return resolved.visitRequestId;
  }

  /** What a request tells of its visitor; without consent, `visitCall` keeps only the page's path. */
  function attributionOf(
    c: Context<KeylessEnv>,
    body: AttributionFields,
    consented: boolean,
  ): VisitAttribution {
    const browser = c.get('browser');
    return {
      consented,
      href: body.href,
      landingPage: body.landingPage,
      referrer: body.referrer,
      clientIp: browser.ip,
      userAgent: userAgentOf(browser, body.userAgent),
      fbc: body.fbc,
      fbp: body.fbp,
      gclid: body.gclid,
      gbraid: body.gbraid,
      wbraid: body.wbraid,
      ttclid: body.ttclid,
      sccid: body.sccid,
      ttp: body.ttp,
      scid: body.scid,
      utmSource: body.utmSource,
      utmMedium: body.utmMedium,
      utmCampaign: body.utmCampaign,
      utmContent: body.utmContent,
      utmTerm: body.utmTerm,
    };
  }

  keyless.post('/backend/track/init', async (c) => {
    const body = await readJson(c, trackInitBodySchema);
    const visitRequestId = requestIdOf(body);
    const site = await siteFor(body.websiteId);
    admit(c, site, body.href);
    const consented = isConsented(body.consent, site.consentMode);
    // The rate-limit count is made by the statement that records the visit, and visits that
    // arrive together share a round trip and a commit (visit-batch.ts).
    const visit = await recordVisitBatched(
      deps,
      {
        siteId: site.id,
        tempId: body.tempId,
        sessionId: body.sessionId,
        visitRequestId,
        kind: 'pageview',
        attribution: attributionOf(c, body, consented),
      },
      limiter.visitAdmission('init', site.id, c.get('browser').ip),
    );
    install.visitSeen(site.id, deps.now());
    return c.json({ visitId: visit.visitId, pageViewEventId: visit.pageViewEventId });
  });

  keyless.post('/backend/track/update-fbp', async (c) => {
    const body = await readJson(c, trackUpdateFbpBodySchema);
    const site = await siteFor(body.websiteId);
    admit(c, site);
    await limiter.consume('fbp', site.id, c.get('browser').ip);
    return c.json({
      updated: await patchLatestVisitFbp(deps.pool, { siteId: site.id, tempId: body.tempId, fbp: body.fbp }),
    });
  });

  // The site's consent mode, for a server-side client (the proxy) that decides by it whether a
  // visitor without a consent cookie may be given Capigram's cookies. Public: it is no secret.
  keyless.get('/backend/track/consent', async (c) => {
    const query = readQuery(c, trackConsentQuerySchema);
    const site = await siteFor(query.website);
    vouched(c, site);
    return c.json({ consentMode: site.consentMode });
  });

  keyless.get('/backend/track/invite', async (c) => {
    const target: FallbackTarget = { siteId: undefined, channelId: c.req.query('channel') };
    try {
      const query = readQuery(c, trackInviteQuerySchema);
      const site = await siteFor(query.website);
      target.siteId = site.id;
      admit(c, site);
      const browser = c.get('browser');
      if (isLinkLookup(c.req.method, userAgentOf(browser, undefined))) return linkLookupAnswer(c);
      await limiter.consume('invite', site.id, browser.ip);
      const outcome = await inviteClick(deps, {
        siteId: site.id,
        ...clickIds(query.tid, query.sid, query.consent),
        channelId: query.channel,
        click: clickAttribution(c.req.header('referer'), browser, clickConsent(query.consent, site)),
      });
      // tracker.js asks for the link as JSON, so that it can send the visitor to the link's own
      // href instead whenever Capigram answers anything else, or not in time.
      if (query.format === 'json') return c.json({ visitId: outcome.visitId, inviteUrl: outcome.inviteLink });
      return redirect(c, outcome.inviteLink);
    } catch (err) {
      if (!isBrowserNavigation(c)) throw err;
      return navigationFallback(c, err, target, deps);
    }
  });

  // An entry click: like an invite click, but to a bot (or its Mini App) with a fresh payload.
  keyless.get('/backend/track/entry', async (c) => {
    let siteId: string | undefined;
    try {
      const query = readQuery(c, trackEntryQuerySchema);
      const site = await siteFor(query.website);
      siteId = site.id;
      admit(c, site);
      const browser = c.get('browser');
      if (isLinkLookup(c.req.method, userAgentOf(browser, undefined))) return linkLookupAnswer(c);
      await limiter.consume('invite', site.id, browser.ip);
      const outcome = await entryClick(deps, {
        siteId: site.id,
        ...clickIds(query.tid, query.sid, query.consent),
        entryId: query.entry,
        click: clickAttribution(c.req.header('referer'), browser, clickConsent(query.consent, site)),
      });
      if (query.format === 'json') return c.json({ visitId: outcome.visitId, url: outcome.url });
      return redirect(c, outcome.url);
    } catch (err) {
      return entryNavigationFallback(c, err, siteId, c.req.query('entry'));
    }
  });

  // Registered before `/r/:siteId/:channelId`'s neighbours; three segments, so never confused with it.
  keyless.get('/r/:siteId/entry/:entryId', async (c) => {
    let siteId: string | undefined;
    try {
      const click = await adClick(
        c,
        c.req.param('siteId'),
        `entry:${c.req.param('entryId')}`,
        (id) => (siteId = id),
      );
      if (click instanceof Response) return click;
      const outcome = await entryRedirect(deps, { ...click.visit, entryId: c.req.param('entryId') });
      click.setCookies();
      return redirect(c, outcome.url);
    } catch (err) {
      return entryNavigationFallback(c, err, siteId, c.req.param('entryId'));
    }
  });

  /**
   * A browser that followed an entry link is sent on to the bot itself (unattributed) when the
   * click cannot be answered, as an invite click is sent to the channel: never an error page.
   * Only when the site and the entry are known; anything else, and any non-navigation, gets the
   * error.
   */
  async function entryNavigationFallback(
    c: Context<KeylessEnv>,
    err: unknown,
    siteId: string | undefined,
    entryId: string | undefined,
  ): Promise<Response> {
    if (!isBrowserNavigation(c) || siteId === undefined) throw err;
    const url = await entryFallbackUrl(deps.pool, siteId, entryId);
    if (url === null) throw err;
    deps.log.info(
      { siteId, err: err instanceof ApiError ? err.code : String(err) },
      'entry click answered with the bot itself',
    );
    return redirect(c, url);
  }

  keyless.post('/backend/track/app', async (c) => {
    const origin = c.req.header('origin');
    if (origin !== undefined) c.set('corsOrigin', origin);
    const body = await readJson(c, trackAppBodySchema);
    const { attributed } = await appOpened(deps, body.initData);
    return c.json({ attributed });
  });

  keyless.post('/backend/track/direct-invite', async (c) => {
    const body = await readJson(c, trackDirectInviteBodySchema);
    // One visit per visitRequestId is the point of this endpoint: one of the two names is required.
    const visitRequestId = requestIdOf(body);
    if (visitRequestId === undefined)
      throw new ApiError('VALIDATION_FAILED', 'body: visitRequestId: required');
    const site = await siteFor(body.websiteId);
    admit(c, site);
    await limiter.consume('invite', site.id, c.get('browser').ip);
    const outcome = await directInvite(deps, {
      siteId: site.id,
      tempId: body.tempId,
      sessionId: body.sessionId,
      visitRequestId,
      channelId: body.channelId,
      kind: 'direct_invite',
      attribution: attributionOf(c, body, isConsented(body.consent, site.consentMode)),
    });
    return c.json({ visitId: outcome.visitId, inviteUrl: outcome.inviteLink });
  });

  keyless.get('/r/:siteId/:channelId', async (c) => {
    const channelParam = c.req.param('channelId');
    const target: FallbackTarget = { siteId: undefined, channelId: channelParam };
    try {
      return await redirectClickRoute(
        c,
        c.req.param('siteId'),
        channelParam,
        (siteId) => (target.siteId = siteId),
      );
    } catch (err) {
      if (!isBrowserNavigation(c)) throw err;
      return navigationFallback(c, err, target, deps);
    }
  });

  /** `/r/{siteId}/{channelId}`; tells `siteFound` the site as soon as it is known (for the fallback). */
  async function redirectClickRoute(
    c: Context<KeylessEnv>,
    siteParam: string,
    channelParam: string,
    siteFound: (siteId: string) => void,
  ): Promise<Response> {
    const click = await adClick(c, siteParam, channelParam, siteFound);
    if (click instanceof Response) return click;
    const outcome = await directInvite(deps, { ...click.visit, channelId: channelParam, kind: 'redirect' });
    click.setCookies();
    return redirect(c, outcome.inviteLink);
  }

  /**
   * What an ad click straight to Telegram (`/r/…`) learns before it is handed a link: the site, the
   * browser's ids (Capigram's cookies, else new ones), the click ids and UTM tags of the URL, and
   * the visitRequestId that makes a reload the same visit. A link lookup is answered at once.
   * `target` names what the click is for (a channel id, `entry:<id>`), part of that request id.
   */
  async function adClick(
    c: Context<KeylessEnv>,
    siteParam: string,
    target: string,
    siteFound: (siteId: string) => void = () => undefined,
  ) {
    const site =
      siteParam.length <= WIRE_LIMITS.websiteId && !hasNul(siteParam)
        ? await sites.byIdOrWebsiteId(siteParam)
        : null;
    if (site === null) throw new ApiError('UNKNOWN_WEBSITE', 'this link names no known site');
    siteFound(site.id);
    vouched(c, site);
    const browser = c.get('browser');
    if (isLinkLookup(c.req.method, userAgentOf(browser, undefined))) return linkLookupAnswer(c);
    await limiter.consume('invite', site.id, browser.ip);

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
      const scope = { secure: secureCookies };
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
    return { visit, setCookies };
  }

  registerTrackerScriptRoute(keyless);
  return keyless;
}

/**
 * The answer to a look at a click link (`isLinkLookup`): a small page, nothing recorded and no
 * invite link spent. Not a redirect: the Location would have to be an invite link, and handing
 * one out is exactly what a look must not do.
 */
function linkLookupAnswer(c: Context<KeylessEnv>): Response {
  c.header('cache-control', 'no-store');
  c.header('x-robots-tag', 'noindex');
  return c.html(
    '<!doctype html><meta charset="utf-8"><meta name="robots" content="noindex"><title>Telegram</title><p>This link opens a Telegram channel.</p>',
  );
}

function redirect(c: Context<KeylessEnv>, location: string): Response {
  c.header('referrer-policy', 'no-referrer');
  return c.redirect(location, 302);
}

/**
 * The ids a click is looked up by: its browser's and session's, or, for a click that says it has
 * no consent, fresh ones (the cookies' values are not used), so it gets a visit of its own.
 */
function clickIds(
  tid: string,
  sid: string,
  consent: Consent | undefined,
): { tempId: string; sessionId: string } {
  return consent === 'denied'
    ? { tempId: crypto.randomUUID(), sessionId: crypto.randomUUID() }
    : { tempId: tid, sessionId: sid };
}

/**
 * The consent of the visit a click records when no visit of its browser is found: what the click
 * says, else the site's mode. A visit that is found keeps the consent it was recorded with.
 */
function clickConsent(consent: Consent | undefined, site: { consentMode: 'implied' | 'required' }): boolean {
  return isConsented(consent, site.consentMode);
}

/** What a click (invite or entry) tells of its visitor: the page it came from, its IP and User-Agent. */
function clickAttribution(
  referer: string | undefined,
  browser: KeylessEnv['Variables']['browser'],
  consented: boolean,
): VisitAttribution {
  return {
    consented,
    href: referer === undefined || referer.length > WIRE_LIMITS.url ? undefined : referer,
    clientIp: browser.ip,
    userAgent: userAgentOf(browser, undefined),
  };
}
