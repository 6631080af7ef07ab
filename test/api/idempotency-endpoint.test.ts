// An Idempotency-Key is bound to the endpoint (method + route pattern) it was first used on: the
// same key on another endpoint within 24 hours gets 422 IDEMPOTENCY_KEY_REUSED and runs nothing,
// instead of replaying the other endpoint's answer. Sequential and concurrent, every pair of the
// event, lead and channel endpoints.
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../harness/db.js';
import type { TestApp, TestClock } from '../harness/app.js';
import { type ApiClient, apiWorld, count, type Tenant, warmLead } from './support.js';

const world = apiWorld({ connections: 20, tenant: { platforms: ['meta'] }, clock: true });
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let clock: TestClock;
let tenant: Tenant;

beforeAll(() => {
  ({ db, t, api, tenant, clock } = world);
});

let keySeq = 0;
const freshKey = () => `reuse-${Date.now()}-${keySeq++}`;

const warmUser = () => warmLead(db.pool, tenant);
const purchase = (user: number) => ({
  telegramUserId: user,
  eventType: 'Purchase',
  value: 10,
  currency: 'USD',
});
const purchasesOf = (user: number) =>
  count(db.pool, `conversions WHERE telegram_user_id = $1 AND event_type = 'Purchase'`, [user]);

function expectReused(r: { status: number; headers: Headers; body: Record<string, unknown> }) {
  expect(r.status).toBe(422);
  expect(r.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
  expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(r.headers.get('x-idempotent-replay')).toBeNull();
}

describe('Idempotency-Key bound to its endpoint', () => {
  it('a key first used on GET /channels, then on POST /events/conversion: 422, no conversion recorded', async () => {
    const user = await warmUser();
    const key = freshKey();
    const list = await api.get('/channels', { key: tenant.accountKey, idempotencyKey: key });
    expect(list.status).toBe(200);
    const event = await api.post('/events/conversion', purchase(user), {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    expectReused(event);
    expect(await purchasesOf(user)).toBe(0);
    // The key still belongs to the channel list, whose answer it keeps replaying.
    const again = await api.get('/channels', { key: tenant.accountKey, idempotencyKey: key });
    expect(again).toMatchObject({ status: 200, body: list.body });
    expect(again.headers.get('x-idempotent-replay')).toBe('true');
  });

  it('a key first used on POST /events/conversion, then on the lead endpoint and on GET endpoints: 422, nothing runs', async () => {
    const user = await warmUser();
    const key = freshKey();
    const first = await api.post('/events/conversion', purchase(user), {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    expect(first.status).toBe(201);
    expectReused(
      await api.post(
        `/leads/${user}/events`,
        { eventType: 'Purchase', value: 20, currency: 'USD' },
        { key: tenant.accountKey, idempotencyKey: key },
      ),
    );
    expectReused(await api.get('/channels', { key: tenant.accountKey, idempotencyKey: key }));
    expectReused(
      await api.get(`/leads/${user}?siteId=${tenant.site.siteId}`, {
        key: tenant.accountKey,
        idempotencyKey: key,
      }),
    );
    expectReused(
      await api.post(
        `/leads/${user}/conversions/${first.body.conversionId}/value`,
        { value: 5, currency: 'USD' },
        { key: tenant.accountKey, idempotencyKey: key },
      ),
    );
    expect(await purchasesOf(user)).toBe(1);
    const { rows } = await db.pool.query(
      'SELECT endpoint, status_code FROM idempotency_keys WHERE api_key_id = $1 AND key = $2',
      [tenant.accountKeyId, key],
    );
    expect(rows).toEqual([{ endpoint: 'POST /api/v1/events/conversion', status_code: 201 }]);
    // The original endpoint still replays.
    const replay = await api.post('/events/conversion', purchase(user), {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    expect(replay).toMatchObject({ status: 201, body: first.body });
  });

  it('the route pattern, not the path, is the endpoint: the lead endpoint for another user replays', async () => {
    const [u1, u2] = [await warmUser(), await warmUser()];
    const key = freshKey();
    const first = await api.post(
      `/leads/${u1}/events`,
      { eventType: 'Purchase', value: 30, currency: 'USD' },
      { key: tenant.accountKey, idempotencyKey: key },
    );
    expect(first.status).toBe(201);
    const second = await api.post(
      `/leads/${u2}/events`,
      { eventType: 'Purchase', value: 30, currency: 'USD' },
      { key: tenant.accountKey, idempotencyKey: key },
    );
    expect(second).toMatchObject({ status: 201, body: first.body });
    expect(second.headers.get('x-idempotent-replay')).toBe('true');
    expect(await purchasesOf(u2)).toBe(0);
  });

  it('HEAD and GET of one route are one endpoint (a HEAD is a GET without its body), either first', async () => {
    const head = (key: string) =>
      fetch(`${t.url}/api/v1/channels`, {
        method: 'HEAD',
        headers: { authorization: `Bearer ${tenant.accountKey}`, 'idempotency-key': key },
      });
    const k1 = freshKey();
    expect((await head(k1)).status).toBe(200);
    const list = await api.get('/channels', { key: tenant.accountKey, idempotencyKey: k1 });
    expect(list.status).toBe(200);
    expect(list.headers.get('x-idempotent-replay')).toBe('true');
    expect(list.body.channels).toEqual(expect.any(Array));
    const k2 = freshKey();
    expect((await api.get('/channels', { key: tenant.accountKey, idempotencyKey: k2 })).status).toBe(200);
    const again = await head(k2);
    expect(again.status).toBe(200);
    expect(again.headers.get('x-idempotent-replay')).toBe('true');
    // A HEAD is still not a POST.
    expectReused(
      await api.post('/events/conversion', purchase(await warmUser()), {
        key: tenant.accountKey,
        idempotencyKey: k2,
      }),
    );
  });

  it('a key still running on one endpoint gets 422 on another (not 409, not a wait)', async () => {
    const user = await warmUser();
    const key = freshKey();
    // A claim left unfinished by a request still running on the lead endpoint.
    await db.pool.query(
      `INSERT INTO idempotency_keys (api_key_id, key, created_at, endpoint) VALUES ($1, $2, now(), 'GET /api/v1/leads/:telegramUserId')`,
      [tenant.accountKeyId, key],
    );
    expectReused(
      await api.post('/events/conversion', purchase(user), { key: tenant.accountKey, idempotencyKey: key }),
    );
    expectReused(await api.get('/channels', { key: tenant.accountKey, idempotencyKey: key }));
    expect(await purchasesOf(user)).toBe(0);
  });

  it('the same key on two endpoints at once: one runs, the other gets 422, never a 5xx', async () => {
    for (let round = 0; round < 10; round++) {
      const user = await warmUser();
      const key = freshKey();
      const [event, lead, list] = await Promise.all([
        api.post('/events/conversion', purchase(user), { key: tenant.accountKey, idempotencyKey: key }),
        api.post(
          `/leads/${user}/events`,
          { eventType: 'Purchase', value: 10, currency: 'USD' },
          { key: tenant.accountKey, idempotencyKey: key },
        ),
        api.get('/channels', { key: tenant.accountKey, idempotencyKey: key }),
      ]);
      const ran = [event, lead, list].filter((r) => r.status < 300);
      const refused = [event, lead, list].filter((r) => r.status === 422);
      expect(ran).toHaveLength(1);
      expect(refused).toHaveLength(2);
      for (const r of refused) expect(r.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
      expect(await purchasesOf(user)).toBe(ran[0] === list ? 0 : 1);
    }
  });

  it('after the 24-hour replay window the key is new again, on any endpoint', async () => {
    const user = await warmUser();
    const key = freshKey();
    const start = Date.now();
    clock.set(start);
    try {
      expect((await api.get('/channels', { key: tenant.accountKey, idempotencyKey: key })).status).toBe(200);
      clock.set(start + 23 * 3_600_000);
      expectReused(
        await api.post('/events/conversion', purchase(user), { key: tenant.accountKey, idempotencyKey: key }),
      );
      clock.set(start + 25 * 3_600_000);
      const later = await api.post('/events/conversion', purchase(user), {
        key: tenant.accountKey,
        idempotencyKey: key,
      });
      expect(later.status).toBe(201);
      expect(await purchasesOf(user)).toBe(1);
    } finally {
      clock.real();
    }
  });

  it('the OpenAPI document lists the code', async () => {
    const doc = await api.get('/openapi.json');
    expect(doc.body.components.schemas.Problem.properties.code.enum).toContain('IDEMPOTENCY_KEY_REUSED');
  });
});
