import { Readable } from 'node:stream';
import { createRoute, z } from '@hono/zod-openapi';
import { reportsDb, type Deps } from '../../deps.js';
import { EXPORT_KINDS } from '../../domain/exports/kinds.js';
import { CONTENT_TYPES, openExport } from '../../domain/exports/stream.js';
import { reportRange, reportSite } from '../../domain/reports/range.js';
import { apiAuth } from './auth.js';
import { COMMON_ERRORS, SECURITY, orNull, problems, type ApiApp, type ApiDeps } from './common.js';
import { RangeQuery } from './reports-funnel.js';

/**
 * `GET /api/v1/exports/{kind}`: a site's raw visits, joins (and leaves) or conversions for a range
 * of UTC days, streamed as CSV or NDJSON. No Idempotency-Key: a read that is streamed is not
 * stored to be replayed.
 */
export function registerExports(api: ApiApp, deps: ApiDeps & Pick<Deps, 'reportsPool'>): void {
  const route = createRoute({
    method: 'get',
    path: '/exports/{kind}',
    operationId: 'exportRows',
    tags: ['Exports'],
    summary: 'Raw visits, joins or conversions of a site, streamed as CSV or NDJSON',
    description:
      "Rows in time order for the UTC days `from`–`to` (default the last 30). CSV has a header line, RFC 4180 quoting, CRLF line ends, and text cells that a spreadsheet would read as a formula (starting with =, +, -, @) written after a `'`. Raw IPs, User-Agents and click ids are never exported; erased people stay erased (no Telegram id, no visit id). See docs/exports.md for the columns.",
    security: SECURITY,
    middleware: [apiAuth(deps)],
    request: {
      params: z.object({
        kind: z.enum(EXPORT_KINDS).openapi({ param: { name: 'kind', in: 'path' }, example: 'visits' }),
      }),
      query: RangeQuery.extend({
        format: z.enum(['csv', 'ndjson']).optional().openapi({ description: 'default: csv' }),
      }),
    },
    responses: {
      200: {
        description: 'The rows, streamed',
        content: {
          'text/csv': { schema: z.string() },
          'application/x-ndjson': { schema: z.string() },
        },
      },
      ...problems(
        ...COMMON_ERRORS.filter((c) => !c.startsWith('IDEMPOTENCY')),
        'SITE_REQUIRED',
        'FORBIDDEN',
        'UNKNOWN_WEBSITE',
      ),
    },
  });

  api.openapi(route, async (c) => {
    const { kind } = c.req.valid('param');
    const q = c.req.valid('query');
    const siteId = await reportSite(deps.pool, c.get('caller'), {
      siteId: orNull(q.siteId),
      websiteId: orNull(q.websiteId),
    });
    const range = reportRange({ from: orNull(q.from), to: orNull(q.to) }, deps.now());
    const format = q.format ?? 'csv';
    const rows = await openExport(reportsDb(deps), { siteId, kind, ...range, format });
    return new Response(Readable.toWeb(rows) as ReadableStream, {
      status: 200,
      headers: {
        'content-type': CONTENT_TYPES[format],
        'content-disposition': `attachment; filename="capigram-${kind}-${range.from}-${range.to}.${format === 'csv' ? 'csv' : 'ndjson'}"`,
        'cache-control': 'no-store',
      },
    }) as never;
  });
}
