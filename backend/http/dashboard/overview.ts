import type { Hono } from 'hono';
import { dashboardOverview } from '../../domain/dashboard/read-model.js';
import type { DashEnv } from './env.js';
import type { DashboardSurface } from './surface.js';
import { overviewPage } from './views.js';

const OVERVIEW_HOURS = 24;

/** `GET /dashboard`: every site at a glance over the last day. */
export function registerOverview(app: Hono<DashEnv>, s: DashboardSurface): void {
  app.get('/dashboard', s.signedIn, async (c) => {
    const since = new Date(s.nowMs() - OVERVIEW_HOURS * 3600_000);
    return c.html(
      overviewPage(await dashboardOverview(s.deps.pool, since, s.deps.now()), OVERVIEW_HOURS, {
        formToken: c.get('formToken'),
      }),
    );
  });
}
