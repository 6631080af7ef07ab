import { z } from '@hono/zod-openapi';
import { normalizeIp } from '../../../shared/client-ip.js';
import { clientContext } from '../../domain/conversions/client-context.js';
import {
  MAX_VALUE,
  MIN_VALUE,
  normalizeCurrency,
  valueProblem,
} from '../../domain/conversions/currencies.js';
import { CONVERSION_EVENT_TYPES } from '../../platforms/types.js';
import type { BusinessEvent } from '../../domain/conversions/submit-event.js';
import { IdempotencyHeaders, UNSAFE_CHARS, orNull, text } from './common.js';

/**
 * The body shared by `POST /events/conversion` and `POST /leads/{telegramUserId}/events`, and the
 * shape of their answer. Unknown fields are ignored (older and newer clients keep working); every
 * string is bounded.
 */

const isIp = (s: string) => s.trim() === '' || normalizeIp(s) !== undefined;
const isHttpUrl = (s: string) => {
  if (s.trim() === '') return true;
  try {
    return ['http:', 'https:'].includes(new URL(s).protocol);
  } catch {
    return false;
  }
};

export const Currency = z
  .string()
  .refine((s) => normalizeCurrency(s) !== undefined, 'must be an ISO 4217 currency code such as USD')
  .openapi({ example: 'USD', description: 'ISO 4217 (case-insensitive)' });

/**
 * A PII string: whitespace around it (a tab or newline a CRM export left) is trimmed, as every
 * platform's normalisation does, instead of refusing the whole event; control characters inside
 * it are still refused.
 */
function piiText(max: number) {
  return z
    .string()
    .max(max, `must be at most ${max} characters`)
    .refine((s) => !UNSAFE_CHARS.test(s.trim()), 'must not contain control characters');
}

export const Pii = z
  .object({
    email: piiText(320).nullish(),
    phone: piiText(64).nullish().openapi({
      description:
        "international (+44 20 7946 0958, 0044 …, tel:+44…), digits with the country code (447911123456), or national in `country` or the site's default country; sent only as a valid number (libphonenumber), dropped with a warning naming why when invalid or when the national and international readings are both valid and differ. Given as a SHA-256 digest it is taken as the digest of the digits with country code and no + and sent to Meta and Snapchat only",
    }),
    firstName: piiText(200).nullish(),
    lastName: piiText(200).nullish(),
    country: piiText(64).nullish().openapi({
      description:
        'ISO 3166-1 alpha-2 (DE) or alpha-3 (DEU), or the English name (Germany, United States); also the country of a national phone number',
    }),
    city: piiText(200).nullish(),
    state: piiText(200).nullish().openapi({ description: 'US/Canada: the two-letter code or the name' }),
    zip: piiText(32).nullish(),
    dateOfBirth: piiText(64).nullish().openapi({
      description:
        'YYYY-MM-DD, YYYYMMDD, or day, month and year in another order where unambiguous (31/01/1990, 01/31/1990); 02/03/1990 is dropped',
    }),
    gender: piiText(16).nullish().openapi({ description: 'f or m' }),
  })
  .openapi('Pii', {
    description: 'Raw or already SHA-256-hashed; normalised and hashed on receipt, never stored raw',
  });

const eventFields = {
  channelId: z
    .uuid()
    .nullish()
    .openapi({ description: 'destination channel; optional when the lead history resolves it' }),
  siteId: text(100)
    .nullish()
    .openapi({ description: 'site override; required for a cold lead with an account-scoped key' }),
  websiteId: text(100).nullish().openapi({ description: 'public website id, alternative to siteId' }),
  eventType: z.enum(CONVERSION_EVENT_TYPES),
  customEventName: text(50).nullish().openapi({ description: 'required when eventType is Custom' }),
  orderId: z
    .string()
    .min(1, 'must be at least 1 character')
    .max(128, 'must be at most 128 characters')
    .refine((s) => !UNSAFE_CHARS.test(s), 'must not contain control characters')
    .nullish()
    .openapi({
      example: 'ORD-2026-0042',
      description:
        "the business's order (or transaction) id: an event is matched only with the site's earlier event of the same eventType (and customEventName) and orderId, whatever the dedup window; a new order is a new conversion (201). Sent as every platform's order or transaction id, and the platforms' event id is derived from it, so the same order reported twice is one event there too",
    }),
  value: z
    .number()
    .min(0)
    .max(MAX_VALUE)
    .nullish()
    .openapi({
      description: `required (at least ${MIN_VALUE}) when eventType is Purchase; 0 or at least ${MIN_VALUE} otherwise; kept to 4 decimal places`,
    }),
  currency: Currency.nullish(),
  contentName: text(500).nullish(),
  pii: Pii.nullish(),
  externalUserId: text(256).nullish(),
  eventTime: z
    .number()
    .int()
    .nullish()
    .openapi({ description: 'Unix milliseconds; defaults to now; at most 5 minutes ahead, 90 days back' }),
  fbc: text(512).nullish(),
  fbp: text(256).nullish(),
  gclid: text(512).nullish(),
  gbraid: text(512)
    .nullish()
    .openapi({ description: "Google's click id for iOS app traffic; used when there is no gclid" }),
  wbraid: text(512)
    .nullish()
    .openapi({ description: "Google's click id for iOS web traffic; used when there is no gclid or gbraid" }),
  ttclid: text(512).nullish(),
  sccid: text(512).nullish(),
  ttp: text(512).nullish().openapi({ description: "TikTok's _ttp cookie" }),
  scid: text(512).nullish().openapi({ description: "Snapchat's _scid cookie" }),
  clientIp: text(64)
    .refine(isIp, 'must be an IP address')
    .nullish()
    .openapi({ description: 'X-Capigram-Client-IP wins when both are sent' }),
  userAgent: text(1024)
    .nullish()
    .openapi({ description: 'X-Capigram-Client-User-Agent wins when both are sent' }),
  eventSourceUrl: text(2048).refine(isHttpUrl, 'must be an http(s) URL').nullish(),
  consent: z
    .object({
      adUserData: z.enum(['granted', 'denied']).nullish(),
      adPersonalization: z.enum(['granted', 'denied']).nullish(),
    })
    .nullish()
    .openapi({
      description:
        "the user's consent for this event, sent to Google as the event's consent; with adUserData denied no PII, IP or User-Agent of the event goes to any platform (docs/consent.md)",
    }),
};

type EventFields = z.infer<z.ZodObject<typeof eventFields>>;

function addValueProblem(
  ctx: z.core.$RefinementCtx<EventFields>,
  value: number,
  subject: string,
  opts: { positive: boolean },
): void {
  const problem = valueProblem(value, opts);
  if (problem) ctx.addIssue({ code: 'custom', path: ['value'], message: `${subject} ${problem}` });
}

function eventRules(b: EventFields, ctx: z.core.$RefinementCtx<EventFields>): void {
  if (b.eventType === 'Purchase') {
    if (b.value === null || b.value === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['value'],
        message: 'value is required when eventType is Purchase',
      });
    else addValueProblem(ctx, b.value, 'a Purchase value', { positive: true });
    if (!b.currency)
      ctx.addIssue({
        code: 'custom',
        path: ['currency'],
        message: 'currency is required when eventType is Purchase',
      });
  } else if (b.value !== null && b.value !== undefined) {
    addValueProblem(ctx, b.value, 'value', { positive: false });
    if (!b.currency)
      ctx.addIssue({ code: 'custom', path: ['currency'], message: 'currency is required with a value' });
  }
  if (b.eventType === 'Custom' && !b.customEventName?.trim()) {
    ctx.addIssue({
      code: 'custom',
      path: ['customEventName'],
      message: 'customEventName is required when eventType is Custom',
    });
  }
}

export const ConversionEventBody = z
  .object({ telegramUserId: z.number().int().positive().openapi({ example: 123456789 }), ...eventFields })
  .superRefine(eventRules)
  .openapi('ConversionEvent');

export const LeadEventBody = z.object(eventFields).superRefine(eventRules).openapi('LeadEvent');

export const EventHeaders = IdempotencyHeaders.extend({
  'x-capigram-client-ip': text(64)
    .refine(isIp, 'must be an IP address')
    .optional()
    .openapi({ description: "the end user's IP" }),
  'x-capigram-client-user-agent': text(1024).optional().openapi({ description: "the end user's User-Agent" }),
});

export const ConversionResult = z
  .object({
    conversionId: z.string(),
    capiStatus: z
      .enum(['pending', 'skipped', 'sent', 'failed'])
      .openapi({ description: '`sent` only on a reused, already sent conversion' }),
    coldLead: z.boolean(),
    dispatched: z
      .boolean()
      .openapi({ description: 'a send was scheduled (not that a platform accepted it)' }),
    deduplicated: z
      .boolean()
      .openapi({ description: 'an existing matching conversion was reused or updated' }),
    updatedExisting: z
      .boolean()
      .openapi({ description: 'a pending, failed or skipped matching conversion was updated' }),
    warning: z.string().optional().openapi({
      description:
        'why nothing was dispatched, what of the PII was not used, and, when an event without orderId was merged into an earlier conversion, that it was (naming orderId)',
    }),
    piiWarnings: z
      .array(z.string())
      .optional()
      .openapi({ description: 'what of the PII was not used and why (never the value)' }),
    sends: z.array(z.object({ sendId: z.string(), platform: z.string() })),
  })
  .openapi('ConversionResult');

/** The request as the domain takes it: trimmed, blanks as absent, currency upper-cased, client context merged. */
export function toBusinessEvent(
  telegramUserId: number,
  b: EventFields,
  headers: {
    'x-capigram-client-ip'?: string | undefined;
    'x-capigram-client-user-agent'?: string | undefined;
  },
): BusinessEvent {
  const currency = orNull(b.currency);
  return {
    telegramUserId,
    site: { siteId: orNull(b.siteId), websiteId: orNull(b.websiteId) },
    channelId: b.channelId ?? null,
    eventType: b.eventType,
    customEventName: orNull(b.customEventName),
    orderId: b.orderId ?? null,
    value: b.value ?? null,
    currency: currency === null ? null : (normalizeCurrency(currency) ?? null),
    contentName: orNull(b.contentName),
    pii: {
      email: orNull(b.pii?.email),
      phone: orNull(b.pii?.phone),
      firstName: orNull(b.pii?.firstName),
      lastName: orNull(b.pii?.lastName),
      country: orNull(b.pii?.country),
      city: orNull(b.pii?.city),
      state: orNull(b.pii?.state),
      zip: orNull(b.pii?.zip),
      dateOfBirth: orNull(b.pii?.dateOfBirth),
      gender: orNull(b.pii?.gender),
    },
    externalUserId: orNull(b.externalUserId),
    eventTimeMs: b.eventTime ?? null,
    clickIds: {
      fbc: orNull(b.fbc),
      fbp: orNull(b.fbp),
      gclid: orNull(b.gclid),
      gbraid: orNull(b.gbraid),
      wbraid: orNull(b.wbraid),
      ttclid: orNull(b.ttclid),
      sccid: orNull(b.sccid),
      ttp: orNull(b.ttp),
      scid: orNull(b.scid),
    },
    client: clientContext({
      headerIp: headers['x-capigram-client-ip'],
      headerUserAgent: headers['x-capigram-client-user-agent'],
      bodyIp: b.clientIp,
      bodyUserAgent: b.userAgent,
    }),
    eventSourceUrl: orNull(b.eventSourceUrl),
    consent: {
      adUserData: b.consent?.adUserData ?? null,
      adPersonalization: b.consent?.adPersonalization ?? null,
    },
  };
}
