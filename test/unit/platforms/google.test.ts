import { describe, expect, it } from 'vitest';
import { googleAdapter, googleDateTime } from '../../../backend/platforms/google.js';
import type { DeliveryEvent, EventOutcome, PixelConfig } from '../../../backend/platforms/types.js';
import { DAY, HASH, NOW, deliveredAll, event, failAll, reply, retryAll } from './fixtures.js';

const BASE = 'https://ads.example.test';
const pixel: PixelConfig = {
  platform: 'google',
  customerId: '123-456-7890',
  conversionActions: { '*': '987654' },
  developerToken: 'dev-token',
  oauthToken: 'ya29.token',
};

function gEvent(overrides: Partial<DeliveryEvent> = {}): DeliveryEvent {
  return event({ gclid: 'Cj0KCQiA-gclid_1', eventTimeMs: NOW, ...overrides });
}

describe('googleDateTime', () => {
  it.each([
    [NOW, '2025-11-22 02:00:00+00:00'],
    [NOW + 59_999, '2025-11-22 02:00:59+00:00'],
    [Date.UTC(2024, 1, 29, 23, 5, 9), '2024-02-29 23:05:09+00:00'],
  ])('%i → %s', (ms, text) => {
    expect(googleDateTime(ms)).toBe(text);
  });
});

describe('google buildRequest', () => {
  it('builds uploadClickConversions with partialFailure, orderId and the conversion action resource name', () => {
    const events = [
      gEvent({
        eventId: 'e1',
        eventType: 'Purchase',
        value: 120.5,
        currency: 'usd',
        orderId: 'cnv_42',
        hashed: { em: HASH.email },
      }),
      gEvent({
        eventId: 'e2',
        eventType: 'Subscribe',
        gclid: 'Cj0-second',
        eventTimeMs: NOW - 61_000,
        orderId: null,
      }),
    ];
    const req = googleAdapter.buildRequest(events, { ...pixel, loginCustomerId: '111-222-3333' }, `${BASE}/`);
    expect(req.url).toBe(`${BASE}/v25/customers/1234567890:uploadClickConversions`);
    expect(req.headers).toEqual({
      'content-type': 'application/json',
      authorization: 'Bearer ya29.token',
      'developer-token': 'dev-token',
      'login-customer-id': '1112223333',
    });
    expect(req.body).toBe(
      JSON.stringify({
        conversions: [
          {
            gclid: 'Cj0KCQiA-gclid_1',
            conversionAction: 'customers/1234567890/conversionActions/987654',
            conversionDateTime: '2025-11-22 02:00:00+00:00',
            conversionValue: 120.5,
            currencyCode: 'USD',
            orderId: 'cnv_42',
            userIdentifiers: [{ userIdentifierSource: 'FIRST_PARTY', hashedEmail: HASH.email }],
          },
          {
            gclid: 'Cj0-second',
            conversionAction: 'customers/1234567890/conversionActions/987654',
            conversionDateTime: '2025-11-22 01:58:59+00:00',
            orderId: 'e2',
          },
        ],
        partialFailure: true,
      }),
    );
  });

  it('keeps a full resource name, honours apiVersion, and sends no login-customer-id when unset', () => {
    const req = googleAdapter.buildRequest(
      [gEvent()],
      { ...pixel, conversionActions: { '*': 'customers/555/conversionActions/777' }, loginCustomerId: null },
      BASE,
      { apiVersion: '19' },
    );
    expect(req.url).toBe(`${BASE}/v19/customers/1234567890:uploadClickConversions`);
    expect(req.headers['login-customer-id']).toBeUndefined();
    expect(JSON.parse(req.body).conversions[0].conversionAction).toBe('customers/555/conversionActions/777');
    expect(googleAdapter.buildRequest([gEvent()], pixel, BASE, { apiVersion: 'v20' }).url).toBe(
      `${BASE}/v20/customers/1234567890:uploadClickConversions`,
    );
  });

  it("rejects another platform's pixel and too big a batch", () => {
    expect(() =>
      googleAdapter.buildRequest([gEvent()], { platform: 'meta', pixelId: 'p', accessToken: 't' }, BASE),
    ).toThrow(TypeError);
    expect(() =>
      googleAdapter.buildRequest(
        Array.from({ length: 2001 }, () => gEvent()),
        pixel,
        BASE,
      ),
    ).toThrow(RangeError);
  });
});

describe('google precheck', () => {
  it.each<[string, Partial<DeliveryEvent>, { ok: true } | { ok: false; skipReason: string }]>([
    ['a conversion with a gclid', {}, { ok: true }],
    ['no user agent or URL (Google needs neither)', { userAgent: null, eventSourceUrl: null }, { ok: true }],
    [
      'no click id and no e-mail or phone',
      { gclid: null },
      {
        ok: false,
        skipReason:
          'no Google click id (gclid, gbraid, wbraid) and no e-mail or phone to match the conversion with',
      },
    ],
    [
      'a blank gclid',
      { gclid: ' ', hashed: { fn: HASH.email } },
      {
        ok: false,
        skipReason:
          'no Google click id (gclid, gbraid, wbraid) and no e-mail or phone to match the conversion with',
      },
    ],
    [
      'no click id but an e-mail (enhanced conversions)',
      { gclid: null, hashed: { em: HASH.email } },
      { ok: true },
    ],
    ['no click id but a phone in E.164', { gclid: null, hashed: { phE164: HASH.email } }, { ok: true }],
    ['a gbraid alone', { gclid: null, gbraid: 'GBRAID_1' }, { ok: true }],
    ['a wbraid alone', { gclid: null, wbraid: 'WBRAID_1' }, { ok: true }],
    [
      'a page view',
      { eventType: 'PageView' },
      { ok: false, skipReason: 'page views are not uploaded to Google Ads' },
    ],
    ['an event 90 days old', { eventTimeMs: NOW - 90 * DAY }, { ok: true }],
    [
      'an event older than 90 days',
      { eventTimeMs: NOW - 90 * DAY - 1 },
      { ok: false, skipReason: "event is older than Google Ads' 90-day window" },
    ],
    [
      'an event in the future',
      { eventTimeMs: NOW + DAY },
      { ok: false, skipReason: 'event time is more than 5 minutes in the future' },
    ],
  ])('%s', (_name, overrides, expected) => {
    expect(googleAdapter.precheck(gEvent(overrides), NOW)).toStrictEqual(expected);
  });

  it('skips an event type the pixel maps to no conversion action, naming the missing mapping', () => {
    const mapped: PixelConfig = {
      ...pixel,
      conversionActions: { Subscribe: '1', Purchase: '2', 'Custom:Demo': '3' },
    };
    expect(googleAdapter.precheck(gEvent({ eventType: 'Purchase' }), NOW, mapped)).toStrictEqual({
      ok: true,
    });
    expect(googleAdapter.precheck(gEvent({ eventType: 'Lead' }), NOW, mapped)).toStrictEqual({
      ok: false,
      skipReason:
        'no Google Ads conversion action for Lead on this pixel (map one with pixel update --conversion-action Lead=ACTION_ID)',
    });
    expect(
      googleAdapter.precheck(gEvent({ eventType: 'Custom', customEventName: 'Demo' }), NOW, mapped),
    ).toStrictEqual({ ok: true });
    expect(
      googleAdapter.precheck(gEvent({ eventType: 'Custom', customEventName: 'Other' }), NOW, mapped),
    ).toMatchObject({ ok: false, skipReason: expect.stringContaining('Custom:Other=ACTION_ID') });
  });
});

describe('google conversions per event type, click ids, identifiers, consent, test mode', () => {
  const mapped: PixelConfig = {
    ...pixel,
    conversionActions: { Subscribe: '11', Purchase: '22', Custom: '33', 'Custom:Demo': '44' },
  };
  const rows = (events: DeliveryEvent[], p: PixelConfig = mapped, opts = {}) =>
    JSON.parse(googleAdapter.buildRequest(events, p, BASE, opts).body);

  it('sends each event to the action of its type, the most specific mapping first', () => {
    const body = rows([
      gEvent({ eventId: 'a', eventType: 'Subscribe' }),
      gEvent({ eventId: 'b', eventType: 'Purchase' }),
      gEvent({ eventId: 'c', eventType: 'Custom', customEventName: 'Demo' }),
      gEvent({ eventId: 'd', eventType: 'Custom', customEventName: 'Webinar' }),
    ]);
    expect(
      body.conversions.map((c: { conversionAction: string }) => c.conversionAction.split('/').pop()),
    ).toEqual(['11', '22', '44', '33']);
    expect(() => googleAdapter.buildRequest([gEvent({ eventType: 'Lead' })], mapped, BASE)).toThrow(
      /no Google Ads conversion action for Lead/,
    );
  });

  it('carries one click id at most, the gclid first, then gbraid, then wbraid', () => {
    const body = rows([
      gEvent({ eventId: 'a', gclid: 'G1', gbraid: 'GB1', wbraid: 'WB1' }),
      gEvent({ eventId: 'b', gclid: null, gbraid: 'GB2', wbraid: 'WB2' }),
      gEvent({ eventId: 'c', gclid: ' ', gbraid: null, wbraid: 'WB3' }),
      gEvent({ eventId: 'd', gclid: null, hashed: { em: HASH.email } }),
    ]);
    const ids = body.conversions.map((c: Record<string, unknown>) => [c.gclid, c.gbraid, c.wbraid]);
    expect(ids).toEqual([
      ['G1', undefined, undefined],
      [undefined, 'GB2', undefined],
      [undefined, undefined, 'WB3'],
      [undefined, undefined, undefined],
    ]);
  });

  it("sends Google's e-mail digest when stored (else the common one) and the E.164 phone digest; never names", () => {
    const [a, b] = rows([
      gEvent({
        eventId: 'a',
        hashed: {
          em: 'e'.repeat(64),
          emGoogle: 'f'.repeat(64),
          ph: '1'.repeat(64),
          phE164: '2'.repeat(64),
          fn: '3'.repeat(64),
          ln: '4'.repeat(64),
        },
      }),
      gEvent({ eventId: 'b', hashed: { em: 'e'.repeat(64) } }),
    ]).conversions;
    expect(a.userIdentifiers).toEqual([
      { userIdentifierSource: 'FIRST_PARTY', hashedEmail: 'f'.repeat(64) },
      { userIdentifierSource: 'FIRST_PARTY', hashedPhoneNumber: '2'.repeat(64) },
    ]);
    expect(b.userIdentifiers).toEqual([{ userIdentifierSource: 'FIRST_PARTY', hashedEmail: 'e'.repeat(64) }]);
    expect(rows([gEvent()]).conversions[0].userIdentifiers).toBeUndefined();
  });

  it("sends the site's consent, else the configured default, else none", () => {
    const [a, b] = rows(
      [gEvent({ eventId: 'a', adUserDataConsent: 'DENIED' }), gEvent({ eventId: 'b' })],
      mapped,
      { adUserDataConsent: 'GRANTED' },
    ).conversions;
    expect(a.consent).toEqual({ adUserData: 'DENIED' });
    expect(b.consent).toEqual({ adUserData: 'GRANTED' });
    expect(rows([gEvent()]).conversions[0].consent).toBeUndefined();
  });

  it('sends the landing IP only for a pixel that asks for it, and validateOnly for a pixel in test mode', () => {
    const ev = gEvent({ clientIp: '198.51.100.9', landingIp: '203.0.113.7' });
    expect(rows([ev]).conversions[0].userIpAddress).toBeUndefined();
    expect(rows([ev]).validateOnly).toBeUndefined();
    const body = rows([ev], { ...mapped, sendUserIpAddress: true, validateOnly: true });
    expect(body.conversions[0].userIpAddress).toBe('203.0.113.7');
    expect(body.validateOnly).toBe(true);
    expect(body.partialFailure).toBe(true);
  });
});

function rowError(index: number | undefined, errorCode: Record<string, string>, message: string) {
  return {
    errorCode,
    message,
    ...(index === undefined
      ? {}
      : { location: { fieldPathElements: [{ fieldName: 'conversions', index }, { fieldName: 'gclid' }] } }),
  };
}

function partial(errors: unknown[]) {
  return {
    results: [{}, {}],
    partialFailureError: {
      code: 3,
      message: 'summary',
      details: [
        {
          '@type': 'type.googleapis.com/google.ads.googleads.v21.errors.GoogleAdsFailure',
          errors,
          requestId: 'r',
        },
      ],
    },
  };
}

describe('google classify', () => {
  const five = ['r0', 'r1', 'r2', 'r3', 'r4'].map((id) => gEvent({ eventId: id }));
  const two = five.slice(0, 2);

  it('200 without partial failure → delivered; an empty 200 body too', () => {
    expect(
      googleAdapter.classify(reply(200, { results: [{ gclid: 'a' }, { gclid: 'b' }] }), two, NOW),
    ).toStrictEqual(deliveredAll(two));
    expect(googleAdapter.classify(reply(200, ''), two, NOW)).toStrictEqual(deliveredAll(two));
  });

  it('maps row errors to rows by their field path index', () => {
    const res = reply(
      200,
      partial([
        rowError(4, { conversionUploadError: 'UNPARSEABLE_GCLID' }, 'The gclid could not be decoded.'),
        rowError(0, { conversionUploadError: 'CLICK_CONVERSION_ALREADY_EXISTS' }, 'Already exists.'),
        rowError(1, { conversionUploadError: 'TOO_RECENT_CONVERSION_ACTION' }, 'Action too new.'),
        rowError(3, { quotaError: 'RESOURCE_EXHAUSTED' }, 'Quota.'),
      ]),
    );
    expect(googleAdapter.classify(res, five, NOW)).toStrictEqual<EventOutcome[]>([
      { eventId: 'r0', outcome: 'delivered' },
      { eventId: 'r1', outcome: 'retry', error: 'TOO_RECENT_CONVERSION_ACTION: Action too new.' },
      { eventId: 'r2', outcome: 'delivered' },
      { eventId: 'r3', outcome: 'retry', error: 'RESOURCE_EXHAUSTED: Quota.' },
      { eventId: 'r4', outcome: 'failed', error: 'UNPARSEABLE_GCLID: The gclid could not be decoded.' },
    ]);
  });

  it.each([
    [{ conversionUploadError: 'CLICK_CONVERSION_ALREADY_EXISTS' }, { outcome: 'delivered' }],
    [
      { conversionUploadError: 'TOO_RECENT_CONVERSION_ACTION' },
      { outcome: 'retry', error: 'TOO_RECENT_CONVERSION_ACTION: m' },
    ],
    [{ conversionUploadError: 'TOO_RECENT_EVENT' }, { outcome: 'retry', error: 'TOO_RECENT_EVENT: m' }],
    [{ quotaError: 'RESOURCE_EXHAUSTED' }, { outcome: 'retry', error: 'RESOURCE_EXHAUSTED: m' }],
    [{ internalError: 'INTERNAL_ERROR' }, { outcome: 'retry', error: 'INTERNAL_ERROR: m' }],
    [{ conversionUploadError: 'UNPARSEABLE_GCLID' }, { outcome: 'failed', error: 'UNPARSEABLE_GCLID: m' }],
    [{ conversionUploadError: 'EXPIRED_EVENT' }, { outcome: 'failed', error: 'EXPIRED_EVENT: m' }],
    [
      { conversionUploadError: 'CONVERSION_PRECEDES_EVENT' },
      { outcome: 'failed', error: 'CONVERSION_PRECEDES_EVENT: m' },
    ],
    [{ fieldError: 'REQUIRED' }, { outcome: 'failed', error: 'REQUIRED: m' }],
    [{}, { outcome: 'failed', error: 'UNKNOWN: m' }],
  ])('row error %j → %j', (errorCode, expected) => {
    const res = reply(200, partial([rowError(1, errorCode, 'm')]));
    expect(googleAdapter.classify(res, two, NOW)).toStrictEqual([
      { eventId: 'r0', outcome: 'delivered' },
      { eventId: 'r1', ...expected },
    ]);
  });

  it('a row with several errors takes the worst; an error naming no row applies to all; out-of-range indexes are ignored', () => {
    const several = reply(
      200,
      partial([
        rowError(0, { conversionUploadError: 'TOO_RECENT_CONVERSION_ACTION' }, 'later'),
        rowError(0, { conversionUploadError: 'EXPIRED_EVENT' }, 'expired'),
        rowError(1, { conversionUploadError: 'CLICK_CONVERSION_ALREADY_EXISTS' }, 'dup'),
        rowError(1, { quotaError: 'RESOURCE_EXHAUSTED' }, 'quota'),
        rowError(9, { conversionUploadError: 'EXPIRED_EVENT' }, 'nowhere'),
      ]),
    );
    expect(googleAdapter.classify(several, two, NOW)).toStrictEqual<EventOutcome[]>([
      { eventId: 'r0', outcome: 'failed', error: 'EXPIRED_EVENT: expired' },
      { eventId: 'r1', outcome: 'retry', error: 'RESOURCE_EXHAUSTED: quota' },
    ]);
    const unplaced = reply(
      200,
      partial([rowError(undefined, { conversionUploadError: 'TOO_RECENT_EVENT' }, 'all')]),
    );
    expect(googleAdapter.classify(unplaced, two, NOW)).toStrictEqual(retryAll(two, 'TOO_RECENT_EVENT: all'));
  });

  it('a partial failure with no details fails every row with its summary', () => {
    const res = reply(200, {
      results: [{}, {}],
      partialFailureError: { code: 3, message: 'Something went wrong at conversions[0]' },
    });
    expect(googleAdapter.classify(res, two, NOW)).toStrictEqual(
      failAll(two, 'UNKNOWN: Something went wrong at conversions[0]'),
    );
  });

  const quota = {
    error: {
      code: 429,
      message: 'Resource has been exhausted (e.g. check quota).',
      status: 'RESOURCE_EXHAUSTED',
      details: [
        {
          '@type': 'type.googleapis.com/google.ads.googleads.v21.errors.GoogleAdsFailure',
          errors: [
            {
              errorCode: { quotaError: 'RESOURCE_EXHAUSTED' },
              message: 'Too many requests.',
              details: { quotaErrorDetails: { rateScope: 'ACCOUNT', retryDelay: '30s' } },
            },
          ],
        },
      ],
    },
  };
  const quotaText =
    'HTTP 429: RESOURCE_EXHAUSTED: Resource has been exhausted (e.g. check quota). (RESOURCE_EXHAUSTED: Too many requests.)';

  it.each([
    ['429 with retryDelay', reply(429, quota), quotaText, 30_000],
    ['429 with Retry-After, which wins', reply(429, quota, { 'Retry-After': '5' }), quotaText, 5_000],
    [
      '500',
      reply(500, { error: { code: 500, message: 'Internal error encountered.', status: 'INTERNAL' } }),
      'HTTP 500: INTERNAL: Internal error encountered.',
      undefined,
    ],
    ['503', reply(503, ''), 'HTTP 503', undefined],
    ['a network error', { networkError: 'ECONNREFUSED' }, 'network error: ECONNREFUSED', undefined],
    ['an unreadable 200', reply(200, 'garbage'), 'HTTP 200: unexpected body: garbage', undefined],
  ] as const)('%s → retry all', (_name, res, error, delay) => {
    expect(googleAdapter.classify(res, two, NOW)).toStrictEqual(retryAll(two, error, delay));
  });

  it.each([
    [
      401,
      {
        error: {
          code: 401,
          message: 'Request had invalid authentication credentials.',
          status: 'UNAUTHENTICATED',
          details: [
            {
              errors: [
                {
                  errorCode: { authenticationError: 'OAUTH_TOKEN_INVALID' },
                  message: 'Oauth token is invalid.',
                },
              ],
            },
          ],
        },
      },
      'HTTP 401: UNAUTHENTICATED: Request had invalid authentication credentials. (OAUTH_TOKEN_INVALID: Oauth token is invalid.)',
    ],
    [
      403,
      { error: { code: 403, message: 'The caller does not have permission', status: 'PERMISSION_DENIED' } },
      'HTTP 403: PERMISSION_DENIED: The caller does not have permission',
    ],
    [
      400,
      { error: { code: 400, message: 'Request contains an invalid argument.', status: 'INVALID_ARGUMENT' } },
      'HTTP 400: INVALID_ARGUMENT: Request contains an invalid argument.',
    ],
  ])('%i → failed all', (status, b, text) => {
    expect(googleAdapter.classify(reply(status, b), two, NOW)).toStrictEqual(failAll(two, text));
  });
});

describe('google classify: a developer token Google no longer allowlists', () => {
  const two = [gEvent({ eventId: 'a' }), gEvent({ eventId: 'b' })];
  const hint =
    'Google no longer lets this developer token import conversions through the Google Ads API: switch the pixel to the Data Manager API (pixel update --pixel P --api data-manager)';
  const notAllowlisted = {
    errorCode: { notAllowlistedError: 'CUSTOMER_NOT_ALLOWLISTED_FOR_THIS_FEATURE' },
    message: 'Customer is not allowlisted for accessing this feature.',
  };

  it('refused as a request: every send fails naming the switch', () => {
    const body = {
      error: {
        code: 403,
        message: 'The caller does not have permission',
        status: 'PERMISSION_DENIED',
        details: [{ errors: [notAllowlisted] }],
      },
    };
    expect(googleAdapter.classify(reply(403, body), two, NOW)).toStrictEqual(
      failAll(
        two,
        `${hint} (PERMISSION_DENIED: The caller does not have permission (CUSTOMER_NOT_ALLOWLISTED_FOR_THIS_FEATURE: Customer is not allowlisted for accessing this feature.))`,
      ),
    );
  });

  it('refused as a row: that send fails naming the switch, the other is delivered', () => {
    const body = {
      partialFailureError: {
        code: 7,
        message: 'Customer is not allowlisted for accessing this feature.',
        details: [
          {
            errors: [
              {
                ...notAllowlisted,
                location: { fieldPathElements: [{ fieldName: 'conversions', index: 1 }] },
              },
            ],
          },
        ],
      },
      results: [{ gclid: 'x' }, {}],
    };
    expect(googleAdapter.classify(reply(200, body), two, NOW)).toStrictEqual([
      { eventId: 'a', outcome: 'delivered' },
      { eventId: 'b', outcome: 'failed', error: `CUSTOMER_NOT_ALLOWLISTED_FOR_THIS_FEATURE: ${hint}` },
    ]);
  });
});
