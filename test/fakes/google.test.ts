import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGoogle, type GoogleFake } from './google.js';
import { call } from './client.js';

const AUTH = {
  authorization: 'Bearer google-oauth-token',
  'developer-token': 'google-dev-token',
  'login-customer-id': '9998887777',
};
const ACTION = 'customers/1234567890/conversionActions/555';
let google: GoogleFake;

const upload = (body: unknown, headers: Record<string, string> = AUTH) =>
  call(`${google.url}/v25/customers/1234567890:uploadClickConversions`, { json: body, headers });

function row(gclid: string, overrides: Record<string, unknown> = {}) {
  const r: Record<string, unknown> = {
    gclid,
    conversionAction: ACTION,
    conversionDateTime: '2025-11-22 02:00:00+00:00',
    conversionValue: 10,
    currencyCode: 'EUR',
    orderId: `cnv_${gclid}`,
    ...overrides,
  };
  // JSON drops undefined members: a field overridden with undefined is absent.
  return JSON.parse(JSON.stringify(r)) as Record<string, unknown>;
}

beforeAll(async () => {
  google = await startGoogle();
});
afterAll(() => google.close());
beforeEach(() => google.reset());

describe('Google Ads click-conversion fake', () => {
  it('answers 404 to a sunset version, as Google does once it is turned off', async () => {
    for (const version of ['v21', 'v22']) {
      const res = await call(`${google.url}/${version}/customers/1234567890:uploadClickConversions`, {
        json: { conversions: [row('Cj0KCQiA')], partialFailure: true },
        headers: AUTH,
      });
      expect(res.status).toBe(404);
      expect(res.body.error.status).toBe('NOT_FOUND');
    }
    expect(google.conversions()).toEqual([]);
  });

  it('accepts valid rows, echoes them in results and records them', async () => {
    const res = await upload({ conversions: [row('Cj0KCQiA')], partialFailure: true });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      results: [
        { gclid: 'Cj0KCQiA', conversionAction: ACTION, conversionDateTime: '2025-11-22 02:00:00+00:00' },
      ],
    });
    expect(google.conversions('1234567890')).toEqual([
      expect.objectContaining({
        version: 'v25',
        conversion: expect.objectContaining({ orderId: 'cnv_Cj0KCQiA' }),
      }),
    ]);
    expect(google.received[0]?.headers['login-customer-id']).toBe('9998887777');
  });

  it('reports failed rows in partialFailureError with {} at their index', async () => {
    google.setGclidOutcome('expired1', 'EXPIRED_EVENT');
    const res = await upload({
      conversions: [
        row('good1'),
        row('bad gclid!'),
        row('expired1'),
        row('good2', { conversionDateTime: '2025-11-22T02:00:00Z' }),
      ],
      partialFailure: true,
    });
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ gclid: 'good1' });
    expect(res.body.results.slice(1)).toEqual([{}, {}, {}]);
    const pfe = res.body.partialFailureError;
    expect(pfe.code).toBe(3);
    expect(pfe.message).toContain('conversions[1]');
    const [detail] = pfe.details;
    expect(detail['@type']).toBe('type.googleapis.com/google.ads.googleads.v25.errors.GoogleAdsFailure');
    const byIndex = detail.errors.map((e: any) => [e.location.fieldPathElements[0].index, e.errorCode]);
    expect(byIndex).toEqual([
      [1, { conversionUploadError: 'UNPARSEABLE_GCLID' }],
      [2, { conversionUploadError: 'EXPIRED_EVENT' }],
      [3, { dateError: 'INVALID_FIELD_VALUES_IN_DATE_TIME' }],
    ]);
    expect(google.conversions().map((c) => c.conversion.gclid)).toEqual(['good1']);
    expect(google.partialFailures()[0]?.map((e) => e.index)).toEqual([1, 2, 3]);
  });

  it('refuses a reused orderId, and the same click twice, as CLICK_CONVERSION_ALREADY_EXISTS', async () => {
    await upload({ conversions: [row('g1')], partialFailure: true });
    const res = await upload({
      conversions: [row('g2', { orderId: 'cnv_g1' }), row('g1', { orderId: 'other' })],
      partialFailure: true,
    });
    const codes = res.body.partialFailureError.details[0].errors.map(
      (e: any) => e.errorCode.conversionUploadError,
    );
    expect(codes).toEqual(['CLICK_CONVERSION_ALREADY_EXISTS', 'CLICK_CONVERSION_ALREADY_EXISTS']);
    expect(google.conversions()).toHaveLength(1);
  });

  it('lets a retryable outcome clear after the given number of uploads', async () => {
    google.setGclidOutcome('fresh', 'TOO_RECENT_CONVERSION_ACTION', 1);
    const first = await upload({ conversions: [row('fresh')], partialFailure: true });
    expect(first.body.partialFailureError.details[0].errors[0].errorCode).toEqual({
      conversionUploadError: 'TOO_RECENT_CONVERSION_ACTION',
    });
    const second = await upload({ conversions: [row('fresh')], partialFailure: true });
    expect(second.body.partialFailureError).toBeUndefined();
  });

  it('refuses a request without partialFailure: true', async () => {
    const res = await upload({ conversions: [row('g1')] });
    expect(res.status).toBe(400);
    expect(res.body.error.status).toBe('INVALID_ARGUMENT');
    expect(res.body.error.details[0].errors[0].errorCode).toEqual({
      partialFailureError: 'PARTIAL_FAILURE_MODE_REQUIRED',
    });
  });

  it('refuses a missing or wrong OAuth token (401) and a wrong developer token (403)', async () => {
    const none = await upload(
      { conversions: [row('g1')], partialFailure: true },
      { 'developer-token': 'google-dev-token' },
    );
    expect(none.status).toBe(401);
    expect(none.body.error).toMatchObject({ code: 401, status: 'UNAUTHENTICATED' });
    const wrong = await upload(
      { conversions: [row('g1')], partialFailure: true },
      { ...AUTH, authorization: 'Bearer expired' },
    );
    expect(wrong.body.error.details[0].errors[0].errorCode).toEqual({
      authenticationError: 'OAUTH_TOKEN_INVALID',
    });
    const dev = await upload(
      { conversions: [row('g1')], partialFailure: true },
      { ...AUTH, 'developer-token': 'nope' },
    );
    expect(dev.status).toBe(403);
    expect(dev.body.error.details[0].errors[0].errorCode).toEqual({
      authenticationError: 'DEVELOPER_TOKEN_INVALID',
    });
    expect(google.conversions()).toEqual([]);
  });

  it('rate-limits with 429 RESOURCE_EXHAUSTED and a retryDelay', async () => {
    google.failNext(1, { type: 'rateLimit', retryAfterSec: 30 });
    const res = await upload({ conversions: [row('g1')], partialFailure: true });
    expect(res.status).toBe(429);
    expect(res.body.error.status).toBe('RESOURCE_EXHAUSTED');
    expect(res.body.error.details[0].errors[0].details.quotaErrorDetails.retryDelay).toBe('30s');
  });

  const codesOf = (res: { body: any }) =>
    res.body.partialFailureError.details[0].errors.map((e: any) => [
      e.location.fieldPathElements[0].index,
      e.errorCode,
    ]);
  const HEX = 'a'.repeat(64);

  it("refuses an unknown field, anywhere in the request, as Google's JSON parser does (400, nothing recorded)", async () => {
    for (const [body, at] of [
      [{ conversions: [row('g1', { clickId: 'x' })], partialFailure: true }, "'conversions[0]'"],
      [{ conversions: [row('g1')], partialFailure: true, dryRun: true }, "''"],
      [
        {
          conversions: [row('g1', { userIdentifiers: [{ hashedEmail: HEX, hashedName: HEX }] })],
          partialFailure: true,
        },
        "'conversions[0].user_identifiers[0]'",
      ],
      [
        {
          conversions: [row('g1', { consent: { adUserData: 'GRANTED', marketing: 'GRANTED' } })],
          partialFailure: true,
        },
        "'conversions[0].consent'",
      ],
    ] as const) {
      const res = await upload(body);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({
        status: 'INVALID_ARGUMENT',
        details: [{ '@type': 'type.googleapis.com/google.rpc.BadRequest' }],
      });
      expect(res.body.error.message).toContain(`at ${at}: Cannot find field.`);
    }
    // Google's JSON takes proto names too.
    expect(
      (
        await upload({
          conversions: [row('g2', { order_id: 'snake', orderId: undefined })],
          partial_failure: true,
        })
      ).status,
    ).toBe(200);
    expect(google.conversions().map((c) => c.conversion.gclid)).toEqual(['g2']);
    expect(
      (await upload({ conversions: [row('g3', { consent: { adUserData: 'YES' } })], partialFailure: true }))
        .status,
    ).toBe(400);
  });

  it('takes one click id per row: two fail that row alone; gbraid or wbraid alone is accepted', async () => {
    const res = await upload({
      conversions: [
        row('g1', { gbraid: 'GB1' }),
        row('x2', { gclid: undefined, gbraid: 'GB2', wbraid: 'WB2' }),
        row('x3', { gclid: undefined, gbraid: 'GB3' }),
        row('x4', { gclid: undefined, wbraid: 'WB4' }),
      ],
      partialFailure: true,
    });
    expect(codesOf(res)).toEqual([
      [0, { fieldError: 'VALUE_MUST_BE_UNSET' }],
      [1, { conversionUploadError: 'GBRAID_WBRAID_BOTH_SET' }],
    ]);
    expect(res.body.results.slice(2)).toEqual([
      expect.objectContaining({ gbraid: 'GB3' }),
      expect.objectContaining({ wbraid: 'WB4' }),
    ]);
  });

  it('matches a row without a click id by its hashed e-mail or phone, and refuses other or unhashed identifiers', async () => {
    const res = await upload({
      conversions: [
        row(undefined as never, {
          gclid: undefined,
          orderId: 'ec1',
          userIdentifiers: [{ userIdentifierSource: 'FIRST_PARTY', hashedEmail: HEX }],
        }),
        row(undefined as never, { gclid: undefined, orderId: 'ec2' }),
        row(undefined as never, {
          gclid: undefined,
          orderId: 'ec3',
          userIdentifiers: [{ addressInfo: { hashedFirstName: HEX } }],
        }),
        row(undefined as never, {
          gclid: undefined,
          orderId: 'ec4',
          userIdentifiers: [{ hashedEmail: 'john@example.com' }],
        }),
      ],
      partialFailure: true,
    });
    expect(codesOf(res)).toEqual([
      [1, { fieldError: 'REQUIRED' }],
      [2, { conversionUploadError: 'UNSUPPORTED_USER_IDENTIFIER' }],
      [3, { conversionUploadError: 'INVALID_USER_IDENTIFIER' }],
    ]);
    expect(google.conversions().map((c) => c.conversion.orderId)).toEqual(['ec1']);
  });

  it.each([
    ['2025-11-22 02:00:00+00:00', true],
    ['2025-11-22 02:00:00-08:00', true],
    ['2024-02-29 23:59:59+14:00', true],
    ['2025-11-22T02:00:00Z', false],
    ['2025-11-22 02:00:00', false],
    ['2025-11-22 02:00:00+0000', false],
    ['2025-02-29 12:00:00+00:00', false],
    ['2025-11-22 24:00:00+00:00', false],
    ['2025-11-22 02:00:00+15:00', false],
    ['22/11/2025 02:00:00+00:00', false],
  ])('conversionDateTime %j is accepted: %s', async (dateTime, ok) => {
    const res = await upload({
      conversions: [row('dt1', { conversionDateTime: dateTime })],
      partialFailure: true,
    });
    expect(res.body.partialFailureError === undefined).toBe(ok);
    if (!ok) expect(codesOf(res)).toEqual([[0, { dateError: 'INVALID_FIELD_VALUES_IN_DATE_TIME' }]]);
  });

  it('with validateOnly checks the rows, records none and returns no results', async () => {
    const good = await upload({ conversions: [row('v1')], partialFailure: true, validateOnly: true });
    expect(good).toMatchObject({ status: 200, body: {} });
    const bad = await upload({
      conversions: [row('v1'), row('bad gclid!')],
      partialFailure: true,
      validateOnly: true,
    });
    expect(bad.body.results).toBeUndefined();
    expect(codesOf(bad)).toEqual([[1, { conversionUploadError: 'UNPARSEABLE_GCLID' }]]);
    expect(google.conversions()).toEqual([]);
    expect(google.validated).toBe(2);
  });
});
