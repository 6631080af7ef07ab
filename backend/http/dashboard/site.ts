import type { Hono } from 'hono';
import type { DashEnv } from './env.js';
import type { DashboardSurface } from './surface.js';
import { NOTICES, type NoticeKey } from './views.js';

/** `GET /dashboard/sites/{site}`: one site's setup, failures and waiting values; `?notice=` after an action. */
export function registerSite(app: Hono<DashEnv>, s: DashboardSurface): void {
  app.get('/dashboard/sites/:site', s.signedIn, async (c) => {
    const notice = c.req.query('notice');
    return s.renderSite(c, c.req.param('site'), {
      notice: notice !== undefined && notice in NOTICES ? (notice as NoticeKey) : undefined,
    });
  });
}
