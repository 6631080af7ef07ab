import type { Context, Hono, MiddlewareHandler } from 'hono';
import { reportsDb, type Deps } from '../../deps.js';
import type { SiteRow } from '../../domain/admin/sites.js';
import { reportRange, utcDay } from '../../domain/reports/range.js';
import { ROI_GROUP_BYS, roiReport, type RoiGroupBy } from '../../domain/reports/roi.js';
import { ApiError } from '../../errors.js';
import type { DashEnv } from './env.js';
import { roiPage } from './roi-views.js';
import { notFoundPage, STYLE_HASH } from './views.js';

/** Its scripts are files served by the dashboard (assets.ts), as on the Reports page. */
const ROI_CSP = `default-src 'none'; script-src 'self'; style-src '${STYLE_HASH}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`;

/** `/dashboard/sites/{site}/roi`: the ROI report of a site, with charts and warnings. */
export function registerDashboardRoi(
  app: Hono<DashEnv>,
  deps: Pick<Deps, 'pool' | 'reportsPool' | 'now'>,
  signedIn: MiddlewareHandler<DashEnv>,
  siteOf: (c: Context<DashEnv>) => Promise<SiteRow | Response>,
): void {
  app.get('/dashboard/sites/:site/roi', signedIn, async (c) => {
    const site = await siteOf(c);
    if (site instanceof Response) return site;
    const groupBy = (c.req.query('groupBy') ?? 'campaign') as RoiGroupBy;
    const now = deps.now();
    let range: { from: string; to: string };
    try {
      if (!ROI_GROUP_BYS.includes(groupBy))
        throw new ApiError('VALIDATION_FAILED', `group by one of ${ROI_GROUP_BYS.join(', ')}`);
      range = reportRange({ from: c.req.query('from') || null, to: c.req.query('to') || null }, now);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      return c.html(
        notFoundPage(`That is not a range of days the ROI report can show: ${err.detail ?? err.message}.`, {
          formToken: c.get('formToken'),
        }),
        400,
      );
    }
    const q = { siteId: site.id, ...range, today: utcDay(now) };
    const report = await roiReport(reportsDb(deps), { ...q, groupBy });
    const byDay = groupBy === 'day' ? report : await roiReport(reportsDb(deps), { ...q, groupBy: 'day' });
    c.header('content-security-policy', ROI_CSP);
    return c.html(
      roiPage({ site: { id: site.id, name: site.name }, report, byDay }, { formToken: c.get('formToken') }),
    );
  });
}
