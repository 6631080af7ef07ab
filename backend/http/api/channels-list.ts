import { createRoute, z } from '@hono/zod-openapi';
import { listChannelsFor } from '../../domain/channel-directory.js';
import {
  COMMON_ERRORS,
  IdempotencyHeaders,
  SECURITY,
  SiteQuery,
  keyed,
  orNull,
  problems,
  type ApiApp,
  type ApiDeps,
} from './common.js';

const Channel = z
  .object({
    siteId: z.string().optional().openapi({ description: 'only in account-wide lists' }),
    siteDomain: z.string().optional().openapi({ description: 'only in account-wide lists' }),
    channelId: z.string(),
    telegramChannelId: z.string().openapi({ example: '-1001234567890' }),
    title: z.string(),
    username: z.string().optional(),
    funnelOrder: z.number().int(),
    eventType: z.string().optional(),
  })
  .openapi('Channel');

/** `GET /api/v1/channels`: active channels of the key's site, or of the account. */
export function registerListChannels(api: ApiApp, deps: ApiDeps): void {
  const route = createRoute({
    method: 'get',
    path: '/channels',
    operationId: 'listChannels',
    tags: ['Channels'],
    summary: 'List active channels',
    description:
      "A site-scoped key gets its site's channels; an account-scoped key the whole account's, or one site's with siteId or websiteId.",
    security: SECURITY,
    middleware: keyed(deps),
    request: { query: SiteQuery, headers: IdempotencyHeaders },
    responses: {
      200: {
        description: 'Channels',
        content: { 'application/json': { schema: z.object({ channels: z.array(Channel) }) } },
      },
      ...problems(...COMMON_ERRORS, 'FORBIDDEN', 'UNKNOWN_WEBSITE'),
    },
  });

  api.openapi(route, async (c) => {
    const q = c.req.valid('query');
    const channels = await listChannelsFor(deps.pool, c.get('caller'), {
      siteId: orNull(q.siteId),
      websiteId: orNull(q.websiteId),
    });
    return c.json({ channels }, 200);
  });
}
