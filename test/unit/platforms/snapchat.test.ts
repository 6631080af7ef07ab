import { describe, expect, it } from 'vitest';
import { snapchatAdapter } from '../../../backend/platforms/snapchat.js';
import type { DeliveryEvent, PixelConfig } from '../../../backend/platforms/types.js';
import { DAY, HASH, NOW, NOW_S, UA, deliveredAll, event, failAll, reply, retryAll } from './fixtures.js';

const BASE = 'https://snap.example.test';
const pixel: PixelConfig = { platform: 'snapchat', pixelId: 'snap-pixel-1', accessToken: 'snap token' };

function body(events: DeliveryEvent[]): unknown {
  return JSON.parse(snapchatAdapter.buildRequest(events, pixel, BASE).body);
}

describe('snapchat buildRequest', () => {
  it('builds the v3 request: WEB source, digits-only phone hash, sc_click_id unhashed', () => {
    const e = event({
      eventId: 'cnv_s1',
      eventType: 'Purchase',
      eventTimeMs: NOW - 3_000,
      clientIp: '198.51.100.4',
      sccid: 'a1B2-c3D4_e5',
      hashed: {
        em: HASH.email,
        ph: HASH.ph,
        phE164: HASH.phE164,
        fn: HASH.fn,
        ln: HASH.ln,
        externalId: HASH.externalId,
      },
      value: 5,
      currency: 'gbp',
      contentName: 'not sent to Snapchat',
    });
    const req = snapchatAdapter.buildRequest([e], pixel, BASE);
    expect(req.url).toBe(`${BASE}/v3/snap-pixel-1/events?access_token=snap%20token`);
    expect(req.headers).toEqual({ 'content-type': 'application/json' });
    expect(req.body).toBe(
      JSON.stringify({
        data: [
          {
            event_name: 'PURCHASE',
            event_time: NOW_S - 3,
            event_id: 'cnv_s1',
            action_source: 'WEB',
            event_source_url: 'https://shop.example.com/landing?fbclid=IwAR2F4-AbC_dEf',
            user_data: {
              em: [HASH.email],
              ph: [HASH.ph],
              fn: [HASH.fn],
              ln: [HASH.ln],
              external_id: [HASH.externalId],
              client_ip_address: '198.51.100.4',
              client_user_agent: UA,
              sc_click_id: 'a1B2-c3D4_e5',
            },
            custom_data: { value: 5, currency: 'GBP' },
          },
        ],
      }),
    );
  });

  it('leaves out custom_data without money', () => {
    expect(body([event({ eventType: 'PageView' })])).toStrictEqual({
      data: [
        {
          event_name: 'PAGE_VIEW',
          event_time: NOW_S,
          event_id: 'cnv_1',
          action_source: 'WEB',
          event_source_url: 'https://shop.example.com/landing?fbclid=IwAR2F4-AbC_dEf',
          user_data: { client_user_agent: UA },
        },
      ],
    });
  });

  it.each([
    ['PageView', 'PAGE_VIEW'],
    ['Contact', 'CUSTOM_EVENT_1'],
    ['Lead', 'SIGN_UP'],
    ['Purchase', 'PURCHASE'],
    ['CompleteRegistration', 'CUSTOM_EVENT_3'],
    ['Subscribe', 'SUBSCRIBE'],
    ['Custom', 'CUSTOM_EVENT_2'],
  ] as const)('names %s as %s', (eventType, name) => {
    const data = (
      body([event({ eventType, customEventName: 'Ignored' })]) as { data: Array<{ event_name: string }> }
    ).data;
    expect(data[0]?.event_name).toBe(name);
  });

  it('accepts 2000 events and no more', () => {
    expect(
      JSON.parse(
        snapchatAdapter.buildRequest(
          Array.from({ length: 2000 }, () => event()),
          pixel,
          BASE,
        ).body,
      ).data,
    ).toHaveLength(2000);
    expect(() =>
      snapchatAdapter.buildRequest(
        Array.from({ length: 2001 }, () => event()),
        pixel,
        BASE,
      ),
    ).toThrow(RangeError);
  });
});

describe('snapchat precheck', () => {
  it.each<[string, Partial<DeliveryEvent>, { ok: true } | { ok: false; skipReason: string }]>([
    ['a complete event', {}, { ok: true }],
    ['an event 37 days old', { eventTimeMs: NOW - 37 * DAY }, { ok: true }],
    [
      'an event older than 37 days',
      { eventTimeMs: NOW - 37 * DAY - 1 },
      { ok: false, skipReason: "event is older than Snapchat's 37-day window" },
    ],
    [
      'an event in the future',
      { eventTimeMs: NOW + 6 * 60_000 },
      { ok: false, skipReason: 'event time is more than 5 minutes in the future' },
    ],
    [
      'no user agent',
      { userAgent: null },
      { ok: false, skipReason: 'missing user agent (required for website events)' },
    ],
    [
      'no source URL',
      { eventSourceUrl: null },
      { ok: false, skipReason: 'missing event source URL (required for website events)' },
    ],
    ['a Custom event without name (Snapchat sends a slot)', { eventType: 'Custom' }, { ok: true }],
  ])('%s', (_name, overrides, expected) => {
    expect(snapchatAdapter.precheck(event({ eventTimeMs: NOW, ...overrides }), NOW)).toStrictEqual(expected);
  });
});

describe('snapchat classify', () => {
  const one = [event({ eventId: 'e1' })];
  const two = [event({ eventId: 'e1' }), event({ eventId: 'e2' })];

  it('200 VALID → delivered', () => {
    expect(snapchatAdapter.classify(reply(200, { status: 'VALID', reason: '' }), two, NOW)).toStrictEqual(
      deliveredAll(two),
    );
  });

  it('INVALID → failed with the reason, isolating in a batch', () => {
    const invalid = {
      status: 'INVALID',
      reason: 'data[1].event_time 1763776800000 is in the future; it must be in seconds',
    };
    expect(snapchatAdapter.classify(reply(400, invalid), two, NOW)).toStrictEqual(
      failAll(
        two,
        'HTTP 400: INVALID: data[1].event_time 1763776800000 is in the future; it must be in seconds',
        true,
      ),
    );
    expect(snapchatAdapter.classify(reply(200, invalid), one, NOW)).toStrictEqual(
      failAll(one, 'INVALID: data[1].event_time 1763776800000 is in the future; it must be in seconds'),
    );
  });

  it.each([401, 403])('%i → failed without isolation', (status) => {
    const res = reply(status, { status: 'INVALID', reason: 'Unauthorized: invalid or missing access_token' });
    expect(snapchatAdapter.classify(res, two, NOW)).toStrictEqual(
      failAll(two, `HTTP ${status}: INVALID: Unauthorized: invalid or missing access_token`),
    );
  });

  it.each([
    [{ networkError: 'socket hang up' }, 'network error: socket hang up', undefined],
    [
      reply(429, { status: 'INVALID', reason: 'Too many requests' }, { 'retry-after': '30' }),
      'HTTP 429: INVALID: Too many requests',
      30_000,
    ],
    [
      reply(500, { status: 'INVALID', reason: 'Internal server error' }),
      'HTTP 500: INVALID: Internal server error',
      undefined,
    ],
    [
      reply(502, 'Bad gateway', { 'Retry-After': 'Sat, 22 Nov 2025 01:00:00 GMT' }),
      'HTTP 502: Bad gateway',
      0,
    ],
    [reply(200, '{}'), 'HTTP 200: unexpected body: {}', undefined],
  ])('transport trouble %# → retry', (res, error, delay) => {
    expect(snapchatAdapter.classify(res, one, NOW)).toStrictEqual(retryAll(one, error, delay));
  });
});
