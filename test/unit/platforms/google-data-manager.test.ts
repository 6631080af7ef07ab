import { describe, expect, it } from 'vitest';
import { parseRequestStatus } from '../../../backend/delivery/google-diagnostics.js';
import {
  dataManagerEvent,
  googleDataManagerAdapter as dm,
  productDestinationId,
  violationEventIndex,
} from '../../../backend/platforms/google-data-manager.js';
import { googleAdapter } from '../../../backend/platforms/google.js';
import { adapterForPixel } from '../../../backend/platforms/index.js';
import { type DeliveryEvent, type PixelConfig, pixelConfigSchema } from '../../../backend/platforms/types.js';
import { checkIngestRequest } from '../../../backend/sandbox/google-data-manager.js';
import { HASH, NOW, UA, deliveredAll, event, failAll, reply, retryAll } from './fixtures.js';

const BASE = 'https://datamanager.example.test/';
const pixel: PixelConfig = {
  platform: 'google',
  api: 'data-manager',
  customerId: '123-456-7890',
  conversionActions: { Purchase: 'customers/1234567890/conversionActions/222', Subscribe: '111' },
  oauthToken: 'ya29.token',
};
const gEvent = (o: Partial<DeliveryEvent> = {}) => event({ gclid: 'Cj0-1', eventTimeMs: NOW, ...o });

describe('a Google pixel chooses its API', () => {
  it.each([
    ['stored before the choice (no api): the Google Ads API', { developerToken: 'd' }, googleAdapter],
    ['api ads', { api: 'ads', developerToken: 'd' }, googleAdapter],
    ['api data-manager, no developer token', { api: 'data-manager' }, dm],
  ])('%s', (_name, extra, adapter) => {
    const config = pixelConfigSchema.parse({
      platform: 'google',
      customerId: '1234567890',
      conversionActions: { '*': '1' },
      oauthToken: 'o',
      ...extra,
    });
    expect(adapterForPixel(config)).toBe(adapter);
  });

  it('an ads pixel without a developer token cannot be read', () => {
    const r = pixelConfigSchema.safeParse({
      platform: 'google',
      customerId: '1',
      conversionActions: { '*': '1' },
      oauthToken: 'o',
    });
    expect(r.success).toBe(false);
  });
});

describe('Data Manager events', () => {
  it.each([
    ['customers/1234567890/conversionActions/222', '222'],
    ['222', '222'],
    [' 333 ', '333'],
  ])('productDestinationId(%s) = %s', (action, id) => expect(productDestinationId(action)).toBe(id));

  it.each([
    ['website', 'WEB'],
    ['chat', 'MESSAGE'],
    ['system_generated', 'OTHER'],
  ] as const)('action source %s → eventSource %s', (source, expected) => {
    expect(dataManagerEvent(gEvent({ actionSource: source }), 'r').eventSource).toBe(expected);
  });

  it.each([
    [
      { adUserDataConsent: 'GRANTED', adPersonalizationConsent: 'DENIED' },
      undefined,
      { adUserData: 'CONSENT_GRANTED', adPersonalization: 'CONSENT_DENIED' },
    ],
    [{}, 'DENIED', { adUserData: 'CONSENT_DENIED' }],
    [{ adUserDataConsent: 'GRANTED' }, 'DENIED', { adUserData: 'CONSENT_GRANTED' }],
    [{ adPersonalizationConsent: 'GRANTED' }, undefined, { adPersonalization: 'CONSENT_GRANTED' }],
    [{}, undefined, undefined],
  ] as const)('consent %j with default %s → %j', (e, fallback, consent) => {
    expect(dataManagerEvent(gEvent(e), 'r', fallback).consent).toEqual(consent);
  });

  it('the click id alone when adUserData is denied: no identifiers, no device', () => {
    const e = dataManagerEvent(
      gEvent({
        adUserDataConsent: 'DENIED',
        landingIp: '203.0.113.7',
        hashed: { emGoogle: HASH.email, phE164: HASH.phE164 },
      }),
      'r',
    );
    expect(e.adIdentifiers).toEqual({ gclid: 'Cj0-1' });
    expect(e.userData).toBeUndefined();
  });

  it('the order id is the transaction id; the event id without one; a value without currency is left out', () => {
    expect(dataManagerEvent(gEvent({ orderId: 'order-9' }), 'r').transactionId).toBe('order-9');
    const plain = dataManagerEvent(gEvent({ eventId: 'cnv_7', value: 10, currency: null }), 'r');
    expect(plain.transactionId).toBe('cnv_7');
    expect(plain.conversionValue).toBeUndefined();
    expect(plain.currency).toBeUndefined();
  });

  it('a wbraid is sent when there is no gclid or gbraid, with the landing device', () => {
    const e = dataManagerEvent(event({ wbraid: 'wb-1', landingIp: '2001:db8::1', eventTimeMs: NOW }), 'r');
    expect(e.adIdentifiers).toEqual({
      wbraid: 'wb-1',
      landingPageDeviceInfo: { userAgent: UA, ipAddress: '2001:db8::1' },
    });
    expect(e.eventTimestamp).toBe('2025-11-22T02:00:00.000Z');
  });
});

describe('googleDataManagerAdapter.buildRequest', () => {
  it('one destination per action, references, HEX encoding, bearer token and no developer token; the sandbox rules accept it', () => {
    const events = [
      gEvent({
        eventId: 'a',
        eventType: 'Purchase',
        value: 5,
        currency: 'eur',
        hashed: { emGoogle: HASH.email },
      }),
      gEvent({ eventId: 'b', eventType: 'Subscribe', gclid: null, gbraid: 'gb-1' }),
      gEvent({ eventId: 'c', eventType: 'Purchase', value: 7, currency: 'USD' }),
    ];
    const spec = dm.buildRequest(events, { ...pixel, loginCustomerId: '999-888-7777' }, BASE, {
      adUserDataConsent: 'GRANTED',
    });
    expect(spec.url).toBe('https://datamanager.example.test/v1/events:ingest');
    expect(spec.headers).toEqual({ 'content-type': 'application/json', authorization: 'Bearer ya29.token' });
    const body = JSON.parse(spec.body);
    expect(body.destinations).toEqual([
      {
        reference: 'action-222',
        operatingAccount: { accountType: 'GOOGLE_ADS', accountId: '1234567890' },
        loginAccount: { accountType: 'GOOGLE_ADS', accountId: '9998887777' },
        productDestinationId: '222',
      },
      {
        reference: 'action-111',
        operatingAccount: { accountType: 'GOOGLE_ADS', accountId: '1234567890' },
        loginAccount: { accountType: 'GOOGLE_ADS', accountId: '9998887777' },
        productDestinationId: '111',
      },
    ]);
    expect(body.events.map((e: { destinationReferences: string[] }) => e.destinationReferences[0])).toEqual([
      'action-222',
      'action-111',
      'action-222',
    ]);
    expect(body.encoding).toBe('HEX');
    expect(body.events[0].userData).toEqual({ userIdentifiers: [{ emailAddress: HASH.email }] });
    expect(checkIngestRequest(body, { nowMs: NOW })).toEqual([]);
  });

  it('validateOnly for a pixel in test mode; no encoding without user data', () => {
    const body = JSON.parse(
      dm.buildRequest([gEvent({ eventType: 'Subscribe' })], { ...pixel, validateOnly: true }, BASE).body,
    );
    expect(body.validateOnly).toBe(true);
    expect(body.encoding).toBeUndefined();
  });
});

describe('googleDataManagerAdapter.precheck', () => {
  it.each([
    ['a gclid', gEvent({ eventType: 'Purchase' }), true],
    ['only an e-mail', event({ eventType: 'Purchase', eventTimeMs: NOW, hashed: { em: HASH.email } }), true],
    [
      'only an e-mail, adUserData denied',
      event({
        eventType: 'Purchase',
        eventTimeMs: NOW,
        hashed: { em: HASH.email },
        adUserDataConsent: 'DENIED',
      }),
      false,
    ],
    ['nothing to match', event({ eventType: 'Purchase', eventTimeMs: NOW }), false],
    ['a PageView', gEvent({ eventType: 'PageView' }), false],
    ['an unmapped Lead', gEvent({ eventType: 'Lead' }), false],
  ])('%s → ok %s', (_name, e, ok) => {
    expect(dm.precheck(e, NOW, pixel).ok).toBe(ok);
  });
});

describe('googleDataManagerAdapter.classify', () => {
  const two = [gEvent({ eventId: 'a' }), gEvent({ eventId: 'b' })];
  const badRequest = (field: string) => ({
    error: {
      code: 400,
      status: 'INVALID_ARGUMENT',
      message: 'Request contains an invalid argument.',
      details: [
        { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'INVALID_CURRENCY_CODE' },
        {
          '@type': 'type.googleapis.com/google.rpc.BadRequest',
          fieldViolations: [{ field, description: 'bad' }],
        },
      ],
    },
  });

  it.each([
    ['200 with a requestId: delivered', reply(200, { requestId: 'r' }), deliveredAll(two)],
    [
      '400 naming an event: failed, split to find it',
      reply(400, badRequest('events[1].currency')),
      failAll(
        two,
        'HTTP 400: INVALID_ARGUMENT: Request contains an invalid argument. (INVALID_CURRENCY_CODE; events[1].currency: bad)',
        true,
      ),
    ],
    [
      '400 naming a destination: failed as a whole',
      reply(400, badRequest('destinations[0].productDestinationId')),
      failAll(
        two,
        'HTTP 400: INVALID_ARGUMENT: Request contains an invalid argument. (INVALID_CURRENCY_CODE; destinations[0].productDestinationId: bad)',
      ),
    ],
    [
      '403 (the scope): failed as a whole',
      reply(403, {
        error: {
          code: 403,
          status: 'PERMISSION_DENIED',
          message: 'Request had insufficient authentication scopes.',
        },
      }),
      failAll(two, 'HTTP 403: PERMISSION_DENIED: Request had insufficient authentication scopes.'),
    ],
    [
      '429 with Retry-After: retried then',
      reply(429, { error: { status: 'RESOURCE_EXHAUSTED', message: 'q' } }, { 'retry-after': '7' }),
      retryAll(two, 'HTTP 429: RESOURCE_EXHAUSTED: q', 7000),
    ],
    ['503: retried', reply(503, '<html>down</html>'), retryAll(two, 'HTTP 503: <html>down</html>')],
    ['no answer: retried', { networkError: 'timeout' }, retryAll(two, 'network error: timeout')],
  ])('%s', (_name, res, outcomes) => {
    expect(dm.classify(res, two, NOW)).toEqual(outcomes);
  });

  it.each([
    ['events[12].userData.userIdentifiers[0].emailAddress', 12],
    ['events[0]', 0],
    ['destinations[0]', undefined],
    ['encoding', undefined],
  ])('violationEventIndex(%s) = %s', (field, index) => expect(violationEventIndex(field)).toBe(index));
});

describe('parseRequestStatus', () => {
  it('a duplicate transaction id is an event Google already has: not a failure', () => {
    const dup = { recordCount: '1', reason: 'PROCESSING_ERROR_REASON_DUPLICATE_TRANSACTION_ID' };
    expect(
      parseRequestStatus({
        requestStatusPerDestination: [
          { requestStatus: 'FAILED', errorInfo: { errorCounts: [dup] } },
          {
            requestStatus: 'FAILED',
            errorInfo: {
              errorCounts: [dup, { recordCount: '1', reason: 'PROCESSING_ERROR_REASON_EVENT_TOO_OLD' }],
            },
          },
        ],
      }),
    ).toEqual([
      { requestStatus: 'SUCCESS', errors: [], failedRecords: 0 },
      { requestStatus: 'FAILED', errors: ['PROCESSING_ERROR_REASON_EVENT_TOO_OLD ×1'], failedRecords: 1 },
    ]);
  });

  it('reads each destination status and its error counts', () => {
    expect(
      parseRequestStatus({
        requestStatusPerDestination: [
          {
            requestStatus: 'FAILED',
            errorInfo: {
              errorCounts: [{ recordCount: '2', reason: 'PROCESSING_ERROR_REASON_CLICK_NOT_FOUND' }],
            },
          },
          { requestStatus: 'SUCCESS' },
        ],
      }),
    ).toEqual([
      { requestStatus: 'FAILED', errors: ['PROCESSING_ERROR_REASON_CLICK_NOT_FOUND ×2'], failedRecords: 2 },
      { requestStatus: 'SUCCESS', errors: [], failedRecords: 0 },
    ]);
  });
});
