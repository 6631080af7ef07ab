import { createRoute, z } from '@hono/zod-openapi';
import { LEAD_EVENT_EXAMPLES } from './request-examples.js';
import {
  COMMON_ERRORS,
  SECURITY,
  TelegramUserIdParam,
  eventJson,
  problems,
  type ApiApp,
  type ApiDeps,
} from './common.js';
import { ConversionResult, EventHeaders, LeadEventBody, toBusinessEvent } from './event-body.js';
import { eventAnswer, submitEvent } from './event-submit.js';

/** `POST /api/v1/leads/{telegramUserId}/events`: another event on a lead, the user in the path. */
export function registerLeadEvent(api: ApiApp, deps: ApiDeps): void {
  const route = createRoute({
    method: 'post',
    path: '/leads/{telegramUserId}/events',
    operationId: 'createLeadEvent',
    tags: ['Leads'],
    summary: 'Fire an additional event on a lead',
    description: [
      'Same as POST /events/conversion with the user in the path. channelId, siteId and websiteId are optional',
      "when the lead's history resolves them: the site is the acquisition's (else the most recent conversion's),",
      "the channel the most recent conversion's on that site.",
    ].join(' '),
    security: SECURITY,
    middleware: eventJson(deps),
    request: {
      params: z.object({ telegramUserId: TelegramUserIdParam }),
      headers: EventHeaders,
      body: {
        required: true,
        content: { 'application/json': { schema: LeadEventBody, examples: LEAD_EVENT_EXAMPLES } },
      },
    },
    responses: {
      201: {
        description: 'Conversion created',
        content: { 'application/json': { schema: ConversionResult } },
      },
      200: {
        description:
          'A recent matching conversion, or the conversion of the same orderId, was reused or updated',
        content: { 'application/json': { schema: ConversionResult } },
      },
      ...problems(
        ...COMMON_ERRORS,
        'SITE_REQUIRED',
        'CHANNEL_REQUIRED',
        'FORBIDDEN',
        'UNKNOWN_WEBSITE',
        'PAYLOAD_TOO_LARGE',
      ),
    },
  });

  api.openapi(route, async (c) => {
    const telegramUserId = Number(c.req.valid('param').telegramUserId);
    const event = toBusinessEvent(telegramUserId, c.req.valid('json'), c.req.valid('header'));
    const outcome = await submitEvent(c, deps, event, 'lead-event');
    const answer = eventAnswer(outcome);
    return answer.status === 201 ? c.json(answer.body, 201) : c.json(answer.body, 200);
  });
}
