// POST /api/v1/leads/{telegramUserId}/events: the conversion endpoint with the user in the path;
// site and channel from the lead's history.
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../harness/db.js';
import type { TestApp } from '../harness/app.js';
import {
  type ApiClient,
  apiWorld,
  attributedJoin,
  count,
  newUser,
  seedTenant,
  type Tenant,
} from './support.js';

const world = apiWorld({ tenant: { sites: 2 } });
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;
let rival: Tenant;

beforeAll(async () => {
  ({ db, t, api, tenant } = world);
  rival = await seedTenant(db.pool, t.deps.box);
});

const conversion = async (id: string) =>
  (await db.pool.query('SELECT * FROM conversions WHERE id = $1', [id])).rows[0] as Record<string, any>;

describe('happy paths', () => {
  it("an account key: the acquisition's site, the most recent conversion's channel, the acquisition visit", async () => {
    const [, s2] = tenant.sites;
    const user = newUser();
    const { visitId } = await attributedJoin(db.pool, {
      siteId: s2!.siteId,
      channelId: s2!.channels.main,
      telegramUserId: user,
    });
    const onSecond = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', channelId: s2!.channels.second },
      { key: tenant.accountKey },
    );
    expect(onSecond.status).toBe(201);
    const res = await api.post(
      `/leads/${user}/events`,
      { eventType: 'Purchase', value: 30, currency: 'USD' },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ coldLead: false, dispatched: true, deduplicated: false });
    expect(await conversion(res.body.conversionId)).toMatchObject({
      site_id: s2!.siteId,
      channel_id: s2!.channels.second,
      visit_id: visitId,
      value: 30,
    });
  });

  it('a lead known only from earlier API events resolves the same way, and reuses a recent match (200)', async () => {
    const user = newUser();
    const first = await api.post(
      `/leads/${user}/events`,
      { eventType: 'Subscribe', channelId: tenant.site.channels.main, fbp: 'fb.1.1700000000000.1' },
      { key: tenant.site.siteKey },
    );
    expect(first.status).toBe(201);
    expect(first.body.coldLead).toBe(true);
    const next = await api.post(
      `/leads/${user}/events`,
      { eventType: 'Contact' },
      { key: tenant.accountKey },
    );
    expect(next.status).toBe(201);
    expect(await conversion(next.body.conversionId)).toMatchObject({
      site_id: tenant.site.siteId,
      channel_id: tenant.site.channels.main,
      cold_lead: false,
    });
    const again = await api.post(
      `/leads/${user}/events`,
      { eventType: 'Contact' },
      { key: tenant.accountKey },
    );
    expect(again).toMatchObject({
      status: 200,
      body: { conversionId: next.body.conversionId, deduplicated: true, updatedExisting: true },
    });
  });

  it('a telegramUserId in the body is ignored: the path decides', async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    const res = await api.post(
      `/leads/${user}/events`,
      { eventType: 'Lead', telegramUserId: 42 },
      { key: tenant.accountKey },
    );
    expect((await conversion(res.body.conversionId)).telegram_user_id).toBe(user);
  });

  it('replays under an Idempotency-Key like every business endpoint', async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    const a = await api.post(
      `/leads/${user}/events`,
      { eventType: 'Lead' },
      { key: tenant.accountKey, idempotencyKey: 'lead-evt-1' },
    );
    const b = await api.post(
      `/leads/${user}/events`,
      { eventType: 'Contact' },
      { key: tenant.accountKey, idempotencyKey: 'lead-evt-1' },
    );
    expect(b.headers.get('x-idempotent-replay')).toBe('true');
    expect(b.body).toEqual(a.body);
    expect(await count(db.pool, 'conversions WHERE telegram_user_id = $1', [user])).toBe(1);
  });
});

describe('errors', () => {
  it.each(['abc', '0', '-5', '1.5', '12345678901234567890', '1e5'])(
    'a path user id %s → 400 VALIDATION_FAILED',
    async (id) => {
      const res = await api.post(`/leads/${id}/events`, { eventType: 'Lead' }, { key: tenant.accountKey });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    },
  );

  it('an unknown user and no site → 400 SITE_REQUIRED; a site but no channel → 400 CHANNEL_REQUIRED', async () => {
    const user = newUser();
    expect(
      (await api.post(`/leads/${user}/events`, { eventType: 'Lead' }, { key: tenant.accountKey })).body.code,
    ).toBe('SITE_REQUIRED');
    expect(
      (await api.post(`/leads/${user}/events`, { eventType: 'Lead' }, { key: tenant.site.siteKey })).body
        .code,
    ).toBe('CHANNEL_REQUIRED');
  });

  it('Purchase without value → 400, and 401 without a key', async () => {
    const user = newUser();
    const bad = await api.post(
      `/leads/${user}/events`,
      { eventType: 'Purchase', currency: 'USD' },
      { key: tenant.accountKey },
    );
    expect(bad.body).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    expect((await api.post(`/leads/${user}/events`, { eventType: 'Lead' })).status).toBe(401);
  });
});

describe('security', () => {
  it("another account's lead is invisible: an account key gets SITE_REQUIRED and writes nothing there", async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: rival.site.siteId,
      channelId: rival.site.channels.main,
      telegramUserId: user,
    });
    const res = await api.post(`/leads/${user}/events`, { eventType: 'Lead' }, { key: tenant.accountKey });
    expect(res.body.code).toBe('SITE_REQUIRED');
    expect(await count(db.pool, 'conversions WHERE telegram_user_id = $1', [user])).toBe(0);
  });

  it("a site key cannot reach another site's lead, nor name that site", async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.sites[1]!.siteId,
      channelId: tenant.sites[1]!.channels.main,
      telegramUserId: user,
    });
    expect(
      (await api.post(`/leads/${user}/events`, { eventType: 'Lead' }, { key: tenant.sites[0]!.siteKey })).body
        .code,
    ).toBe('CHANNEL_REQUIRED');
    const named = await api.post(
      `/leads/${user}/events`,
      { eventType: 'Lead', websiteId: tenant.sites[1]!.websiteId },
      { key: tenant.sites[0]!.siteKey },
    );
    expect(named).toMatchObject({ status: 403, body: { code: 'FORBIDDEN' } });
    expect(await count(db.pool, 'conversions WHERE telegram_user_id = $1', [user])).toBe(0);
  });
});
