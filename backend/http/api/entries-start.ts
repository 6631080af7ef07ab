import { createRoute, z } from '@hono/zod-openapi';
import { ENTRY_START_EXAMPLES } from './request-examples.js';
import { PAYLOAD_RE } from '../../domain/entries/payload.js';
import { reportStart } from '../../domain/entries/reported-start.js';
import {
  COMMON_ERRORS,
  IdempotencyHeaders,
  SECURITY,
  keyedJson,
  problems,
  type ApiApp,
  type ApiDeps,
} from './common.js';

const Body = z
  .object({
    payload: z
      .string()
      .regex(
        PAYLOAD_RE,
        'must be 1-64 characters of A-Za-z0-9_- (the start parameter as the bot received it)',
      )
      .openapi({ example: 'q3Vx0Jm8kT2bL9yWcR4nPa1s' }),
    telegramUserId: z
      .number()
      .int()
      .positive()
      .refine(Number.isSafeInteger, 'is too large')
      .openapi({ example: 123456789 }),
  })
  .openapi('EntryStart');

const Answer = z
  .object({
    attributed: z
      .boolean()
      .openapi({ description: "true when the payload's click (its visit) is now tied to this user" }),
    conversionId: z
      .string()
      .uuid()
      .optional()
      .openapi({ description: "the entry's event, when it sends one" }),
  })
  .openapi('EntryStartResult');

/**
 * `POST /api/v1/entries/start`: for bots whose backend is not Capigram. The operator's bot
 * received `/start <payload>` and reports it with the user's id; the effect is that of the same
 * `/start` reaching Capigram's webhook (the bot's answer excepted: the operator's bot sends it).
 */
export function registerEntryStart(api: ApiApp, deps: ApiDeps): void {
  const route = createRoute({
    method: 'post',
    path: '/entries/start',
    operationId: 'reportEntryStart',
    tags: ['Entries'],
    summary: 'Report a bot start with an entry payload',
    description:
      "Ties the entry click that handed out `payload` to the Telegram user and sends the entry's event with the click's visit (click ids, IP, " +
      "User-Agent), as `/start <payload>` reaching the webhook does. A payload that is unknown to the key's account (or site), or already " +
      'used by another user, is organic: `attributed: false`, nothing sent. The same user reporting it again changes nothing.',
    security: SECURITY,
    middleware: keyedJson(deps),
    request: {
      headers: IdempotencyHeaders,
      body: {
        content: { 'application/json': { schema: Body, examples: ENTRY_START_EXAMPLES } },
        required: true,
      },
    },
    responses: {
      200: { description: 'Handled', content: { 'application/json': { schema: Answer } } },
      ...problems(...COMMON_ERRORS),
    },
  });

  api.openapi(route, async (c) => {
    const body = c.req.valid('json');
    const caller = c.get('caller');
    return c.json(await reportStart(deps, caller, body), 200);
  });
}
