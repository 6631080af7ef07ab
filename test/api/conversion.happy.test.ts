// POST /api/v1/events/conversion: what a well-formed request creates, row by row.
import { createHash } from 'node:crypto';
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
  VISIT,
} from './support.js';

const world = apiWorld({ tenant: { platforms: ['meta', 'tiktok'] } });
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;

beforeAll(() => {
  ({ db, t, api, tenant } = world);
});

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

async function conversion(id: string) {
  const { rows } = await db.pool.query('SELECT * FROM conversions WHERE id = $1', [id]);
  return rows[0] as Record<string, any>;
}

describe('warm lead', () => {
  it('a Purchase for a user with an attributed join lands on the acquisition site, channel and visit, with one send per pixel', async () => {
    const user = newUser();
    const { visitId } = await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        eventType: 'Purchase',
        value: 49.9,
        currency: 'usd',
        contentName: 'Pro plan',
        pii: { email: '  Ann@Example.COM ', phone: '+44 20 7946 0958', firstName: 'Ann' },
        externalUserId: 'crm-42',
      },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(201);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toMatchObject({
      capiStatus: 'pending',
      coldLead: false,
      dispatched: true,
      deduplicated: false,
      updatedExisting: false,
    });
    expect(res.body.warning).toBeUndefined();
    expect(res.body.sends.map((s: { platform: string }) => s.platform).sort()).toEqual(['meta', 'tiktok']);

    const c = await conversion(res.body.conversionId);
    expect(c).toMatchObject({
      site_id: tenant.site.siteId,
      channel_id: tenant.site.channels.main,
      visit_id: visitId,
      source: 'api',
      cold_lead: false,
      event_type: 'Purchase',
      value: 49.9,
      currency: 'USD',
      content_name: 'Pro plan',
      external_user_id: 'crm-42',
      api_visit_override: null,
    });
    expect(c.pii_hashed).toEqual({
      em: sha('ann@example.com'),
      emGoogle: sha('ann@example.com'),
      ph: sha('442079460958'),
      phE164: sha('+442079460958'),
      fn: sha('ann'),
      externalId: sha('crm-42'),
    });
    expect(JSON.stringify(c)).not.toMatch(/ann@example|7946/i);
    const sends = await db.pool.query(
      'SELECT id, platform, status FROM sends WHERE conversion_id = $1 ORDER BY platform',
      [c.id],
    );
    expect(sends.rows.map((r) => [r.id, r.platform, r.status])).toEqual(
      [...res.body.sends]
        .sort((a, b) => a.platform.localeCompare(b.platform))
        .map((s) => [s.sendId, s.platform, 'pending']),
    );
    // Both due now, and the commit was followed by a wake-up for the delivery worker.
    expect(
      await count(db.pool, `sends WHERE id = ANY($1) AND next_attempt_at <= now()`, [
        res.body.sends.map((s: { sendId: string }) => s.sendId),
      ]),
    ).toBe(2);
    await expect
      .poll(() => count(db.pool, `graphile_worker.jobs WHERE key = 'deliver_due' AND run_at <= now()`))
      .toBe(1);
    const lead = await db.pool.query(
      'SELECT external_user_id FROM leads WHERE site_id = $1 AND telegram_user_id = $2',
      [tenant.site.siteId, user],
    );
    expect(lead.rows[0]?.external_user_id).toBe('crm-42');
  });

  it('keeps a supplied channel of the same site as the destination, with the acquisition visit as attribution', async () => {
    const user = newUser();
    const { visitId } = await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', channelId: tenant.site.channels.second },
      { key: tenant.site.siteKey },
    );
    expect(res.status).toBe(201);
    expect(await conversion(res.body.conversionId)).toMatchObject({
      channel_id: tenant.site.channels.second,
      visit_id: visitId,
    });
  });

  it('stores eventTime as given, custom event names for Custom, and defaults eventTime to now', async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    const at = Date.now() - 3_600_000;
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Custom', customEventName: 'WebinarJoined', eventTime: at },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(201);
    const c = await conversion(res.body.conversionId);
    expect(c.custom_event_name).toBe('WebinarJoined');
    expect(c.event_time.getTime()).toBe(at);

    const before = Date.now();
    const res2 = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Contact' },
      { key: tenant.accountKey },
    );
    const c2 = await conversion(res2.body.conversionId);
    expect(c2.event_time.getTime()).toBeGreaterThanOrEqual(before - 5);
    expect(c2.event_time.getTime()).toBeLessThanOrEqual(Date.now() + 5);
  });
});

describe('client context', () => {
  it('X-Capigram-Client-IP and -User-Agent win over the body fields', async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', clientIp: '192.0.2.9', userAgent: 'Body UA/1.0' },
      {
        key: tenant.accountKey,
        headers: { 'X-Capigram-Client-IP': '198.51.100.23', 'X-Capigram-Client-User-Agent': 'Header UA/2.0' },
      },
    );
    expect(res.status).toBe(201);
    expect(await conversion(res.body.conversionId)).toMatchObject({
      client_ip: '198.51.100.23',
      user_agent: 'Header UA/2.0',
    });
  });

  it('the body fields are used when no header is sent', async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', clientIp: '2001:db8::1', userAgent: 'Body UA/1.0' },
      { key: tenant.accountKey },
    );
    expect(await conversion(res.body.conversionId)).toMatchObject({
      client_ip: '2001:db8::1',
      user_agent: 'Body UA/1.0',
    });
  });
});

describe('cold lead', () => {
  it('stores the supplied attribution as apiVisitOverride and dispatches', async () => {
    const user = newUser();
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        eventType: 'Purchase',
        value: 10,
        currency: 'EUR',
        channelId: tenant.site.channels.main,
        fbc: 'fb.1.1700000000000.IwAR-cold',
        fbp: 'fb.1.1700000000000.987',
        gclid: 'Cj0-gclid',
        ttclid: 'tt-1',
        sccid: 'sc-1',
        clientIp: '203.0.113.50',
        userAgent: 'Cold UA/1.0',
        eventSourceUrl: 'https://shop.example.com/thanks',
      },
      { key: tenant.site.siteKey },
    );
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ coldLead: true, dispatched: true, capiStatus: 'pending' });
    expect(await conversion(res.body.conversionId)).toMatchObject({
      site_id: tenant.site.siteId,
      channel_id: tenant.site.channels.main,
      visit_id: null,
      cold_lead: true,
      event_source_url: 'https://shop.example.com/thanks',
      client_ip: '203.0.113.50',
      user_agent: 'Cold UA/1.0',
      api_visit_override: {
        fbc: 'fb.1.1700000000000.IwAR-cold',
        fbp: 'fb.1.1700000000000.987',
        gclid: 'Cj0-gclid',
        ttclid: 'tt-1',
        sccid: 'sc-1',
        clientIp: '203.0.113.50',
        userAgent: 'Cold UA/1.0',
      },
    });
  });

  it("keeps Google's iOS click ids (gbraid, wbraid) in the override", async () => {
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: newUser(),
        eventType: 'Purchase',
        value: 5,
        currency: 'EUR',
        channelId: tenant.site.channels.main,
        gbraid: '0AAAA-gb',
        wbraid: 'CjkK-wb',
      },
      { key: tenant.site.siteKey },
    );
    expect(res.status).toBe(201);
    expect((await conversion(res.body.conversionId)).api_visit_override).toEqual({
      gbraid: '0AAAA-gb',
      wbraid: 'CjkK-wb',
    });
  });

  it('an account key names the site by websiteId', async () => {
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: newUser(),
        eventType: 'Lead',
        websiteId: tenant.site.websiteId,
        channelId: tenant.site.channels.main,
        fbp: 'fb.1.1700000000000.5',
      },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(201);
    expect((await conversion(res.body.conversionId)).site_id).toBe(tenant.site.siteId);
  });

  it('without any attribution signal nothing is dispatched, and the warning says why', async () => {
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: newUser(), eventType: 'Lead', channelId: tenant.site.channels.main },
      { key: tenant.site.siteKey },
    );
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ coldLead: true, dispatched: false, capiStatus: 'skipped', sends: [] });
    expect(res.body.warning).toMatch(/no attribution signal/);
    expect(await count(db.pool, 'sends WHERE conversion_id = $1', [res.body.conversionId])).toBe(0);
  });
});

describe('no pixel', () => {
  it('a site without an active pixel records the conversion and warns that nothing was dispatched', async () => {
    const bare = await seedTenant(db.pool, t.deps.box, { platforms: [] });
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: bare.site.siteId,
      channelId: bare.site.channels.main,
      telegramUserId: user,
      visit: VISIT,
    });
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Subscribe' },
      { key: bare.accountKey },
    );
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ dispatched: false, capiStatus: 'skipped', sends: [] });
    expect(res.body.warning).toMatch(
      new RegExp(`no active ad platform pixel is configured for site ${bare.site.websiteId}`),
    );
  });
});
