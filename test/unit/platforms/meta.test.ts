import { describe, expect, it } from 'vitest';
import { META_RETRY_CODES, metaAdapter, metaUsageDelayMs } from '../../../backend/platforms/meta.js';
import type { DeliveryEvent, PixelConfig } from '../../../backend/platforms/types.js';
import {
  DAY,
  FBC,
  FBP,
  HASH,
  NOW,
  NOW_S,
  UA,
  deliveredAll,
  event,
  failAll,
  reply,
  retryAll,
} from './fixtures.js';

const BASE = 'https://graph.example.test';
const pixel: PixelConfig = { platform: 'meta', pixelId: '1234567890', accessToken: 'EAAB-token' };

function body(events: DeliveryEvent[], p: PixelConfig = pixel, opts = {}): unknown {
  return JSON.parse(metaAdapter.buildRequest(events, p, BASE, opts).body);
}

describe('meta buildRequest', () => {
  it("reproduces the PLATFORMS.md sample byte for byte, with the visit's referrer as referrer_url", () => {
    const sample = `{"data":[{"event_name":"Subscribe","event_time":1763776800,"event_id":"cnv_01JD…",
      "action_source":"website","event_source_url":"https://shop.example.com/landing?fbclid=IwAR2F4",
      "referrer_url":"https://l.facebook.com/",
      "user_data":{"fbc":"fb.1.1763776512345.IwAR2F4","fbp":"fb.1.1763776500000.1116446470",
        "client_ip_address":"203.0.113.7","client_user_agent":"Mozilla/5.0 (iPhone; …)",
        "external_id":["9f86d08…"]},
      "custom_data":{"content_name":"Main channel"}}],
     "test_event_code":"TEST123"}`;
    const req = metaAdapter.buildRequest(
      [
        {
          eventId: 'cnv_01JD…',
          eventType: 'Subscribe',
          eventTimeMs: 1_763_776_800_999,
          eventSourceUrl: 'https://shop.example.com/landing?fbclid=IwAR2F4',
          referrer: 'https://l.facebook.com/',
          clientIp: '203.0.113.7',
          userAgent: 'Mozilla/5.0 (iPhone; …)',
          fbc: 'fb.1.1763776512345.IwAR2F4',
          fbp: 'fb.1.1763776500000.1116446470',
          gclid: null,
          ttclid: null,
          sccid: null,
          hashed: { externalId: '9f86d08…' },
          value: null,
          currency: null,
          contentName: 'Main channel',
          orderId: 'cnv_01JD…',
        },
      ],
      { ...pixel, accessToken: 'EAAB…', testEventCode: 'TEST123' },
      BASE,
      { apiVersion: 'v21.0' },
    );
    expect(req.body).toBe(JSON.stringify(JSON.parse(sample)));
    expect(req.method).toBe('POST');
    expect(req.url).toBe(`${BASE}/v21.0/1234567890/events?access_token=${encodeURIComponent('EAAB…')}`);
    expect(req.headers).toEqual({ 'content-type': 'application/json' });
  });

  it('sends a Purchase with hashes as given, click ids, IP and UA untouched, and money in custom_data', () => {
    const e = event({
      eventId: 'cnv_purchase',
      eventType: 'Purchase',
      eventTimeMs: NOW - 1500,
      clientIp: '2001:db8::1',
      fbc: FBC,
      fbp: FBP,
      gclid: 'gclid-ignored',
      ttclid: 'ttclid-ignored',
      hashed: {
        em: HASH.email,
        ph: HASH.ph,
        phE164: HASH.phE164,
        fn: HASH.fn,
        ln: HASH.ln,
        externalId: HASH.externalId,
      },
      value: 49.9,
      currency: 'eur',
      contentName: 'VIP channel',
    });
    expect(body([e])).toStrictEqual({
      data: [
        {
          event_name: 'Purchase',
          event_time: NOW_S - 2,
          event_id: 'cnv_purchase',
          action_source: 'website',
          event_source_url: 'https://shop.example.com/landing?fbclid=IwAR2F4-AbC_dEf',
          user_data: {
            em: [HASH.email],
            ph: [HASH.ph],
            fn: [HASH.fn],
            ln: [HASH.ln],
            fbc: FBC,
            fbp: FBP,
            client_ip_address: '2001:db8::1',
            client_user_agent: UA,
            external_id: [HASH.externalId],
          },
          custom_data: { value: 49.9, currency: 'EUR', content_name: 'VIP channel' },
        },
      ],
    });
  });

  it.each([
    ['PageView', null, 'PageView'],
    ['Contact', null, 'Contact'],
    ['Lead', null, 'Lead'],
    ['Purchase', null, 'Purchase'],
    ['CompleteRegistration', null, 'CompleteRegistration'],
    ['Subscribe', null, 'Subscribe'],
    ['Custom', 'JoinedVipChannel', 'JoinedVipChannel'],
  ] as const)('names %s as %s', (eventType, customEventName, name) => {
    const e = event({ eventType, customEventName, value: 1, currency: 'USD' });
    expect((body([e]) as { data: Array<{ event_name: string }> }).data[0]?.event_name).toBe(name);
  });

  it('leaves out custom_data, test_event_code and empty fields when there is nothing to send', () => {
    const e = event({
      eventType: 'PageView',
      clientIp: '',
      fbc: null,
      contentName: '  ',
      value: 10,
      currency: null,
    });
    expect(body([e], { ...pixel, testEventCode: null })).toStrictEqual({
      data: [
        {
          event_name: 'PageView',
          event_time: NOW_S,
          event_id: 'cnv_1',
          action_source: 'website',
          event_source_url: 'https://shop.example.com/landing?fbclid=IwAR2F4-AbC_dEf',
          user_data: { client_user_agent: UA },
        },
      ],
    });
  });

  it('keeps the order and ids of a batch, and uses the default version', () => {
    const events = [event({ eventId: 'a' }), event({ eventId: 'b', eventType: 'Lead' })];
    const req = metaAdapter.buildRequest(events, pixel, `${BASE}/`);
    expect(req.url).toBe(`${BASE}/v26.0/1234567890/events?access_token=EAAB-token`);
    const data = (JSON.parse(req.body) as { data: Array<{ event_id: string; event_name: string }> }).data;
    expect(data.map((d) => [d.event_id, d.event_name])).toEqual([
      ['a', 'Subscribe'],
      ['b', 'Lead'],
    ]);
  });

  it("rejects programming errors: another platform's pixel, an empty or oversized batch, a nameless Custom", () => {
    expect(() =>
      metaAdapter.buildRequest([event()], { platform: 'snapchat', pixelId: 'p', accessToken: 't' }, BASE),
    ).toThrow(TypeError);
    expect(() => metaAdapter.buildRequest([], pixel, BASE)).toThrow(RangeError);
    expect(() =>
      metaAdapter.buildRequest(
        Array.from({ length: 1001 }, () => event()),
        pixel,
        BASE,
      ),
    ).toThrow(RangeError);
    expect(() => metaAdapter.buildRequest([event({ eventType: 'Custom' })], pixel, BASE)).toThrow(
      /customEventName/,
    );
  });
});

describe('meta precheck', () => {
  it.each<[string, Partial<DeliveryEvent>, { ok: true } | { ok: false; skipReason: string }]>([
    ['a complete event', {}, { ok: true }],
    ['an event exactly 7 days old', { eventTimeMs: NOW - 7 * DAY }, { ok: true }],
    [
      'an event 7 days and 1 ms old',
      { eventTimeMs: NOW - 7 * DAY - 1 },
      { ok: false, skipReason: "event is older than Meta's 7-day window" },
    ],
    ['an event 5 minutes ahead', { eventTimeMs: NOW + 5 * 60_000 }, { ok: true }],
    [
      'an event further ahead',
      { eventTimeMs: NOW + 5 * 60_000 + 1 },
      { ok: false, skipReason: 'event time is more than 5 minutes in the future' },
    ],
    ['a NaN time', { eventTimeMs: Number.NaN }, { ok: false, skipReason: 'event time is not a number' }],
    [
      'no user agent',
      { userAgent: null },
      { ok: false, skipReason: 'missing user agent (required for website events)' },
    ],
    [
      'a blank user agent',
      { userAgent: '  ' },
      { ok: false, skipReason: 'missing user agent (required for website events)' },
    ],
    [
      'no source URL',
      { eventSourceUrl: undefined },
      { ok: false, skipReason: 'missing event source URL (required for website events)' },
    ],
    [
      'a Custom event without name',
      { eventType: 'Custom', customEventName: ' ' },
      { ok: false, skipReason: 'Custom event without customEventName' },
    ],
    ['a named Custom event', { eventType: 'Custom', customEventName: 'Vip' }, { ok: true }],
    [
      'a Purchase without currency',
      { eventType: 'Purchase', value: 5 },
      { ok: false, skipReason: 'Purchase requires value and currency' },
    ],
    [
      'a Purchase without value',
      { eventType: 'Purchase', currency: 'USD' },
      { ok: false, skipReason: 'Purchase requires value and currency' },
    ],
    ['a Purchase with both', { eventType: 'Purchase', value: 0, currency: 'USD' }, { ok: true }],
    ['no gclid (Meta does not need one)', { gclid: null }, { ok: true }],
  ])('%s', (_name, overrides, expected) => {
    expect(metaAdapter.precheck(event({ eventTimeMs: NOW, ...overrides }), NOW)).toStrictEqual(expected);
  });

  it('is usable detached from the adapter object', () => {
    const { precheck } = metaAdapter;
    expect(precheck(event({ userAgent: null }), NOW)).toStrictEqual({
      ok: false,
      skipReason: 'missing user agent (required for website events)',
    });
  });
});

function graphError(code: number, extra: Record<string, unknown> = {}) {
  return {
    error: { message: 'Invalid parameter', type: 'OAuthException', code, fbtrace_id: 'AbC', ...extra },
  };
}

describe('meta classify', () => {
  const one = [event({ eventId: 'e1' })];
  const two = [event({ eventId: 'e1' }), event({ eventId: 'e2' })];

  it('2xx → delivered', () => {
    expect(
      metaAdapter.classify(reply(200, { events_received: 2, messages: [], fbtrace_id: 'x' }), two, NOW),
    ).toStrictEqual(deliveredAll(two));
  });

  it('network error → retry', () => {
    expect(metaAdapter.classify({ networkError: 'ETIMEDOUT after 1500 ms' }, two, NOW)).toStrictEqual(
      retryAll(two, 'network error: ETIMEDOUT after 1500 ms'),
    );
  });

  it.each([...META_RETRY_CODES])('code %i → retry', (code) => {
    const res = reply(400, graphError(code, { message: 'Temporary', is_transient: false }));
    expect(metaAdapter.classify(res, two, NOW)).toStrictEqual(retryAll(two, `Temporary (code ${code})`));
  });

  it('is_transient: true → retry whatever the code', () => {
    const res = reply(400, graphError(999, { message: 'Please retry', is_transient: true }));
    expect(metaAdapter.classify(res, one, NOW)).toStrictEqual(retryAll(one, 'Please retry (code 999)'));
  });

  it('5xx → retry, honouring Retry-After in seconds', () => {
    const res = reply(
      503,
      graphError(2, { message: 'Service temporarily unavailable', is_transient: true }),
      { 'Retry-After': '120' },
    );
    expect(metaAdapter.classify(res, one, NOW)).toStrictEqual(
      retryAll(one, 'Service temporarily unavailable (code 2)', 120_000),
    );
  });

  it('5xx with an HTML body → retry with the body as the error', () => {
    const res = reply(502, '<html>Bad Gateway</html>', { 'retry-after': 'Sat, 22 Nov 2025 02:00:30 GMT' });
    expect(metaAdapter.classify(res, one, NOW)).toStrictEqual(
      retryAll(one, 'HTTP 502: <html>Bad Gateway</html>', 30_000),
    );
  });

  it("throttling without Retry-After → retry after the usage header's estimated_time_to_regain_access", () => {
    const usage = JSON.stringify({
      '1234567890': [{ type: 'ads_management', call_count: 100, estimated_time_to_regain_access: 3 }],
    });
    const res = reply(
      429,
      graphError(17, { message: 'User request limit reached', error_subcode: 2446079, is_transient: true }),
      {
        'x-business-use-case-usage': usage,
      },
    );
    expect(metaAdapter.classify(res, two, NOW)).toStrictEqual(
      retryAll(two, 'User request limit reached (code 17/2446079)', 180_000),
    );
  });

  it('code 100 → failed with message and user message, isolating when the batch has several events', () => {
    const err = graphError(100, {
      error_subcode: 2804003,
      error_user_title: 'Event Timestamp Too Old',
      error_user_msg: 'The timestamp for this event is too far in the past.',
    });
    const text = 'Invalid parameter (code 100/2804003): The timestamp for this event is too far in the past.';
    expect(metaAdapter.classify(reply(400, err), two, NOW)).toStrictEqual(failAll(two, text, true));
    expect(metaAdapter.classify(reply(400, err), one, NOW)).toStrictEqual(failAll(one, text));
  });

  it('code 190 (bad token) → failed, no isolation: every event would fail the same way', () => {
    const res = reply(
      401,
      graphError(190, { message: 'Error validating access token: Session has expired.', error_subcode: 463 }),
    );
    expect(metaAdapter.classify(res, two, NOW)).toStrictEqual(
      failAll(two, 'Error validating access token: Session has expired. (code 190/463)'),
    );
  });

  it.each([
    [403, graphError(10, { message: 'Permission denied' }), 'Permission denied (code 10)'],
    [400, 'Bad Request', 'HTTP 400: Bad Request'],
    [404, '', 'HTTP 404'],
    [400, { error: { code: 100 } }, 'HTTP 400: {"error":{"code":100}}'],
  ])('other 4xx (%i) → failed', (status, b, text) => {
    expect(metaAdapter.classify(reply(status, b), one, NOW)).toStrictEqual(failAll(one, text));
  });

  it('cuts very long errors to 500 characters', () => {
    const res = reply(400, graphError(200, { message: 'x'.repeat(2000) }));
    const [o] = metaAdapter.classify(res, one, NOW);
    expect(o?.outcome).toBe('failed');
    expect(o && 'error' in o ? o.error.length : 0).toBe(500);
  });
});

describe('metaUsageDelayMs', () => {
  it.each([
    [{}, undefined],
    [{ 'x-business-use-case-usage': 'not json' }, undefined],
    [
      { 'X-Business-Use-Case-Usage': JSON.stringify({ a: [{ estimated_time_to_regain_access: 0 }] }) },
      undefined,
    ],
    [
      {
        'x-business-use-case-usage': JSON.stringify({
          a: [{ estimated_time_to_regain_access: 2 }],
          b: [{ estimated_time_to_regain_access: 5 }],
        }),
      },
      300_000,
    ],
  ])('%j → %s', (headers, expected) => {
    expect(metaUsageDelayMs(headers)).toBe(expected);
  });
});
