import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { call } from './client.js';
import { startDataManager, type DataManagerFake } from './google-data-manager.js';

const sha = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const AUTH = { authorization: 'Bearer google-oauth-token' };
let dm: DataManagerFake;

const destination = (over: Record<string, unknown> = {}) => ({
  reference: 'a',
  operatingAccount: { accountType: 'GOOGLE_ADS', accountId: '1234567890' },
  productDestinationId: '555',
  ...over,
});
const event = (over: Record<string, unknown> = {}) => ({
  destinationReferences: ['a'],
  transactionId: 'order-1',
  eventTimestamp: '2026-11-01T10:00:00.000Z',
  eventSource: 'WEB',
  adIdentifiers: { gclid: 'Cj0KCQ-1' },
  conversionValue: 10,
  currency: 'EUR',
  ...over,
});
const ingest = (body: unknown, headers: Record<string, string> = AUTH) =>
  call(`${dm.url}/v1/events:ingest`, { json: body, headers });

/** The BadRequest field violations of an error answer. */
function violations(body: any): { field: string; reason: string }[] {
  const bad = body.error.details.find((d: any) => d['@type'] === 'type.googleapis.com/google.rpc.BadRequest');
  return bad.fieldViolations.map((v: any) => ({ field: v.field, reason: v.reason }));
}

beforeAll(async () => {
  dm = await startDataManager({
    conversionActions: { '1234567890': ['555', '556'] },
    knownPeople: ['Jane.Doe@gmail.com', '+49 151 23456789'],
  });
});
afterAll(() => dm.close());
beforeEach(() => dm.reset());

describe('Data Manager API fake: events:ingest', () => {
  it('accepts a valid request with a requestId and records its events per destination', async () => {
    const res = await ingest({
      destinations: [
        destination(),
        destination({
          reference: 'b',
          productDestinationId: '556',
          loginAccount: { accountType: 'GOOGLE_ADS', accountId: '9998887777' },
        }),
      ],
      events: [
        event(),
        event({
          destinationReferences: ['b'],
          transactionId: 'order-2',
          adIdentifiers: {
            gbraid: 'gb-1',
            landingPageDeviceInfo: { ipAddress: '203.0.113.7', userAgent: 'UA' },
          },
          userData: {
            userIdentifiers: [
              { emailAddress: sha('janedoe@gmail.com') },
              { phoneNumber: sha('+4915123456789') },
            ],
          },
          consent: { adUserData: 'CONSENT_GRANTED', adPersonalization: 'CONSENT_DENIED' },
        }),
      ],
      encoding: 'HEX',
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ requestId: expect.stringMatching(/^[0-9a-f-]{36}$/) });
    expect(
      dm.events().map((e) => [e.destination.productDestinationId, e.event.transactionId, e.loginAccountId]),
    ).toEqual([
      ['555', 'order-1', undefined],
      ['556', 'order-2', '9998887777'],
    ]);
  });

  it.each([
    ['an unknown request field', { partialFailure: true }, '', 'INVALID_ARGUMENT'],
    [
      'an unknown event field (the Google Ads API name)',
      { events: [event({ orderId: 'x' })] },
      'events[0]',
      'INVALID_ARGUMENT',
    ],
    [
      'a wrong enum value',
      { events: [event({ eventSource: 'WEBSITE' })] },
      'events[0].eventSource',
      'INVALID_ENUM_VALUE',
    ],
    [
      'a wrong consent value',
      { events: [event({ consent: { adUserData: 'GRANTED' } })] },
      'events[0].consent.adUserData',
      'INVALID_ENUM_VALUE',
    ],
    [
      'the Google Ads API timestamp',
      { events: [event({ eventTimestamp: '2026-11-01 10:00:00+00:00' })] },
      'events[0].eventTimestamp',
      'INVALID_ARGUMENT',
    ],
    [
      'seconds instead of a timestamp',
      { events: [event({ eventTimestamp: 1764000000 })] },
      'events[0].eventTimestamp',
      'INVALID_ARGUMENT',
    ],
    [
      'a future event',
      { events: [event({ eventTimestamp: '2099-01-01T00:00:00Z' })] },
      'events[0].eventTimestamp',
      'EVENT_TIME_INVALID',
    ],
    [
      'gclid with gbraid',
      { events: [event({ adIdentifiers: { gclid: 'g', gbraid: 'b' } })] },
      'events[0].adIdentifiers',
      'INVALID_ARGUMENT',
    ],
    [
      'an unknown currency',
      { events: [event({ currency: 'EURO' })] },
      'events[0].currency',
      'INVALID_CURRENCY_CODE',
    ],
    [
      'a customer id with dashes',
      {
        destinations: [
          destination({ operatingAccount: { accountType: 'GOOGLE_ADS', accountId: '123-456-7890' } }),
        ],
      },
      'destinations[0].operatingAccount.accountId',
      'INVALID_ARGUMENT',
    ],
    [
      'an unknown conversion action',
      { destinations: [destination({ productDestinationId: '999' })] },
      'destinations[0].productDestinationId',
      'INVALID_CONVERSION_ACTION_ID',
    ],
    [
      'a missing account type',
      { destinations: [destination({ operatingAccount: { accountId: '1234567890' } })] },
      'destinations[0].operatingAccount.accountType',
      'REQUIRED_FIELD_MISSING',
    ],
    [
      'a reference no destination has',
      { events: [event({ destinationReferences: ['zz'] })] },
      'events[0].destinationReferences',
      'INVALID_DESTINATION',
    ],
    [
      'an unhashed e-mail',
      {
        encoding: 'HEX',
        events: [event({ userData: { userIdentifiers: [{ emailAddress: 'jane@example.com' }] } })],
      },
      'events[0].userData.userIdentifiers[0].emailAddress',
      'INVALID_FORMAT',
    ],
    [
      'an unhashed phone',
      {
        encoding: 'HEX',
        events: [event({ userData: { userIdentifiers: [{ phoneNumber: '+4915123456789' }] } })],
      },
      'events[0].userData.userIdentifiers[0].phoneNumber',
      'INVALID_FORMAT',
    ],
    [
      'a Gmail address hashed with its dots',
      {
        encoding: 'HEX',
        events: [event({ userData: { userIdentifiers: [{ emailAddress: sha('jane.doe@gmail.com') }] } })],
      },
      'events[0].userData.userIdentifiers[0].emailAddress',
      'INVALID_FORMAT',
    ],
    [
      'a phone hashed without its +',
      {
        encoding: 'HEX',
        events: [event({ userData: { userIdentifiers: [{ phoneNumber: sha('4915123456789') }] } })],
      },
      'events[0].userData.userIdentifiers[0].phoneNumber',
      'INVALID_FORMAT',
    ],
    [
      'user data without encoding',
      { events: [event({ userData: { userIdentifiers: [{ emailAddress: sha('a@b.c') }] } })] },
      'encoding',
      'REQUIRED_FIELD_MISSING',
    ],
    [
      'a bad IP address',
      {
        events: [event({ adIdentifiers: { gclid: 'g', landingPageDeviceInfo: { ipAddress: '999.1.1.1' } } })],
      },
      'events[0].adIdentifiers.landingPageDeviceInfo.ipAddress',
      'INVALID_FORMAT',
    ],
  ])('refuses %s with 400 INVALID_ARGUMENT naming the field', async (_name, over, field, reason) => {
    const res = await ingest({ destinations: [destination()], events: [event()], ...over });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' });
    expect(violations(res.body)).toContainEqual({ field, reason });
    expect(res.body.error.details[0]).toMatchObject({
      '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
      reason,
    });
    expect(dm.events()).toEqual([]);
  });

  it('fails the whole request for one bad event (fast-fail), naming its index', async () => {
    const res = await ingest({
      destinations: [destination()],
      events: [event(), event({ transactionId: 'o2', currency: 'XXY' }), event({ transactionId: 'o3' })],
    });
    expect(res.status).toBe(400);
    expect(violations(res.body)).toEqual([{ field: 'events[1].currency', reason: 'INVALID_CURRENCY_CODE' }]);
    expect(dm.events()).toEqual([]);
  });

  it('takes 2,000 events and refuses 2,001 with TOO_MANY_EVENTS', async () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => event({ transactionId: `o${i}` }));
    expect((await ingest({ destinations: [destination()], events: many(2000) })).status).toBe(200);
    const res = await ingest({ destinations: [destination()], events: many(2001) });
    expect(res.status).toBe(400);
    expect(violations(res.body)).toEqual([{ field: 'events', reason: 'TOO_MANY_EVENTS' }]);
  });

  it('refuses a missing token (401), an unknown one (401) and one without the datamanager scope (403)', async () => {
    const body = { destinations: [destination()], events: [event()] };
    const missing = await ingest(body, {});
    expect(missing.status).toBe(401);
    expect(missing.body.error.status).toBe('UNAUTHENTICATED');
    const unknown = await ingest(body, { authorization: 'Bearer nope' });
    expect(unknown.status).toBe(401);
    const scope = await ingest(body, { authorization: 'Bearer google-adwords-only-token' });
    expect(scope.status).toBe(403);
    expect(scope.body.error).toMatchObject({
      status: 'PERMISSION_DENIED',
      message: 'Request had insufficient authentication scopes.',
    });
    expect(scope.body.error.details[0].reason).toBe('ACCESS_TOKEN_SCOPE_INSUFFICIENT');
  });

  it('validateOnly checks and records nothing', async () => {
    const res = await ingest({ destinations: [destination()], events: [event()], validateOnly: true });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
    expect(dm.events()).toEqual([]);
    expect(dm.validated).toBe(1);
  });

  it('answers injected failures in google.rpc shapes: 429 with Retry-After, 503, 401', async () => {
    dm.failNext(1, { type: 'rateLimit', retryAfterSec: 7 })
      .failNext(1, { type: 'status', status: 503 })
      .failNext(1, { type: 'invalidToken' });
    const body = { destinations: [destination()], events: [event()] };
    const a = await ingest(body);
    expect([a.status, a.headers.get('retry-after'), a.body.error.status]).toEqual([
      429,
      '7',
      'RESOURCE_EXHAUSTED',
    ]);
    const b = await ingest(body);
    expect([b.status, b.body.error.status]).toEqual([503, 'UNAVAILABLE']);
    const c = await ingest(body);
    expect([c.status, c.body.error.status]).toEqual([401, 'UNAUTHENTICATED']);
    expect(dm.events()).toEqual([]);
  });
});

describe('Data Manager API fake: requestStatus:retrieve', () => {
  const status = (id: string) =>
    call(`${dm.url}/v1/requestStatus:retrieve?requestId=${id}`, { headers: AUTH });

  it('reports PROCESSING, then FAILED / PARTIAL_SUCCESS / SUCCESS per destination with error counts', async () => {
    dm.processingChecks = 1;
    dm.rejectLater('order-bad', 'PROCESSING_ERROR_REASON_CLICK_NOT_FOUND');
    const res = await ingest({
      destinations: [destination(), destination({ reference: 'b', productDestinationId: '556' })],
      events: [
        event({ transactionId: 'order-bad' }),
        event({ transactionId: 'order-ok', destinationReferences: ['b'] }),
      ],
    });
    const id = res.body.requestId as string;
    expect((await status(id)).body.requestStatusPerDestination.map((s: any) => s.requestStatus)).toEqual([
      'PROCESSING',
      'PROCESSING',
    ]);
    const settled = (await status(id)).body.requestStatusPerDestination;
    expect(settled[0]).toMatchObject({
      requestStatus: 'FAILED',
      errorInfo: { errorCounts: [{ recordCount: '1', reason: 'PROCESSING_ERROR_REASON_CLICK_NOT_FOUND' }] },
      eventsIngestionStatus: { recordCount: '1' },
    });
    expect(settled[1]).toMatchObject({ requestStatus: 'SUCCESS' });
    expect(settled[1].errorInfo).toBeUndefined();
  });

  it('an event whose transaction id an earlier request gave the destination fails as DUPLICATE_TRANSACTION_ID', async () => {
    const body = { destinations: [destination()], events: [event({ transactionId: 'order-twice' })] };
    const first = (await ingest(body)).body.requestId as string;
    const second = (await ingest(body)).body.requestId as string;
    expect((await status(first)).body.requestStatusPerDestination[0].requestStatus).toBe('SUCCESS');
    expect((await status(second)).body.requestStatusPerDestination[0]).toMatchObject({
      requestStatus: 'FAILED',
      errorInfo: {
        errorCounts: [{ recordCount: '1', reason: 'PROCESSING_ERROR_REASON_DUPLICATE_TRANSACTION_ID' }],
      },
    });
    expect(dm.events().map((e) => e.duplicate)).toEqual([undefined, true]);
  });

  it('refuses an unknown request id with INVALID_REQUEST_ID, and a token without the scope', async () => {
    const res = await status('00000000-0000-0000-0000-000000000000');
    expect(res.status).toBe(400);
    expect(violations(res.body)).toEqual([{ field: 'request_id', reason: 'INVALID_REQUEST_ID' }]);
    const scope = await call(`${dm.url}/v1/requestStatus:retrieve?requestId=x`, {
      headers: { authorization: 'Bearer google-adwords-only-token' },
    });
    expect(scope.status).toBe(403);
  });
});
