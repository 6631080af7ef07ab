import { describe, expect, it } from 'vitest';
import { tiktokAdapter } from '../../../backend/platforms/tiktok.js';
import type { DeliveryEvent, PixelConfig } from '../../../backend/platforms/types.js';
import { DAY, HASH, NOW, NOW_S, UA, deliveredAll, event, failAll, reply, retryAll } from './fixtures.js';

const BASE = 'https://tiktok.example.test';
const pixel: PixelConfig = { platform: 'tiktok', pixelCode: 'CPIXEL123', accessToken: 'tt-token' };

function body(events: DeliveryEvent[], p: PixelConfig = pixel): unknown {
  return JSON.parse(tiktokAdapter.buildRequest(events, p, BASE).body);
}

describe('tiktok buildRequest', () => {
  it('builds the Events API 2.0 request with the E.164 phone hash and test_event_code at the top', () => {
    const e = event({
      eventId: 'cnv_9',
      eventType: 'Purchase',
      eventTimeMs: NOW - 60_001,
      referrer: 'https://www.tiktok.com/',
      clientIp: '203.0.113.7',
      ttclid: 'E.C.P.AbC-123',
      ttp: '2Qx_ttp-Cookie',
      fbc: 'fb.1.1.ignored',
      hashed: { em: HASH.email, ph: HASH.ph, phE164: HASH.phE164, fn: HASH.fn, externalId: HASH.externalId },
      value: 19.99,
      currency: 'usd',
      contentName: 'VIP',
    });
    const req = tiktokAdapter.buildRequest([e], { ...pixel, testEventCode: 'TEST42' }, `${BASE}/`);
    expect(req.url).toBe(`${BASE}/open_api/v1.3/event/track/`);
    expect(req.headers).toEqual({ 'content-type': 'application/json', 'access-token': 'tt-token' });
    expect(req.body).toBe(
      JSON.stringify({
        event_source: 'web',
        event_source_id: 'CPIXEL123',
        test_event_code: 'TEST42',
        data: [
          {
            event: 'Purchase',
            event_time: NOW_S - 61,
            event_id: 'cnv_9',
            user: {
              email: HASH.email,
              phone: HASH.phE164,
              external_id: [HASH.externalId],
              first_name: '6915771be1c5aa0c886870b6951b03d7eafc121fea0e80a5ea83beb7c449f4ec',
              ttclid: 'E.C.P.AbC-123',
              ttp: '2Qx_ttp-Cookie',
              ip: '203.0.113.7',
              user_agent: UA,
            },
            page: {
              url: 'https://shop.example.com/landing?fbclid=IwAR2F4-AbC_dEf',
              referrer: 'https://www.tiktok.com/',
            },
            properties: { value: 19.99, currency: 'USD', content_name: 'VIP' },
          },
        ],
      }),
    );
  });

  it('sends no phone when only the Meta-form hash is known, and no empty properties', () => {
    const e = event({ eventType: 'Lead', hashed: { ph: HASH.ph } });
    expect(body([e])).toStrictEqual({
      event_source: 'web',
      event_source_id: 'CPIXEL123',
      data: [
        {
          event: 'Lead',
          event_time: NOW_S,
          event_id: 'cnv_1',
          user: { user_agent: UA },
          page: { url: 'https://shop.example.com/landing?fbclid=IwAR2F4-AbC_dEf' },
        },
      ],
    });
  });

  it.each([
    ['PageView', null, 'Pageview'],
    ['Contact', null, 'Contact'],
    ['Lead', null, 'Lead'],
    ['Purchase', null, 'Purchase'],
    ['CompleteRegistration', null, 'CompleteRegistration'],
    ['Subscribe', null, 'Subscribe'],
    ['Custom', 'JoinedVip', 'JoinedVip'],
  ] as const)('names %s as %s', (eventType, customEventName, name) => {
    const data = (body([event({ eventType, customEventName })]) as { data: Array<{ event: string }> }).data;
    expect(data[0]?.event).toBe(name);
  });

  it("honours apiVersion and rejects another platform's pixel or too big a batch", () => {
    expect(tiktokAdapter.buildRequest([event()], pixel, BASE, { apiVersion: 'v1.4' }).url).toBe(
      `${BASE}/open_api/v1.4/event/track/`,
    );
    expect(() =>
      tiktokAdapter.buildRequest([event()], { platform: 'meta', pixelId: 'p', accessToken: 't' }, BASE),
    ).toThrow(TypeError);
    expect(() =>
      tiktokAdapter.buildRequest(
        Array.from({ length: 1001 }, () => event()),
        pixel,
        BASE,
      ),
    ).toThrow(RangeError);
  });
});

describe('tiktok precheck', () => {
  it.each<[string, Partial<DeliveryEvent>, { ok: true } | { ok: false; skipReason: string }]>([
    ['a complete event', {}, { ok: true }],
    ['an event exactly 7 days old', { eventTimeMs: NOW - 7 * DAY }, { ok: true }],
    [
      'an event older than 7 days',
      { eventTimeMs: NOW - 7 * DAY - 1 },
      { ok: false, skipReason: "event is older than TikTok's 7-day window" },
    ],
    [
      'an event in the future',
      { eventTimeMs: NOW + 10 * 60_000 },
      { ok: false, skipReason: 'event time is more than 5 minutes in the future' },
    ],
    [
      'no user agent',
      { userAgent: undefined },
      { ok: false, skipReason: 'missing user agent (required for website events)' },
    ],
    [
      'no page URL',
      { eventSourceUrl: '' },
      { ok: false, skipReason: 'missing event source URL (required for website events)' },
    ],
    [
      'a Custom event without name',
      { eventType: 'Custom' },
      { ok: false, skipReason: 'Custom event without customEventName' },
    ],
    ['a Purchase without value (TikTok allows it)', { eventType: 'Purchase' }, { ok: true }],
  ])('%s', (_name, overrides, expected) => {
    expect(tiktokAdapter.precheck(event({ eventTimeMs: NOW, ...overrides }), NOW)).toStrictEqual(expected);
  });
});

describe('tiktok classify', () => {
  const one = [event({ eventId: 'e1' })];
  const two = [event({ eventId: 'e1' }), event({ eventId: 'e2' })];
  const envelope = (code: number, message: string) => ({ code, message, request_id: 'r1', data: {} });

  it('200 with code 0 → delivered', () => {
    expect(tiktokAdapter.classify(reply(200, envelope(0, 'OK')), two, NOW)).toStrictEqual(deliveredAll(two));
  });

  it.each([
    [40100, 'Too many requests. Please retry in some time.'],
    [40700, 'Internal service error. Please retry later.'],
  ])('200 with code %i → retry', (code, message) => {
    expect(tiktokAdapter.classify(reply(200, envelope(code, message)), two, NOW)).toStrictEqual(
      retryAll(two, `${message} (code ${code})`),
    );
  });

  it('a retry honours Retry-After', () => {
    const res = reply(200, envelope(40100, 'Too many requests.'), { 'retry-after': '7' });
    expect(tiktokAdapter.classify(res, one, NOW)).toStrictEqual(
      retryAll(one, 'Too many requests. (code 40100)', 7000),
    );
  });

  it('code 40002 (invalid) → failed, isolating in a batch', () => {
    const res = reply(200, envelope(40002, 'data[1].event_time: Not a valid integer (Unix seconds).'));
    const text = 'data[1].event_time: Not a valid integer (Unix seconds). (code 40002)';
    expect(tiktokAdapter.classify(res, two, NOW)).toStrictEqual(failAll(two, text, true));
    expect(tiktokAdapter.classify(res, one, NOW)).toStrictEqual(failAll(one, text));
  });

  it.each([
    [40001, 'No permission to operate pixel code: CPIXEL123'],
    [40104, 'Access token is null, please check.'],
    [40105, 'Access token is incorrect or has been revoked.'],
    [51234, 'Something else'],
  ])('code %i → failed without isolation', (code, message) => {
    expect(tiktokAdapter.classify(reply(200, envelope(code, message)), two, NOW)).toStrictEqual(
      failAll(two, `${message} (code ${code})`),
    );
  });

  it('a code without a message still names the code', () => {
    expect(tiktokAdapter.classify(reply(200, { code: 40001 }), one, NOW)).toStrictEqual(
      failAll(one, 'error (code 40001)'),
    );
  });

  it.each([
    [{ networkError: 'ECONNRESET' }, 'network error: ECONNRESET', undefined],
    [reply(500, 'oops'), 'HTTP 500: oops', undefined],
    [reply(503, '', { 'Retry-After': '3' }), 'HTTP 503', 3000],
    [reply(429, 'slow down'), 'HTTP 429: slow down', undefined],
    [reply(200, '<html>proxy</html>'), 'HTTP 200: unexpected body: <html>proxy</html>', undefined],
  ])('transport trouble %# → retry', (res, error, delay) => {
    expect(tiktokAdapter.classify(res, one, NOW)).toStrictEqual(retryAll(one, error, delay));
  });

  it('a non-2xx 4xx → failed', () => {
    expect(tiktokAdapter.classify(reply(404, { code: 40400, message: 'Not found' }), two, NOW)).toStrictEqual(
      failAll(two, 'HTTP 404: {"code":40400,"message":"Not found"}'),
    );
  });
});
