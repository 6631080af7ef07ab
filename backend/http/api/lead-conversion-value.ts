import { createRoute, z } from '@hono/zod-openapi';
import { CONVERSION_VALUE_EXAMPLES } from './request-examples.js';
import {
  MAX_VALUE,
  MIN_VALUE,
  normalizeCurrency,
  valueProblem,
} from '../../domain/conversions/currencies.js';
import { submitConversionValue } from '../../domain/conversions/submit-value.js';
import {
  COMMON_ERRORS,
  IdempotencyHeaders,
  SECURITY,
  TelegramUserIdParam,
  keyedJson,
  orNull,
  problems,
  type ApiApp,
  type ApiDeps,
} from './common.js';
import { Currency, Pii } from './event-body.js';

/** `POST /api/v1/leads/{telegramUserId}/conversions/{conversionId}/value`: the value a Purchase waited for. */
export function registerConversionValue(api: ApiApp, deps: ApiDeps): void {
  const route = createRoute({
    method: 'post',
    path: '/leads/{telegramUserId}/conversions/{conversionId}/value',
    operationId: 'submitConversionValue',
    tags: ['Leads'],
    summary: 'Submit the value of a conversion awaiting manual input',
    description:
      'Sets the value of a Purchase in `awaitingManualInput`, then dispatches it (the dashboard\'s "Submit value").',
    security: SECURITY,
    middleware: keyedJson(deps),
    request: {
      params: z.object({
        telegramUserId: TelegramUserIdParam,
        conversionId: z.uuid().openapi({ param: { name: 'conversionId', in: 'path' } }),
      }),
      headers: IdempotencyHeaders,
      body: {
        required: true,
        content: {
          'application/json': {
            schema: z
              .object({
                value: z
                  .number()
                  .max(MAX_VALUE)
                  .superRefine((v, ctx) => {
                    const problem = valueProblem(v, { positive: true });
                    if (problem) ctx.addIssue({ code: 'custom', message: problem });
                  })
                  .openapi({ description: `at least ${MIN_VALUE}; kept to 4 decimal places` }),
                currency: Currency,
                pii: Pii.nullish(),
              })
              .openapi('ConversionValue'),
            examples: CONVERSION_VALUE_EXAMPLES,
          },
        },
      },
    },
    responses: {
      200: {
        description: 'Value stored and dispatched',
        content: { 'application/json': { schema: z.object({ success: z.boolean() }) } },
      },
      ...problems(...COMMON_ERRORS, 'CONVERSION_NOT_FOUND', 'NOT_AWAITING_VALUE', 'PAYLOAD_TOO_LARGE'),
    },
  });

  api.openapi(route, async (c) => {
    const { telegramUserId, conversionId } = c.req.valid('param');
    const body = c.req.valid('json');
    await submitConversionValue(deps, c.get('caller'), {
      telegramUserId: Number(telegramUserId),
      conversionId,
      value: body.value,
      currency: normalizeCurrency(body.currency) ?? body.currency,
      pii: {
        email: orNull(body.pii?.email),
        phone: orNull(body.pii?.phone),
        firstName: orNull(body.pii?.firstName),
        lastName: orNull(body.pii?.lastName),
      },
    });
    return c.json({ success: true }, 200);
  });
}
