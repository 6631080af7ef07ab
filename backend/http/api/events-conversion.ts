import { createRoute } from '@hono/zod-openapi';
import { CONVERSION_EXAMPLES } from './request-examples.js';
import { COMMON_ERRORS, SECURITY, eventJson, problems, type ApiApp, type ApiDeps } from './common.js';
import { ConversionEventBody, ConversionResult, EventHeaders, toBusinessEvent } from './event-body.js';
import { eventAnswer, submitEvent } from './event-submit.js';

/** `POST /api/v1/events/conversion`: a business event for a Telegram user, warm or cold. */
export function registerConversionEvent(api: ApiApp, deps: ApiDeps): void {
  const route = createRoute({
    method: 'post',
    path: '/events/conversion',
    operationId: 'createConversion',
    tags: ['Conversions'],
    summary: 'Create a conversion and dispatch it to the ad platforms',
    description: [
      "For a known lead the site, channel and attribution come from the user's verified acquisition (the join",
      'attributed to a visit); a supplied channel is kept only when it belongs to that site. A cold lead (no',
      'earlier conversion on the site) must name its site (siteId or websiteId, or a site-scoped key) and',
      'channelId; its fbc, fbp, click ids, client IP and User-Agent are stored as its attribution.',
      "A recent matching conversion (same site, user, channel and event type within the site's dedup window)",
      'is reused: updated and dispatched again when pending, failed or skipped (200, `updatedExisting`),',
      "returned untouched when already sent (200, `deduplicated`, `dispatched: false`); the answer's `warning`",
      "then names `orderId`. An event with an `orderId` is matched only with the site's conversion of the same",
      'event type (and customEventName) and order, whatever the window: a new order is a new conversion (201).',
    ].join(' '),
    security: SECURITY,
    middleware: eventJson(deps),
    request: {
      headers: EventHeaders,
      body: {
        required: true,
        content: { 'application/json': { schema: ConversionEventBody, examples: CONVERSION_EXAMPLES } },
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
    const body = c.req.valid('json');
    const event = toBusinessEvent(body.telegramUserId, body, c.req.valid('header'));
    const outcome = await submitEvent(c, deps, event, 'conversion');
    const answer = eventAnswer(outcome);
    return answer.status === 201 ? c.json(answer.body, 201) : c.json(answer.body, 200);
  });
}
