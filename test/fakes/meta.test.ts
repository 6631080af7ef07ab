import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { call, nowSec, sha256 } from './client.js';
import { startMeta, type MetaFake } from './meta.js';

const TOKEN = 'meta-test-token';
let meta: MetaFake;
const endpoint = (pixel = '1234567890', token: string | null = TOKEN) =>
  `${meta.url}/v26.0/${pixel}/events${token === null ? '' : `?access_token=${token}`}`;

function event(overrides: Record<string, unknown> = {}, userData: Record<string, unknown> = {}) {
  return {
    event_name: 'Subscribe',
    event_time: nowSec() - 60,
    event_id: 'cnv_01',
    action_source: 'website',
    event_source_url: 'https://shop.example.com/landing?fbclid=IwAR2F4',
    user_data: {
      fbc: 'fb.1.1763776512345.IwAR2F4',
      fbp: 'fb.1.1763776500000.1116446470',
      client_ip_address: '203.0.113.7',
      client_user_agent: 'Mozilla/5.0 (iPhone)',
      external_id: [sha256('tg-777000111')],
      ...userData,
    },
    custom_data: { content_name: 'Main channel' },
    ...overrides,
  };
}

beforeAll(async () => {
  meta = await startMeta({ pixelIds: ['1234567890'] });
});
afterAll(() => meta.close());
beforeEach(() => meta.reset());

describe('Meta CAPI fake: accepted requests', () => {
  it('accepts a valid event, answers like Meta and records it with its pixel and test code', async () => {
    const res = await call(endpoint(), { json: { data: [event()], test_event_code: 'TEST123' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ events_received: 1, messages: [] });
    expect(res.body.fbtrace_id).toMatch(/^[\w-]{10,}$/);
    const [accepted] = meta.events();
    expect(accepted).toMatchObject({ pixelId: '1234567890', version: 'v26.0', testEventCode: 'TEST123' });
    expect(accepted?.event.user_data.fbc).toBe('fb.1.1763776512345.IwAR2F4');
    expect(meta.received[0]).toMatchObject({
      method: 'POST',
      path: '/v26.0/1234567890/events',
      query: { access_token: TOKEN },
      status: 200,
    });
  });

  it('accepts hashes carrying the SDK suffix and a Purchase with value and currency', async () => {
    const purchase = event(
      { event_name: 'Purchase', custom_data: { value: 19.9, currency: 'EUR' } },
      { em: `${sha256('ann@example.com')}.AQYBAQIA` },
    );
    const res = await call(endpoint(), { json: { data: [purchase] } });
    expect(res.status).toBe(200);
    expect(meta.events()).toHaveLength(1);
  });

  it('counts duplicates on event_name + event_id as Meta would deduplicate them', async () => {
    await call(endpoint(), { json: { data: [event(), event({ event_id: 'cnv_02' })] } });
    await call(endpoint(), { json: { data: [event()] } });
    expect(meta.dedupStats()).toEqual({ total: 3, distinct: 2, duplicates: 1 });
  });
});

describe('Meta CAPI fake: rejected requests', () => {
  async function rejects(body: unknown, url = endpoint()) {
    const res = await call(url, { json: body });
    expect(meta.events()).toEqual([]); // one bad event rejects the whole request
    return res;
  }

  it('rejects an event_time in milliseconds with code 100, even beside a valid event', async () => {
    const res = await rejects({ data: [event(), event({ event_time: Date.now() })] });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 100, type: 'OAuthException', is_transient: false });
    expect(res.body.error.message).toContain('data[1].event_time');
  });

  it('rejects an event older than 7 days with subcode 2804003', async () => {
    const res = await rejects({ data: [event({ event_time: nowSec() - 8 * 86400 })] });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      code: 100,
      error_subcode: 2804003,
      error_user_title: 'Event Timestamp Too Old',
    });
  });

  it('rejects an order id that is not a string, naming it', async () => {
    const res = await rejects({ data: [event({ custom_data: { order_id: 1001 } })] });
    expect(res.body.error.code).toBe(100);
    expect(res.body.error.message).toContain('custom_data.order_id');
  });

  it('rejects an event in the future', async () => {
    const res = await rejects({ data: [event({ event_time: nowSec() + 3600 })] });
    expect(res.body.error.code).toBe(100);
  });

  it('rejects an unhashed email naming the field', async () => {
    const res = await rejects({ data: [event({}, { em: 'ann@example.com' })] });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe(100);
    expect(res.body.error.message).toContain('user_data.em');
  });

  it('rejects an uppercase hash in an array of phone hashes', async () => {
    const res = await rejects({
      data: [event({}, { ph: [sha256('4915112345678'), sha256('x').toUpperCase()] })],
    });
    expect(res.body.error.message).toContain('user_data.ph');
  });

  it('rejects a website event without client_user_agent or event_source_url', async () => {
    const noUa = await rejects({ data: [event({}, { client_user_agent: undefined })] });
    expect(noUa.body.error.message).toContain('client_user_agent');
    const noUrl = await rejects({ data: [event({ event_source_url: undefined })] });
    expect(noUrl.body.error.message).toContain('event_source_url');
  });

  it('rejects a malformed fbc, a fbc in seconds, and a malformed fbp', async () => {
    for (const userData of [
      { fbc: 'IwAR2F4' },
      { fbc: 'fb.1.1763776512.IwAR2F4' },
      { fbp: 'fb.1.1763776500000.abc' },
    ]) {
      const res = await rejects({ data: [event({}, userData)] });
      expect(res.body.error.message).toMatch(/user_data\.fb[cp]/);
    }
  });

  it('rejects a Purchase without currency, and a currency that is not ISO 4217', async () => {
    const noCurrency = await rejects({
      data: [event({ event_name: 'Purchase', custom_data: { value: 10 } })],
    });
    expect(noCurrency.body.error.message).toContain('Purchase');
    const badCurrency = await rejects({ data: [event({ custom_data: { value: 10, currency: 'EURO' } })] });
    expect(badCurrency.body.error.message).toContain('currency');
  });

  it('rejects an empty batch and one over 1000 events', async () => {
    expect((await rejects({ data: [] })).body.error.code).toBe(100);
    const big = Array.from({ length: 1001 }, (_, i) => event({ event_id: `e${i}` }));
    const res = await rejects({ data: big });
    expect(res.body.error.message).toContain('1000');
  });

  it('rejects a missing or unknown access token with code 190', async () => {
    const missing = await rejects({ data: [event()] }, endpoint('1234567890', null));
    expect(missing.status).toBe(401);
    expect(missing.body.error.code).toBe(190);
    const wrong = await rejects({ data: [event()] }, endpoint('1234567890', 'nope'));
    expect(wrong.body.error).toMatchObject({ code: 190, type: 'OAuthException' });
  });

  it('rejects an unknown pixel and a missing action_source', async () => {
    expect((await rejects({ data: [event()] }, endpoint('42'))).body.error).toMatchObject({
      code: 100,
      error_subcode: 33,
    });
    expect((await rejects({ data: [event({ action_source: undefined })] })).body.error.message).toContain(
      'action_source',
    );
    expect((await rejects({ data: [event({ action_source: 'telegram' })] })).body.error.message).toContain(
      'action_source must be one of',
    );
  });

  it('accepts a non-website event without a page or a browser, and refuses one website event without them', async () => {
    const crm = event(
      { action_source: 'system_generated', event_source_url: undefined },
      {
        client_user_agent: undefined,
        fbc: undefined,
        fbp: undefined,
        client_ip_address: undefined,
        em: [sha256('a@example.com')],
      },
    );
    expect(
      (await rejects({ data: [event({ action_source: 'website', event_source_url: undefined })] })).body.error
        .message,
    ).toContain('event_source_url');
    expect((await call(endpoint(), { json: { data: [crm] } })).status).toBe(200);
  });

  it('refuses a Marketing API version that has ended (v24.0 after 2026-11-10, anything older) with code 2635', async () => {
    for (const version of ['v24.0', 'v21.0']) {
      const res = await call(`${meta.url}/${version}/1234567890/events?access_token=${TOKEN}`, {
        json: { data: [event()] },
      });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe(2635);
    }
    expect(meta.events()).toEqual([]);
  });
});

describe("Meta CAPI fake: injected failures in Meta's shape", () => {
  it('throttling is a transient code 17 with the wait in the usage header', async () => {
    meta.failNext(1, { type: 'rateLimit', retryAfterSec: 120 });
    const res = await call(endpoint(), { json: { data: [event()] } });
    expect(res.status).toBe(429);
    expect(res.body.error).toMatchObject({ code: 17, is_transient: true });
    expect(
      JSON.parse(res.headers.get('x-business-use-case-usage') ?? '{}')['1234567890'][0]
        .estimated_time_to_regain_access,
    ).toBe(2);
    expect(meta.received[0]?.injected).toBe('rateLimit');
    expect(meta.events()).toEqual([]);
  });

  it('a 5xx is code 2, transient; an invalidToken is code 190', async () => {
    meta.failNext(1, { type: 'status', status: 503 }).failNext(1, { type: 'invalidToken' });
    const server = await call(endpoint(), { json: { data: [event()] } });
    expect(server.status).toBe(503);
    expect(server.body.error).toMatchObject({ code: 2, is_transient: true });
    const token = await call(endpoint(), { json: { data: [event()] } });
    expect(token.body.error.code).toBe(190);
    expect((await call(endpoint(), { json: { data: [event()] } })).status).toBe(200);
  });
});

describe('Meta CAPI fake: Limited Data Use', () => {
  it('accepts LDU with country and state (0: geolocated; 1, 1000: the US, California) and an empty array', async () => {
    const ok = [
      {
        data_processing_options: ['LDU'],
        data_processing_options_country: 0,
        data_processing_options_state: 0,
      },
      {
        data_processing_options: ['LDU'],
        data_processing_options_country: 1,
        data_processing_options_state: 1000,
      },
      { data_processing_options: [] },
    ];
    for (const fields of ok) {
      const res = await call(endpoint(), { json: { data: [event(fields)] } });
      expect(res.status, JSON.stringify(fields)).toBe(200);
    }
    expect(meta.events()).toHaveLength(3);
  });

  it('refuses LDU in the wrong shape, without its country, or a country without it', async () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ data_processing_options: 'LDU', data_processing_options_country: 0 }, 'data_processing_options'],
      [{ data_processing_options: ['ldu'], data_processing_options_country: 0 }, 'data_processing_options'],
      [{ data_processing_options: ['LDU'] }, 'data_processing_options_country'],
      [
        { data_processing_options: ['LDU'], data_processing_options_country: '0' },
        'data_processing_options_country',
      ],
      [
        {
          data_processing_options: ['LDU'],
          data_processing_options_country: 0,
          data_processing_options_state: 7,
        },
        'data_processing_options_state',
      ],
      [{ data_processing_options_country: 0 }, 'data_processing_options_country'],
    ];
    for (const [fields, field] of bad) {
      const res = await call(endpoint(), { json: { data: [event(fields)] } });
      expect(res.status, JSON.stringify(fields)).toBe(400);
      expect(JSON.stringify(res.body)).toContain(field);
    }
    expect(meta.events()).toEqual([]);
  });
});
