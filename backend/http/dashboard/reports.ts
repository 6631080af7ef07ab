import type { Context, Hono, MiddlewareHandler } from 'hono';
import { reportsDb, type Deps } from '../../deps.js';
import { channelTitles } from '../../domain/admin/channels.js';
import type { SiteRow } from '../../domain/admin/sites.js';
import { attributionCoverage } from '../../domain/reports/coverage.js';
import { GROUP_BYS, funnelReport, type GroupBy } from '../../domain/reports/funnel.js';
import { matchQualityReport } from '../../domain/reports/match-quality.js';
import { pixelHealth, spendSourceHealth } from '../../domain/reports/pixel-health.js';
import {
  previousRange,
  rangePresets,
  reportChannel,
  reportRange,
  utcDay,
} from '../../domain/reports/range.js';
import { campaignRetention } from '../../domain/reports/retention.js';
import { ApiError } from '../../errors.js';
import { DASHBOARD_ASSETS } from './assets.js';
import type { DashEnv } from './env.js';
import { funnelCsv, reportsPage } from './report-views.js';
import { notFoundPage, STYLE_HASH } from './views.js';

/**
 * The Reports page of a site (`/dashboard/sites/{site}/reports`), its CSV and its scripts. The
 * only dashboard page with a script: its policy adds `script-src 'self'` (files served below,
 * no inline script) to the dashboard's.
 */
const REPORTS_CSP = `default-src 'none'; script-src 'self'; style-src '${STYLE_HASH}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`;

export function registerDashboardReports(
  app: Hono<DashEnv>,
  deps: Pick<Deps, 'pool' | 'reportsPool' | 'now'>,
  signedIn: MiddlewareHandler<DashEnv>,
  siteOf: (c: Context<DashEnv>) => Promise<SiteRow | Response>,
): void {
  // Public like any script file: nothing in them is the operator's.
  app.get('/dashboard/assets/:file', (c) => {
    const source = DASHBOARD_ASSETS[c.req.param('file')];
    if (!source) return c.notFound();
    c.header('content-type', 'text/javascript; charset=utf-8');
    return c.body(source());
  });

  /** The range and grouping a request asks for, or the 400 page saying what is wrong. */
  const params = async (
    c: Context<DashEnv>,
    siteId: string,
  ): Promise<{ from: string; to: string; groupBy: GroupBy; channelId: string | null } | Response> => {
    const groupBy = (c.req.query('groupBy') ?? 'day') as GroupBy;
    try {
      if (!GROUP_BYS.includes(groupBy))
        throw new ApiError('VALIDATION_FAILED', `group by one of ${GROUP_BYS.join(', ')}`);
      const channelId = await reportChannel(
        deps.pool,
        siteId,
        c.req.query('channelId')?.slice(0, 100) || null,
      );
      return {
        ...reportRange({ from: c.req.query('from') || null, to: c.req.query('to') || null }, deps.now()),
        groupBy,
        channelId,
      };
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      return c.html(
        notFoundPage(`That is not a range of days the reports can show: ${err.detail ?? err.message}.`, {
          formToken: c.get('formToken'),
        }),
        400,
      );
    }
  };

  app.get('/dashboard/sites/:site/reports', signedIn, async (c) => {
    const site = await siteOf(c);
    if (site instanceof Response) return site;
    const p = await params(c, site.id);
    if (p instanceof Response) return p;
    const q = { siteId: site.id, from: p.from, to: p.to };
    const now = deps.now();
    const funnel = await funnelReport(reportsDb(deps), { ...q, groupBy: p.groupBy, channelId: p.channelId });
    const byDay =
      p.groupBy === 'day'
        ? funnel
        : await funnelReport(reportsDb(deps), { ...q, groupBy: 'day', channelId: p.channelId });
    // The period before, as long as this one: its totals beside this one's (read from the roll-up).
    const before = previousRange(p);
    const previous =
      before === null
        ? null
        : await funnelReport(reportsDb(deps), {
            siteId: site.id,
            ...before,
            groupBy: 'day',
            channelId: p.channelId,
          });
    const page = reportsPage(
      {
        site: { id: site.id, name: site.name },
        groupBy: p.groupBy,
        funnel,
        byDay,
        previous:
          previous === null ? null : { from: previous.from, to: previous.to, totals: previous.totals },
        presets: rangePresets(now),
        retention: await campaignRetention(reportsDb(deps), {
          ...q,
          // biome-ignore lint/complexity/useMathMinMax: YYYY-MM-DD strings (they compare as dates), not numbers
          today: utcDay(now) > p.to ? utcDay(now) : p.to,
        }),
        matchQuality: await matchQualityReport(reportsDb(deps), q),
        coverage: await attributionCoverage(reportsDb(deps), q),
        pixels: await pixelHealth(reportsDb(deps), site.id, now),
        spendSources: await spendSourceHealth(reportsDb(deps), site.id),
        channelTitles: await channelTitles(deps.pool, site.id),
        now,
      },
      { formToken: c.get('formToken') },
    );
    c.header('content-security-policy', REPORTS_CSP);
    return c.html(page);
  });

  app.get('/dashboard/sites/:site/reports.csv', signedIn, async (c) => {
    const site = await siteOf(c);
    if (site instanceof Response) return site;
    const p = await params(c, site.id);
    if (p instanceof Response) return p;
    const funnel = await funnelReport(reportsDb(deps), {
      siteId: site.id,
      from: p.from,
      to: p.to,
      groupBy: p.groupBy,
      channelId: p.channelId,
    });
    c.header('content-type', 'text/csv; charset=utf-8');
    c.header(
      'content-disposition',
      `attachment; filename="funnel-${site.website_id}-${p.from}-${p.to}-${p.groupBy}.csv"`,
    );
    return c.body(funnelCsv(funnel, p.groupBy, await channelTitles(deps.pool, site.id)));
  });
}
