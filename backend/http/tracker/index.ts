import { Hono } from 'hono';
import { parseTrustedProxies } from '../../../shared/client-ip.js';
import type { Deps } from '../../deps.js';
import { clientContext } from './browser-context.js';
import { corsResponses, preflight } from './cors.js';
import type { KeylessEnv } from './env.js';
import { registerRedirectChannel } from './redirect-channel.js';
import { registerRedirectEntry } from './redirect-entry.js';
import { registerTrackerScriptRoute } from './script.js';
import { createTrackerSurface } from './surface.js';
import { registerTrackApp } from './track-app.js';
import { registerTrackConsent } from './track-consent.js';
import { registerTrackDirectInvite } from './track-direct-invite.js';
import { registerTrackEntry } from './track-entry.js';
import { registerTrackInit } from './track-init.js';
import { registerTrackInvite } from './track-invite.js';
import { registerTrackUpdateFbp } from './track-update-fbp.js';

/**
 * The keyless tracker surface (spec: keyless tracker endpoints; CONTRACT.md: URLs, domain
 * validation, responses), one file per route: `track/init`, `track/update-fbp`, `track/invite`,
 * `track/direct-invite`, `/r/{siteId}/{channelId}` and the browser script. No API key: the public
 * websiteId names the site, and every request is domain-validated (except `/r/`, opened straight
 * from an ad) and rate-limited per (site, browser IP).
 */
export function trackerRoutes(deps: Deps): Hono<KeylessEnv> {
  const trust = parseTrustedProxies(deps.config.TRUSTED_PROXIES);
  const surface = createTrackerSurface(deps);
  const keyless = new Hono<KeylessEnv>();

  keyless.use(
    '/backend/track/*',
    corsResponses(),
    clientContext(trust, surface.forwarders),
    async (c, next) => {
      await next();
      // Answers are per visitor: never cached by the browser or anything in between.
      c.res.headers.set('cache-control', 'no-store');
    },
  );
  keyless.use('/r/*', clientContext(trust, surface.forwarders));
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

  registerTrackInit(keyless, surface);
  registerTrackUpdateFbp(keyless, surface);
  registerTrackConsent(keyless, surface);
  registerTrackInvite(keyless, surface);
  registerTrackEntry(keyless, surface);
  registerRedirectEntry(keyless, surface);
  registerTrackApp(keyless, surface);
  registerTrackDirectInvite(keyless, surface);
  registerRedirectChannel(keyless, surface);
  registerTrackerScriptRoute(keyless);
  return keyless;
}
