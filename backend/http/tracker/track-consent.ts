import type { Hono } from 'hono';
import { trackConsentQuerySchema } from '../../../shared/tracker-wire.js';
import { readQuery } from '../json.js';
import type { KeylessEnv } from './env.js';
import type { TrackerSurface } from './surface.js';

/**
 * `GET /backend/track/consent`: the site's consent mode, for a server-side client (the proxy) that
 * decides by it whether a visitor without a consent cookie may be given Capigram's cookies.
 * Public: it is no secret.
 */
export function registerTrackConsent(keyless: Hono<KeylessEnv>, s: TrackerSurface): void {
  keyless.get('/backend/track/consent', async (c) => {
    const query = readQuery(c, trackConsentQuerySchema);
    const site = await s.siteFor(query.website);
    s.vouched(c, site);
    return c.json({ consentMode: site.consentMode });
  });
}
