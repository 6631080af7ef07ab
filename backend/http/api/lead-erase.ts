import { createRoute, z } from '@hono/zod-openapi';
import { eraseLead } from '../../domain/erasure/erase-lead.js';
import { apiAuth } from './auth.js';
import {
  COMMON_ERRORS,
  SECURITY,
  SiteQuery,
  TelegramUserIdParam,
  orNull,
  problems,
  type ApiApp,
  type ApiDeps,
} from './common.js';

/**
 * `DELETE /api/v1/leads/{telegramUserId}`: erases the person on the resolved site (as the GET
 * resolves it). No Idempotency-Key: the erasure is idempotent by itself, a repeat answers 404.
 */
export function registerEraseLead(api: ApiApp, deps: ApiDeps): void {
  const route = createRoute({
    method: 'delete',
    path: '/leads/{telegramUserId}',
    operationId: 'eraseLead',
    tags: ['Leads'],
    summary: "Erase a person's data on the resolved site",
    description:
      "Erases, in one transaction, the lead's identifiers and PII digests, its visits' IP, User-Agent, URLs and click ids, and its " +
      "conversions' PII; counts, values and reports stay, anonymised. Sends not delivered yet are cancelled. A later GET, and a " +
      'second DELETE, answer 404. An account-scoped key names the site with siteId or websiteId when the user is known on several sites.',
    security: SECURITY,
    middleware: [apiAuth(deps)],
    request: { params: z.object({ telegramUserId: TelegramUserIdParam }), query: SiteQuery },
    responses: {
      204: { description: 'Erased' },
      ...problems(...COMMON_ERRORS, 'LEAD_NOT_FOUND', 'SITE_REQUIRED', 'FORBIDDEN', 'UNKNOWN_WEBSITE'),
    },
  });

  api.openapi(route, async (c) => {
    const q = c.req.valid('query');
    const caller = c.get('caller');
    const out = await eraseLead(
      deps.pool,
      caller,
      Number(c.req.valid('param').telegramUserId),
      { siteId: orNull(q.siteId), websiteId: orNull(q.websiteId) },
      `api-key:${caller.keyId}`,
    );
    deps.log.info(
      { requestId: c.get('requestId'), erasureId: out.erasureId, siteId: out.siteId },
      'lead erased',
    );
    return c.body(null, 204);
  });
}
