// GET /api/v1/leads/{telegramUserId}: the Lead resource on the resolved site.
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../harness/db.js';
import type { TestApp } from '../harness/app.js';
import { type ApiClient, apiWorld, attributedJoin, newUser, seedTenant, type Tenant } from './support.js';

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

describe('happy paths', () => {
  it('returns the lead with Unix-ms timestamps and its conversions, oldest first', async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    const at = Date.now() - 60_000;
    const a = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', eventTime: at, externalUserId: 'crm-7' },
      { key: tenant.accountKey },
    );
    const b = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Purchase', value: 19.99, currency: 'EUR', contentName: 'Box' },
      { key: tenant.accountKey },
    );
    const res = await api.get(`/leads/${user}`, { key: tenant.site.siteKey });
    expect(res.status).toBe(200);
    const lead = res.body;
    expect(lead).toMatchObject({ telegramUserId: user, siteId: tenant.site.siteId, externalUserId: 'crm-7' });
    expect(lead.firstSeenAt).toBeTypeOf('number');
    expect(lead.lastSeenAt).toBeGreaterThanOrEqual(lead.firstSeenAt);
    expect(lead.conversions).toEqual([
      {
        conversionId: a.body.conversionId,
        channelId: tenant.site.channels.main,
        eventType: 'Lead',
        capiStatus: 'pending',
        awaitingManualInput: false,
        coldLead: false,
        attributedAt: at,
        eventTime: at,
        source: 'api',
      },
      expect.objectContaining({
        conversionId: b.body.conversionId,
        eventType: 'Purchase',
        eventValue: 19.99,
        eventCurrency: 'EUR',
        contentName: 'Box',
        source: 'api',
      }),
    ]);
  });

  it("shows a cold lead's apiVisitOverride", async () => {
    const user = newUser();
    await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        eventType: 'Lead',
        channelId: tenant.site.channels.main,
        fbc: 'fb.1.1700000000000.c',
      },
      { key: tenant.site.siteKey },
    );
    const res = await api.get(`/leads/${user}`, { key: tenant.site.siteKey });
    expect(res.body.conversions[0]).toMatchObject({
      coldLead: true,
      apiVisitOverride: { fbc: 'fb.1.1700000000000.c' },
    });
  });

  it('an account key: the one site the lead is on; with several, siteId or websiteId chooses (else 400 SITE_REQUIRED)', async () => {
    const user = newUser();
    for (const s of tenant.sites)
      await api.post(
        '/events/conversion',
        {
          telegramUserId: user,
          eventType: 'Lead',
          siteId: s.siteId,
          channelId: s.channels.main,
          fbp: 'fb.1.1.1',
        },
        { key: tenant.accountKey },
      );
    const ambiguous = await api.get(`/leads/${user}`, { key: tenant.accountKey });
    expect(ambiguous).toMatchObject({ status: 400, body: { code: 'SITE_REQUIRED' } });
    const chosen = await api.get(`/leads/${user}?websiteId=${tenant.sites[1]!.websiteId}`, {
      key: tenant.accountKey,
    });
    expect(chosen.body.siteId).toBe(tenant.sites[1]!.siteId);

    const single = newUser();
    await api.post(
      '/events/conversion',
      {
        telegramUserId: single,
        eventType: 'Lead',
        channelId: tenant.sites[1]!.channels.main,
        fbp: 'fb.1.1.1',
      },
      { key: tenant.sites[1]!.siteKey },
    );
    expect((await api.get(`/leads/${single}`, { key: tenant.accountKey })).body.siteId).toBe(
      tenant.sites[1]!.siteId,
    );
  });
});

describe('errors and security', () => {
  it('404 LEAD_NOT_FOUND for an unknown user and for a lead row without a conversion', async () => {
    expect((await api.get(`/leads/${newUser()}`, { key: tenant.accountKey })).body.code).toBe(
      'LEAD_NOT_FOUND',
    );
    const user = newUser();
    await db.pool.query('INSERT INTO leads (site_id, telegram_user_id) VALUES ($1, $2)', [
      tenant.site.siteId,
      user,
    ]);
    expect((await api.get(`/leads/${user}`, { key: tenant.site.siteKey })).body).toMatchObject({
      status: 404,
      code: 'LEAD_NOT_FOUND',
    });
  });

  it("a site key never reads another site's lead: 404 without a site, 403 naming it", async () => {
    const user = newUser();
    await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', channelId: tenant.sites[1]!.channels.main, fbp: 'fb.1.1.1' },
      { key: tenant.sites[1]!.siteKey },
    );
    expect((await api.get(`/leads/${user}`, { key: tenant.sites[0]!.siteKey })).status).toBe(404);
    expect(
      (await api.get(`/leads/${user}?siteId=${tenant.sites[1]!.siteId}`, { key: tenant.sites[0]!.siteKey }))
        .body.code,
    ).toBe('FORBIDDEN');
  });

  it("an account key never reads another account's lead", async () => {
    const user = newUser();
    await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', channelId: rival.site.channels.main, fbp: 'fb.1.1.1' },
      { key: rival.site.siteKey },
    );
    expect((await api.get(`/leads/${user}`, { key: rival.accountKey })).status).toBe(200);
    expect((await api.get(`/leads/${user}`, { key: tenant.accountKey })).body.code).toBe('LEAD_NOT_FOUND');
    expect(
      (await api.get(`/leads/${user}?websiteId=${rival.site.websiteId}`, { key: tenant.accountKey })).body
        .code,
    ).toBe('UNKNOWN_WEBSITE');
  });

  it.each(['abc', '0', '99999999999999999'])('a path user id %s → 400', async (id) => {
    expect((await api.get(`/leads/${id}`, { key: tenant.accountKey })).status).toBe(400);
  });

  it('a repeated query parameter → 400', async () => {
    expect((await api.get(`/leads/1?siteId=a&siteId=b`, { key: tenant.accountKey })).status).toBe(400);
  });
});
