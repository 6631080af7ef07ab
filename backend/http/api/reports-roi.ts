import { createRoute, z } from '@hono/zod-openapi';
import { reportsDb, type Deps } from '../../deps.js';
import { reportRange, reportSite, utcDay } from '../../domain/reports/range.js';
import { ROI_GROUP_BYS, roiReport } from '../../domain/reports/roi.js';
import {
  COMMON_ERRORS,
  IdempotencyHeaders,
  SECURITY,
  keyed,
  orNull,
  problems,
  type ApiApp,
  type ApiDeps,
} from './common.js';
import { RangeQuery } from './reports-funnel.js';

const Money = z.record(z.string(), z.number()).openapi({
  description: 'per currency (ISO 4217), never summed across currencies',
  example: { EUR: 120.5 },
});

const Figures = {
  spend: Money,
  clicks: z.number().int().openapi({ description: "the platforms' reported clicks" }),
  visits: z.number().int(),
  joins: z.number().int(),
  retained: z.object({ d7: z.number().int().nullable(), d30: z.number().int().nullable() }).openapi({
    description:
      'joins still members 7 and 30 days after joining, of the days old enough; null: no day of the range is that old yet',
  }),
  conversions: z.number().int(),
  value: Money,
  costPerJoin: Money,
  costPerRetained: z
    .object({ d7: Money, d30: Money })
    .openapi({ description: 'the spend of the days old enough per retained join, in each currency' }),
  roas: z.number().nullable().openapi({
    description: 'value / spend, only when both are in one and the same currency; otherwise null',
  }),
};

const RoiTotals = z.object(Figures).openapi('RoiTotals');
const RoiRow = z
  .object({
    key: z.string().nullable().openapi({
      description: 'the campaign id, the day (YYYY-MM-DD) or the platform; null: what belongs to no campaign',
    }),
    platform: z.string().nullable(),
    campaignId: z.string().nullable(),
    campaignName: z.string().nullable(),
    ...Figures,
  })
  .openapi('RoiRow');
const RoiWarning = z
  .object({
    kind: z.enum(['spend_without_visits', 'visits_without_spend']),
    campaignId: z.string(),
    platform: z.string().nullable(),
    campaignName: z.string().nullable().optional(),
    spend: Money.optional(),
    visits: z.number().int().optional(),
  })
  .openapi('RoiWarning');
const Roi = z
  .object({
    from: z.string(),
    to: z.string(),
    groupBy: z.enum(ROI_GROUP_BYS),
    rows: z.array(RoiRow),
    totals: RoiTotals,
    warnings: z.array(RoiWarning),
  })
  .openapi('RoiReport');

/** `GET /api/v1/reports/roi`: the site's ad spend beside its joins, retention and value. */
export function registerRoiReport(api: ApiApp, deps: ApiDeps & Pick<Deps, 'reportsPool'>): void {
  const route = createRoute({
    method: 'get',
    path: '/reports/roi',
    operationId: 'roiReport',
    tags: ['Reports'],
    summary: 'Spend, clicks, visits, joins, retained joins, conversions, value, cost per join and ROAS',
    description:
      "Spend and clicks are the platforms' own, by the ad account's day; visits, joins and conversions by UTC day. A visit belongs to a campaign by `utm_id`, else the platform's campaign parameter in its landing URL, else the campaign (with spend in the range) whose name equals its `utm_campaign`. Grouped by campaign (what belongs to no campaign in a row with key null), day (every day of the range) or platform. Money stays per currency; `roas` only where spend and value share one currency. `warnings` lists campaigns with spend and no visits, and campaign keys with visits and no spend.",
    security: SECURITY,
    middleware: keyed(deps),
    request: {
      query: RangeQuery.extend({
        groupBy: z.enum(ROI_GROUP_BYS).optional().openapi({ description: 'default: campaign' }),
      }),
      headers: IdempotencyHeaders,
    },
    responses: {
      200: { description: 'The ROI report', content: { 'application/json': { schema: Roi } } },
      ...problems(...COMMON_ERRORS, 'SITE_REQUIRED', 'FORBIDDEN', 'UNKNOWN_WEBSITE'),
    },
  });

  api.openapi(route, async (c) => {
    const q = c.req.valid('query');
    const siteId = await reportSite(deps.pool, c.get('caller'), {
      siteId: orNull(q.siteId),
      websiteId: orNull(q.websiteId),
    });
    const now = deps.now();
    const range = reportRange({ from: orNull(q.from), to: orNull(q.to) }, now);
    return c.json(
      await roiReport(reportsDb(deps), {
        siteId,
        ...range,
        groupBy: q.groupBy ?? 'campaign',
        today: utcDay(now),
      }),
      200,
    );
  });
}
