import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { call, nowSec, sha256 } from './client.js';
import { startSnapchat, type SnapchatFake } from './snapchat.js';

let snap: SnapchatFake;
const endpoint = (token = 'snap-test-token') => `${snap.url}/v3/px-1/events?access_token=${token}`;

function event(overrides: Record<string, unknown> = {}, userData: Record<string, unknown> = {}) {
  return {
    event_name: 'SUBSCRIBE',
    event_time: nowSec() - 30,
    event_id: 'cnv_01',
    action_source: 'WEB',
    event_source_url: 'https://shop.example.com/?sccid=abc',
    user_data: {
      ph: sha256('4915112345678'),
      client_ip_address: '203.0.113.7',
      client_user_agent: 'Mozilla/5.0',
      sc_click_id: 'abc',
      ...userData,
    },
    ...overrides,
  };
}

beforeAll(async () => {
  snap = await startSnapchat({ pixelIds: ['px-1'] });
});
afterAll(() => snap.close());
beforeEach(() => snap.reset());

describe('Snapchat CAPI fake', () => {
  it('accepts valid events as VALID and records them', async () => {
    const res = await call(endpoint(), {
      json: { data: [event(), event({ event_name: 'CUSTOM_EVENT_1', event_id: 'cnv_02' })] },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'VALID' });
    expect(snap.events().map((e) => e.event.event_name)).toEqual(['SUBSCRIBE', 'CUSTOM_EVENT_1']);
    expect(snap.events()[0]?.pixelId).toBe('px-1');
  });

  it('accepts a 30-day-old event but refuses a 38-day-old one', async () => {
    expect(
      (await call(endpoint(), { json: { data: [event({ event_time: nowSec() - 30 * 86400 })] } })).status,
    ).toBe(200);
    const res = await call(endpoint(), { json: { data: [event({ event_time: nowSec() - 38 * 86400 })] } });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ status: 'INVALID' });
    expect(res.body.reason).toContain('37 days');
  });

  it('refuses the whole request as INVALID for any bad event', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [event({ event_time: Date.now() }), 'event_time'],
      [event({ event_name: 'Subscribe' }), 'event_name'],
      [event({}, { client_user_agent: undefined }), 'client_user_agent'],
      [event({ event_source_url: undefined }), 'event_source_url'],
      [event({}, { em: 'ann@example.com' }), 'user_data.em'],
      [event({}, { ph: '+4915112345678' }), 'user_data.ph'],
      [event({ custom_data: { order_id: 1001 } }), 'custom_data.order_id'],
      [event({ custom_data: { transaction_id: '' } }), 'custom_data.transaction_id'],
    ];
    for (const [bad, field] of cases) {
      const res = await call(endpoint(), { json: { data: [event(), bad] } });
      expect(res.status).toBe(400);
      expect(res.body.status).toBe('INVALID');
      expect(res.body.reason).toContain(field);
    }
    expect(snap.events()).toEqual([]);
  });

  it('refuses an unknown action_source and an event name outside its list (it has no CONTACT)', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [event({ action_source: 'website' }), 'action_source'],
      [event({ action_source: 'CHAT' }), 'action_source'],
      [event({ action_source: undefined }), 'action_source'],
      [event({ event_name: 'CONTACT' }), 'event_name'],
    ];
    for (const [bad, field] of cases) {
      const res = await call(endpoint(), { json: { data: [bad] } });
      expect(res.status).toBe(400);
      expect(res.body.reason).toContain(field);
    }
    expect(snap.events()).toEqual([]);
  });

  it('refuses unhashed names, address fields and external ids; accepts an OFFLINE event with neither page nor browser', async () => {
    for (const field of ['fn', 'ln', 'ct', 'st', 'zp', 'country', 'db', 'ge']) {
      const res = await call(endpoint(), { json: { data: [event({}, { [field]: ['plain'] })] } });
      expect(res.status, field).toBe(400);
      expect(res.body.reason).toContain(`user_data.${field}`);
    }
    const mixed = await call(endpoint(), {
      json: { data: [event({}, { external_id: [sha256('crm-1'), 'crm-1'] })] },
    });
    expect(mixed.status).toBe(400);
    expect(mixed.body.reason).toContain('user_data.external_id');
    expect(snap.events()).toEqual([]);
    const offline = {
      event_name: 'SIGN_UP',
      event_time: nowSec() - 30,
      event_id: 'cnv_crm',
      action_source: 'OFFLINE',
      user_data: {
        em: [sha256('ann@example.com')],
        external_id: [sha256('crm-1'), sha256('777')],
        country: [sha256('de')],
      },
    };
    expect((await call(endpoint(), { json: { data: [offline] } })).status).toBe(200);
    expect(snap.events().map((e) => e.event.event_id)).toEqual(['cnv_crm']);
  });

  it('refuses a bad token with 401 and throttles with 429 and Retry-After', async () => {
    const bad = await call(endpoint('nope'), { json: { data: [event()] } });
    expect(bad.status).toBe(401);
    snap.failNext(1, { type: 'rateLimit', retryAfterSec: 7 });
    const limited = await call(endpoint(), { json: { data: [event()] } });
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');
    expect(snap.events()).toEqual([]);
  });
});
