import { createRoute, z } from '@hono/zod-openapi';
import { getLead } from '../../domain/leads.js';
import {
  COMMON_ERRORS,
  IdempotencyHeaders,
  SECURITY,
  SiteQuery,
  TelegramUserIdParam,
  keyed,
  orNull,
  problems,
  type ApiApp,
  type ApiDeps,
} from './common.js';

const OVERRIDE_FIELDS = [
  'fbc',
  'fbp',
  'clientIp',
  'userAgent',
  'gclid',
  'gbraid',
  'wbraid',
  'ttclid',
  'sccid',
  'ttp',
  'scid',
  'eventSourceUrl',
] as const;

const ConversionSummary = z
  .object({
    conversionId: z.string(),
    channelId: z.string().nullable(),
    eventType: z.string(),
    customEventName: z.string().optional(),
    capiStatus: z.enum(['pending', 'sent', 'failed', 'skipped']),
    awaitingManualInput: z.boolean(),
    coldLead: z.boolean(),
    attributedAt: z.number().openapi({ description: 'Unix milliseconds' }),
    eventTime: z.number().openapi({ description: 'Unix milliseconds' }),
    eventValue: z.number().optional(),
    eventCurrency: z.string().optional(),
    contentName: z.string().optional(),
    source: z.enum(['tracker', 'webhook', 'api']),
    apiVisitOverride: z
      .object(
        Object.fromEntries(OVERRIDE_FIELDS.map((f) => [f, z.string().nullish()])) as Record<
          (typeof OVERRIDE_FIELDS)[number],
          z.ZodOptional<z.ZodNullable<z.ZodString>>
        >,
      )
      .optional()
      .openapi({ description: "a cold lead's supplied attribution" }),
  })
  .openapi('ConversionSummary');

const Lead = z
  .object({
    telegramUserId: z.number(),
    siteId: z.string(),
    firstSeenAt: z.number().openapi({ description: 'Unix milliseconds' }),
    lastSeenAt: z.number().openapi({ description: 'Unix milliseconds' }),
    externalUserId: z.string().optional(),
    conversions: z.array(ConversionSummary).openapi({ description: 'oldest first; the most recent 500' }),
  })
  .openapi('Lead');

/** `GET /api/v1/leads/{telegramUserId}`: the lead on the resolved site. */
export function registerGetLead(api: ApiApp, deps: ApiDeps): void {
  const route = createRoute({
    method: 'get',
    path: '/leads/{telegramUserId}',
    operationId: 'getLead',
    tags: ['Leads'],
    summary: 'Everything known about a lead on the resolved site',
    description:
      'An account-scoped key names the site with siteId or websiteId when the user is a lead on several sites.',
    security: SECURITY,
    middleware: keyed(deps),
    request: {
      params: z.object({ telegramUserId: TelegramUserIdParam }),
      query: SiteQuery,
      headers: IdempotencyHeaders,
    },
    responses: {
      200: { description: 'The lead', content: { 'application/json': { schema: Lead } } },
      ...problems(...COMMON_ERRORS, 'LEAD_NOT_FOUND', 'SITE_REQUIRED', 'FORBIDDEN', 'UNKNOWN_WEBSITE'),
    },
  });

  api.openapi(route, async (c) => {
    const q = c.req.valid('query');
    const lead = await getLead(deps.pool, c.get('caller'), Number(c.req.valid('param').telegramUserId), {
      siteId: orNull(q.siteId),
      websiteId: orNull(q.websiteId),
    });
    return c.json(lead, 200);
  });
}
