import type { Hono } from 'hono';
import { dashboardOverview } from '../../domain/dashboard/read-model.js';
import { seesSite } from '../../domain/admin/roles.js';
import { viewSession } from './auth.js';
import type { DashEnv } from './env.js';
import type { DashboardSurface } from './surface.js';
import { overviewPage } from './views.js';

const OVERVIEW_HOURS = 24;

/** `GET /dashboard`: every site at a glance over the last day. */
export function registerOverview(app: Hono<DashEnv>, s: DashboardSurface): void {
  app.get('/dashboard', s.signedIn, async (c) => {
    const since = new Date(s.nowMs() - OVERVIEW_HOURS * 3600_000);
    return c.html(
      overviewPage(
        (await dashboardOverview(s.deps.pool, since, s.deps.now())).filter((site) =>
          seesSite(c.get('actor'), { id: site.siteId, accountId: site.accountId }),
        ),
        OVERVIEW_HOURS,
        viewSession(c),
      ),
    );
  });
}
