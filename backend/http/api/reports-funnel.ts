import { createRoute, z } from '@hono/zod-openapi';
import { reportsDb, type Deps } from '../../deps.js';
import { GROUP_BYS, funnelReport } from '../../domain/reports/funnel.js';
import { reportChannel, reportRange, reportSite } from '../../domain/reports/range.js';
import {
  COMMON_ERRORS,
  IdempotencyHeaders,
  SECURITY,
  SiteQuery,
  keyed,
  orNull,
  problems,
  text,
  type ApiApp,
  type ApiDeps,
} from './common.js';

export const RangeQuery = SiteQuery.extend({
  from: z.string().max(10).optional().openapi({
    description: 'first UTC day, YYYY-MM-DD (default: 29 days before `to`)',
    example: '2026-11-01',
  }),
  to: z
    .string()
    .max(10)
    .optional()
    .openapi({ description: 'last UTC day, YYYY-MM-DD, inclusive (default: today)', example: '2026-11-30' }),
});

const Counts = {
  visits: z.number().int(),
  inviteClicks: z.number().int().openapi({ description: 'invite links handed to visits' }),
  clickedVisits: z.number().int().nullable().openapi({
    description:
      "the range's visits that took an invite link (the click rate is this over `visits`); null in the rows by platform",
  }),
  joinedVisits: z.number().int().nullable().openapi({
    description:
      'of `clickedVisits`, those an attributed join was traced to (the join rate is this over `clickedVisits`)',
  }),
  joins: z.number().int(),
  attributedJoins: z.number().int().openapi({ description: 'joins traced to a visit' }),
  organicJoins: z.number().int(),
  leaves: z.number().int().openapi({ description: 'leaves in the range' }),
  retained: z.number().int().openapi({ description: 'joins in the range still members at its end' }),
  conversions: z.number().int(),
  value: z.record(z.string(), z.number()).openapi({
    description: 'summed per currency, never across currencies',
    example: { EUR: 120.5, USD: 40 },
  }),
};

const FunnelTotals = z.object(Counts).openapi('FunnelTotals');
const FunnelRow = z
  .object({
    key: z.string().nullable().openapi({
      description:
        'the day (YYYY-MM-DD), utm value, channel id or platform (meta, tiktok, google, snapchat, none); null: the visits had none',
    }),
    ...Counts,
  })
  .openapi('FunnelRow');
const Funnel = z
  .object({
    from: z.string(),
    to: z.string(),
    groupBy: z.enum(GROUP_BYS),
    channelId: z.string().nullable(),
    rows: z.array(FunnelRow),
    totals: FunnelTotals,
  })
  .openapi('Funnel');

/** `GET /api/v1/reports/funnel`: the site's funnel for a range of days, grouped. */
export function registerFunnelReport(api: ApiApp, deps: ApiDeps & Pick<Deps, 'reportsPool'>): void {
  const route = createRoute({
    method: 'get',
    path: '/reports/funnel',
    operationId: 'funnelReport',
    tags: ['Reports'],
    summary: 'Visits, invite clicks, joins, leaves, conversions and value for a range of days',
    description:
      'Days are UTC. Grouped by day (every day of the range, zeros included), `utm_source`, `utm_campaign`, channel, or ad platform (by the click id on the visit). A join counts for the campaign of the visit it was traced to; organic joins have none. Value is summed per currency.',
    security: SECURITY,
    middleware: keyed(deps),
    request: {
      query: RangeQuery.extend({
        groupBy: z.enum(GROUP_BYS).optional().openapi({ description: 'default: day' }),
        channelId: text(100).optional().openapi({
          description:
            'only this channel of the site: the visits sent to it, its invite clicks, joins, leaves and conversions',
        }),
      }),
      headers: IdempotencyHeaders,
    },
    responses: {
      200: { description: 'The funnel', content: { 'application/json': { schema: Funnel } } },
      ...problems(...COMMON_ERRORS, 'SITE_REQUIRED', 'FORBIDDEN', 'UNKNOWN_WEBSITE'),
    },
  });

  api.openapi(route, async (c) => {
    const q = c.req.valid('query');
    const siteId = await reportSite(deps.pool, c.get('caller'), {
      siteId: orNull(q.siteId),
      websiteId: orNull(q.websiteId),
    });
    const range = reportRange({ from: orNull(q.from), to: orNull(q.to) }, deps.now());
    const channelId = await reportChannel(deps.pool, siteId, orNull(q.channelId));
    return c.json(
      await funnelReport(reportsDb(deps), { siteId, ...range, groupBy: q.groupBy ?? 'day', channelId }),
      200,
    );
  });
}
