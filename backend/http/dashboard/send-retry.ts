import type { Hono } from 'hono';
import { retrySend } from '../../delivery/admin.js';
import { sendOfSite } from '../../domain/dashboard/read-model.js';
import { ApiError } from '../../errors.js';
import type { DashEnv } from './env.js';
import { type DashboardSurface, isUuid } from './surface.js';

/** `POST /dashboard/sites/{site}/sends/{send}/retry`: one failed send queued again. */
export function registerSendRetry(app: Hono<DashEnv>, s: DashboardSurface): void {
  app.post('/dashboard/sites/:site/sends/:send/retry', s.signedIn, async (c) => {
    const sendId = c.req.param('send');
    const site = await s.siteOf(c);
    if (site instanceof Response) return site;
    if (!isUuid(sendId) || !(await sendOfSite(s.deps.pool, site.id, sendId))) {
      return s.renderSite(c, site.id, { error: "That send is not one of this site's." }, 404);
    }
    try {
      await retrySend(s.deps.pool, sendId);
    } catch (err) {
      if (err instanceof ApiError && err.code === 'VALIDATION_FAILED')
        return s.renderSite(c, site.id, { error: err.message }, 409);
      throw err;
    }
    s.deps.log.info({ requestId: c.get('requestId'), sendId }, 'dashboard: send retried');
    return c.redirect(`/dashboard/sites/${site.id}?notice=send-retried`, 303);
  });
}
