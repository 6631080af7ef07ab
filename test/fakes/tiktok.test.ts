import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { call, nowSec, sha256 } from './client.js';
import { TIKTOK_TRACK_PATH, startTikTok, type TikTokFake } from './tiktok.js';

const TOKEN = 'tiktok-test-token';
let tiktok: TikTokFake;

function event(overrides: Record<string, unknown> = {}) {
  return {
    event: 'Subscribe',
    event_time: nowSec() - 30,
    event_id: 'cnv_01',
    user: {
      external_id: sha256('tg-1'),
      phone: sha256('+4915112345678'),
      ttclid: 'E.C.P.abc',
      ip: '203.0.113.7',
      user_agent: 'Mozilla/5.0',
    },
    page: { url: 'https://shop.example.com/landing?ttclid=E.C.P.abc' },
    ...overrides,
  };
}

function track(body: unknown, token: string | null = TOKEN) {
  return call(`${tiktok.url}${TIKTOK_TRACK_PATH}`, {
    json: body,
    headers: token === null ? {} : { 'Access-Token': token },
  });
}

const batch = (data: unknown[], extra: Record<string, unknown> = {}) => ({
  event_source: 'web',
  event_source_id: 'CPIXEL123',
  data,
  ...extra,
});

beforeAll(async () => {
  tiktok = await startTikTok({ pixelCodes: ['CPIXEL123'] });
});
afterAll(() => tiktok.close());
beforeEach(() => tiktok.reset());

describe('TikTok Events API fake', () => {
  it('refuses an order id that is not a string with code 40002', async () => {
    const res = await track(batch([event({ properties: { order_id: 1001 } })]));
    expect(res.body).toMatchObject({ code: 40002 });
    expect(res.body.message).toContain('properties.order_id');
  });

  it.each(['SubmitForm', 'CompletePayment', 'ClickButton', 'PlaceAnOrder'])(
    'refuses the retired standard event %s with code 40002',
    async (name) => {
      const res = await track(batch([event({ event: name })]));
      expect(res.body).toMatchObject({ code: 40002 });
      expect(tiktok.events()).toEqual([]);
    },
  );

  it('accepts a valid event with code 0 and records it', async () => {
    const res = await track(batch([event()], { test_event_code: 'TEST42' }));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ code: 0, message: 'OK' });
    expect(res.body.request_id).toMatch(/^\d{14}[0-9A-F]{18}$/);
    expect(tiktok.events()).toEqual([
      expect.objectContaining({ pixelCode: 'CPIXEL123', testEventCode: 'TEST42' }),
    ]);
    expect(tiktok.events()[0]?.event.event_id).toBe('cnv_01');
  });

  it('counts duplicates on event + event_id', async () => {
    await track(batch([event(), event({ event: 'Purchase' })]));
    await track(batch([event()]));
    expect(tiktok.dedupStats()).toEqual({ total: 3, distinct: 2, duplicates: 1 });
  });

  it('answers HTTP 200 with code 40002 for an event_time in milliseconds and records nothing', async () => {
    const res = await track(batch([event(), event({ event_time: Date.now() })]));
    expect(res.status).toBe(200);
    expect(res.body.code).toBe(40002);
    expect(res.body.message).toContain('data[1].event_time');
    expect(tiktok.events()).toEqual([]);
  });

  it('answers 40002 for an unhashed email, a missing page.url, a numeric event_id, a wrong event_source', async () => {
    const cases: [unknown, string][] = [
      [batch([event({ user: { email: 'ann@example.com' } })]), 'user.email'],
      [batch([event({ page: {} })]), 'page.url'],
      [batch([event({ event_id: 42 })]), 'event_id'],
      [{ ...batch([event()]), event_source: 'app' }, 'event_source'],
      [batch([]), 'data'],
    ];
    for (const [body, field] of cases) {
      const res = await track(body);
      expect(res.status).toBe(200);
      expect(res.body.code).toBe(40002);
      expect(res.body.message).toContain(field);
    }
    expect(tiktok.events()).toEqual([]);
  });

  it('refuses a pixel code with any event source but web (offline, crm and app take event sets of their own) and an unknown one', async () => {
    for (const source of ['offline', 'crm', 'app', 'server', undefined]) {
      const res = await track({ ...batch([event()]), event_source: source });
      expect(res.body.code).toBe(40002);
      expect(res.body.message).toContain('event_source');
    }
    expect(tiktok.events()).toEqual([]);
  });

  it('refuses unhashed names, zip code and external ids (one plain id in an array is enough); accepts them hashed, and an event without a page', async () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ first_name: 'ann' }, 'user.first_name'],
      [{ last_name: 'Smith' }, 'user.last_name'],
      [{ zip_code: '10115' }, 'user.zip_code'],
      [{ external_id: [sha256('crm-1'), 'crm-1'] }, 'user.external_id'],
      [{ phone: sha256('+4915112345678').toUpperCase() }, 'user.phone'],
    ];
    for (const [user, field] of bad) {
      const res = await track(batch([event({ user })]));
      expect(res.body.code, field).toBe(40002);
      expect(res.body.message).toContain(field);
    }
    expect(tiktok.events()).toEqual([]);
    const crm = {
      event: 'Lead',
      event_time: nowSec() - 30,
      event_id: 'cnv_crm',
      user: {
        email: sha256('ann@example.com'),
        external_id: [sha256('crm-1'), sha256('777')],
        first_name: sha256('ann'),
        last_name: sha256('smith'),
        zip_code: sha256('10115'),
      },
    };
    expect((await track(batch([crm]))).body.code).toBe(0);
    expect(tiktok.events().map((e) => e.event.event_id)).toEqual(['cnv_crm']);
  });

  it('knows only the v1.3 track path: another version is not found', async () => {
    const res = await call(`${tiktok.url}/open_api/v1.2/event/track/`, {
      json: batch([event()]),
      headers: { 'Access-Token': TOKEN },
    });
    expect(res.status).toBe(404);
    expect(tiktok.events()).toEqual([]);
  });

  it('answers 40105 for a bad token, 40104 for none, 40001 for a foreign pixel', async () => {
    expect((await track(batch([event()]), 'wrong')).body.code).toBe(40105);
    expect((await track(batch([event()]), null)).body.code).toBe(40104);
    expect((await track({ ...batch([event()]), event_source_id: 'OTHER' })).body.code).toBe(40001);
  });

  it('keeps HTTP 200 for injected throttling (40100), server errors (40700) and bad tokens', async () => {
    tiktok
      .failNext(1, { type: 'rateLimit', retryAfterSec: 5 })
      .failNext(1, { type: 'status', status: 500 })
      .failNext(1, { type: 'invalidToken' });
    const codes = [];
    for (let i = 0; i < 4; i++) {
      const res = await track(batch([event()]));
      expect(res.status).toBe(200);
      codes.push(res.body.code);
    }
    expect(codes).toEqual([40100, 40700, 40105, 0]);
    expect(tiktok.received.map((r) => r.injected)).toEqual([
      'rateLimit',
      'status',
      'invalidToken',
      undefined,
    ]);
  });

  it('answers a real 5xx only for a gateway failure', async () => {
    tiktok.failNext(1, { type: 'status', status: 502, gateway: true });
    const res = await track(batch([event()]));
    expect(res.status).toBe(502);
    expect(res.body).toContain('502 Bad Gateway');
  });
});

describe('TikTok Events API fake: limited data use', () => {
  it('takes limited_data_use as a boolean on the event, and refuses it anywhere else or as anything else', async () => {
    const ok = await track(
      batch([event({ limited_data_use: true }), event({ event_id: 'x2', limited_data_use: false })]),
    );
    expect(ok.body.code).toBe(0);
    expect(tiktok.events()).toHaveLength(2);
    tiktok.reset();
    const cases: [Record<string, unknown>, string][] = [
      [{ limited_data_use: 'true' }, 'limited_data_use'],
      [{ limited_data_use: 1 }, 'limited_data_use'],
      [{ properties: { limited_data_use: true } }, 'properties.limited_data_use'],
    ];
    for (const [fields, field] of cases) {
      const res = await track(batch([event(fields)]));
      expect(res.body.code).toBe(40002);
      expect(res.body.message).toContain(field);
    }
    expect(tiktok.events()).toEqual([]);
  });
});
