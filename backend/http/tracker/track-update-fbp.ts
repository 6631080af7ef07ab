import type { Hono } from 'hono';
import { trackUpdateFbpBodySchema } from '../../../shared/tracker-wire.js';
import { patchLatestVisitFbp } from '../../domain/tracker/fbp.js';
import { readJson } from '../json.js';
import type { KeylessEnv } from './env.js';
import type { TrackerSurface } from './surface.js';

/** `POST /backend/track/update-fbp`: Meta's `_fbp` cookie, set after the visit was recorded. */
export function registerTrackUpdateFbp(keyless: Hono<KeylessEnv>, s: TrackerSurface): void {
  keyless.post('/backend/track/update-fbp', async (c) => {
    const body = await readJson(c, trackUpdateFbpBodySchema);
    const site = await s.siteFor(body.websiteId);
    s.admit(c, site);
    await s.limiter.consume('fbp', site.id, c.get('browser').ip);
    return c.json({
      updated: await patchLatestVisitFbp(s.deps.pool, {
        siteId: site.id,
        tempId: body.tempId,
        fbp: body.fbp,
      }),
    });
  });
}
