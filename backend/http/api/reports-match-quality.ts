import { createRoute, z } from '@hono/zod-openapi';
import { reportsDb, type Deps } from '../../deps.js';
import { attributionCoverage } from '../../domain/reports/coverage.js';
import { SIGNALS, matchQualityReport } from '../../domain/reports/match-quality.js';
import { reportRange, reportSite } from '../../domain/reports/range.js';
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

const Shares = z.object(
  Object.fromEntries(SIGNALS.map((s) => [s, z.number()])) as Record<(typeof SIGNALS)[number], z.ZodNumber>,
);
const MatchRow = z
  .object({
    platform: z.enum(['meta', 'tiktok', 'google', 'snapchat']),
    eventType: z.string().openapi({ description: 'an event type, or PageView' }),
    sent: z.number().int().openapi({ description: 'events delivered in the range' }),
    shares: Shares.openapi({
      description:
        'share (0 to 1) of the delivered events carrying each signal; clickId is the platform’s own (fbc, ttclid, gclid/gbraid/wbraid, ScCid)',
    }),
    advice: z.array(z.string()).openapi({ description: 'what to fix, one sentence per weak signal' }),
  })
  .openapi('MatchQualityRow');
const Coverage = z
  .object({
    channelId: z.string(),
    title: z.string(),
    isPublic: z.boolean().nullable(),
    attributedJoins: z.number().int(),
    organicJoins: z.number().int(),
    share: z
      .number()
      .nullable()
      .openapi({ description: 'attributed share of the joins; null without joins' }),
    warning: z.string().optional(),
  })
  .openapi('AttributionCoverage');

/** `GET /api/v1/reports/match-quality`: the signals the site's delivered events carried. */
export function registerMatchQualityReport(api: ApiApp, deps: ApiDeps & Pick<Deps, 'reportsPool'>): void {
  const route = createRoute({
    method: 'get',
    path: '/reports/match-quality',
    operationId: 'matchQualityReport',
    tags: ['Reports'],
    summary:
      'Match signals of delivered events, per platform and event type, and attribution coverage per channel',
    security: SECURITY,
    middleware: keyed(deps),
    request: { query: RangeQuery, headers: IdempotencyHeaders },
    responses: {
      200: {
        description: 'Match quality',
        content: {
          'application/json': {
            schema: z
              .object({
                from: z.string(),
                to: z.string(),
                rows: z.array(MatchRow),
                coverage: z.array(Coverage),
              })
              .openapi('MatchQuality'),
          },
        },
      },
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
    const [rows, coverage] = [
      await matchQualityReport(reportsDb(deps), { siteId, ...range }),
      await attributionCoverage(reportsDb(deps), { siteId, ...range }),
    ];
    return c.json({ ...range, rows: rows as z.infer<typeof MatchRow>[], coverage }, 200);
  });
}
