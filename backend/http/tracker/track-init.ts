import type { Hono } from 'hono';
import { trackInitBodySchema } from '../../../shared/tracker-wire.js';
import { isConsented } from '../../domain/tracker/consent.js';
import { recordVisitBatched } from '../../domain/tracker/visit-batch.js';
import { readJson } from '../json.js';
import type { KeylessEnv } from './env.js';
import type { TrackerSurface } from './surface.js';

/** `POST /backend/track/init`: a page view; answers the visit and its PageView's event id. */
export function registerTrackInit(keyless: Hono<KeylessEnv>, s: TrackerSurface): void {
  keyless.post('/backend/track/init', async (c) => {
    const body = await readJson(c, trackInitBodySchema);
    const visitRequestId = s.requestIdOf(body);
    const site = await s.siteFor(body.websiteId);
    s.admit(c, site, body.href);
    const consented = isConsented(body.consent, site.consentMode);
    // The rate-limit count is made by the statement that records the visit, and visits that
    // arrive together share a round trip and a commit (visit-batch.ts).
    const visit = await recordVisitBatched(
      s.deps,
      {
        siteId: site.id,
        tempId: body.tempId,
        sessionId: body.sessionId,
        visitRequestId,
        kind: 'pageview',
        attribution: s.attributionOf(c, body, consented),
      },
      s.limiter.visitAdmission('init', site.id, c.get('browser').ip),
    );
    s.install.visitSeen(site.id, s.deps.now());
    return c.json({ visitId: visit.visitId, pageViewEventId: visit.pageViewEventId });
  });
}
