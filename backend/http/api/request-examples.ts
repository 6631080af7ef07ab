/**
 * The request examples of the OpenAPI document (`examples` of each request body): what the
 * reference page and generated clients show integrators. test/api/openapi.test.ts checks each one
 * against the schema that validates the request, so an example can never show a body the API refuses.
 */

/** An OpenAPI Examples Object: named examples, each a summary and the body. */
type Examples = Record<string, { summary: string; value: Record<string, unknown> }>;

const PURCHASE = {
  eventType: 'Purchase',
  orderId: 'ORD-2026-0042',
  value: 49.9,
  currency: 'EUR',
  contentName: 'Annual plan',
  pii: { email: 'buyer@example.com', phone: '+49 151 23456789', country: 'DE' },
  externalUserId: 'crm-8812',
};

/** `POST /events/conversion`. */
export const CONVERSION_EXAMPLES: Examples = {
  purchase: {
    summary: 'A purchase of a known lead, with its order id (the same order sent twice is one conversion)',
    value: { telegramUserId: 123456789, ...PURCHASE },
  },
  coldLead: {
    summary:
      'A lead Capigram has not seen yet: its site and channel, and what the business knows of the click',
    value: {
      telegramUserId: 987654321,
      websiteId: 'ws_FWgBcD0CruNminG7',
      channelId: '0190c8a1-7e4b-7c2d-9f3a-5b6c7d8e9f01',
      eventType: 'Lead',
      fbc: 'fb.1.1764320000000.IwAR2xExampleClickId',
      clientIp: '203.0.113.7',
      userAgent: 'Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X)',
      eventSourceUrl: 'https://shop.example.com/checkout',
    },
  },
};

/** `POST /leads/{telegramUserId}/events`. */
export const LEAD_EVENT_EXAMPLES: Examples = {
  purchase: { summary: "A purchase; the lead's history resolves its site and channel", value: PURCHASE },
  custom: {
    summary: 'A custom event',
    value: { eventType: 'Custom', customEventName: 'TrialStarted' },
  },
};

/** `POST /leads/{telegramUserId}/conversions/{conversionId}/value`. */
export const CONVERSION_VALUE_EXAMPLES: Examples = {
  value: { summary: 'The value of a conversion that awaited one', value: { value: 120, currency: 'USD' } },
};

/** `POST /entries/start`. */
export const ENTRY_START_EXAMPLES: Examples = {
  start: {
    summary: 'The bot received /start q3Vx0Jm8kT2bL9yWcR4nPa1s from user 123456789',
    value: { payload: 'q3Vx0Jm8kT2bL9yWcR4nPa1s', telegramUserId: 123456789 },
  },
};
