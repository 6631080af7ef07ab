import type { Context } from 'hono';
import { resolveVisitRequestId, type AttributionFields } from '../../../shared/tracker-wire.js';
import type { Deps } from '../../deps.js';
import { createForwarderKeys } from '../../domain/tracker/forwarders.js';
import { createInstallSignals } from '../../domain/tracker/install-signals.js';
import { createSiteDirectory, type TrackerSite } from '../../domain/tracker/sites.js';
import type { VisitAttribution } from '../../domain/tracker/visits.js';
import { createRateLimiter, rateLimitSettings } from '../../domain/rate-limits.js';
import { ApiError } from '../../errors.js';
import { userAgentOf } from './browser-context.js';
import { checkDomains } from './domains.js';
import type { KeylessEnv } from './env.js';

/**
 * What every route of the keyless tracker surface shares: the site directory, the rate limiter,
 * the install signals, and the checks each request passes (the site known, a forwarder key for
 * that site only, its domains). Made once per app by `trackerRoutes`.
 */
export interface TrackerSurface {
  deps: Deps;
  sites: ReturnType<typeof createSiteDirectory>;
  limiter: ReturnType<typeof createRateLimiter>;
  forwarders: ReturnType<typeof createForwarderKeys>;
  install: ReturnType<typeof createInstallSignals>;
  secureCookies: boolean;
  siteFor(websiteId: string): Promise<TrackerSite>;
  vouched(c: Context<KeylessEnv>, site: TrackerSite): void;
  admit(c: Context<KeylessEnv>, site: TrackerSite, href?: string): void;
  requestIdOf(body: {
    visitRequestId?: string | undefined;
    gatewayRequestId?: string | undefined;
  }): string | undefined;
  attributionOf(c: Context<KeylessEnv>, body: AttributionFields, consented: boolean): VisitAttribution;
}

export function createTrackerSurface(deps: Deps): TrackerSurface {
  const sites = createSiteDirectory(deps.pool);
  // Install checks (first/last visit, refused hosts): recorded off the hot path, see install-signals.ts.
  const install = createInstallSignals(deps.pool, deps.log);

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

  return {
    deps,
    sites,
    limiter: createRateLimiter(deps.pool, rateLimitSettings(deps.config)),
    forwarders: createForwarderKeys(deps.pool),
    install,
    secureCookies: deps.config.PUBLIC_URL.startsWith('https:'),
    siteFor,
    vouched,
    admit,
    requestIdOf,
    attributionOf,
  };
}
