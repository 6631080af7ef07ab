import type { Hono } from 'hono';
import { retryFailedSends } from '../../delivery/admin.js';
import type { DashEnv } from './env.js';
import type { DashboardSurface } from './surface.js';

/** `POST /dashboard/sites/{site}/sends/retry-failed`: every failed send of the site queued again. */
export function registerSendsRetryFailed(app: Hono<DashEnv>, s: DashboardSurface): void {
  app.post('/dashboard/sites/:site/sends/retry-failed', s.signedIn, async (c) => {
    const site = await s.siteOf(c);
    if (site instanceof Response) return site;
    const { retried, more } = await retryFailedSends(s.deps.pool, site.id);
    s.deps.log.info(
      { requestId: c.get('requestId'), siteId: site.id, retried, more },
      'dashboard: failed sends retried',
    );
    return c.redirect(`/dashboard/sites/${site.id}?notice=failed-retried`, 303);
  });
}
