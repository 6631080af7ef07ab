// GET /api/v1/channels: a site's active channels, or the account's with their site.
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../harness/db.js';
import type { TestApp } from '../harness/app.js';
import { type ApiClient, apiWorld, seedTenant, type Tenant } from './support.js';

const world = apiWorld({ tenant: { sites: 2 } });
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;
let rival: Tenant;

beforeAll(async () => {
  ({ db, t, api, tenant } = world);
  rival = await seedTenant(db.pool, t.deps.box);
  await db.pool.query(`UPDATE channels SET username = 'vip_club' WHERE id = $1`, [
    tenant.site.channels.second,
  ]);
});

type Channel = {
  channelId: string;
  siteId?: string;
  siteDomain?: string;
  telegramChannelId: string;
  title: string;
  username?: string;
  funnelOrder: number;
  eventType: string;
};

describe('GET /channels', () => {
  it("a site key lists its site's active channels in funnel order, without site fields", async () => {
    const res = await api.get<{ channels: Channel[] }>('/channels', { key: tenant.site.siteKey });
    expect(res.status).toBe(200);
    const { rows } = await db.pool.query('SELECT telegram_chat_id FROM channels WHERE id = $1', [
      tenant.site.channels.main,
    ]);
    expect(res.body.channels).toEqual([
      {
        channelId: tenant.site.channels.main,
        telegramChannelId: String(rows[0].telegram_chat_id),
        title: 'Main',
        funnelOrder: 0,
        eventType: 'Subscribe',
      },
      expect.objectContaining({
        channelId: tenant.site.channels.second,
        title: 'VIP',
        username: 'vip_club',
        funnelOrder: 1,
        eventType: 'Purchase',
      }),
    ]);
    expect(res.body.channels[0]!.telegramChannelId).toMatch(/^-100\d+$/);
  });

  it('inactive channels are left out', async () => {
    await db.pool.query('UPDATE channels SET active = false WHERE id = $1', [
      tenant.sites[1]!.channels.second,
    ]);
    const res = await api.get<{ channels: Channel[] }>('/channels', { key: tenant.sites[1]!.siteKey });
    expect(res.body.channels.map((c) => c.channelId)).toEqual([tenant.sites[1]!.channels.main]);
  });

  it('an account key lists every site of the account, each channel with siteId and siteDomain', async () => {
    const res = await api.get<{ channels: Channel[] }>('/channels', { key: tenant.accountKey });
    const expected = [
      tenant.sites[0]!.channels.main,
      tenant.sites[0]!.channels.second,
      tenant.sites[1]!.channels.main,
    ];
    expect(res.body.channels.map((c) => c.channelId)).toEqual(expected);
    expect(res.body.channels[0]).toMatchObject({
      siteId: tenant.sites[0]!.siteId,
      siteDomain: expect.stringMatching(/^shop0-.*\.example\.com$/),
    });
    expect(res.body.channels[2]).toMatchObject({ siteId: tenant.sites[1]!.siteId });
  });

  it('an account key with siteId or websiteId lists that site only', async () => {
    for (const q of [`siteId=${tenant.sites[1]!.siteId}`, `websiteId=${tenant.sites[1]!.websiteId}`]) {
      const res = await api.get<{ channels: Channel[] }>(`/channels?${q}`, { key: tenant.accountKey });
      expect(res.body.channels).toEqual([
        expect.objectContaining({ channelId: tenant.sites[1]!.channels.main }),
      ]);
      expect(res.body.channels[0]!.siteId).toBeUndefined();
    }
  });
});

describe('security', () => {
  it("never lists another account's channels", async () => {
    const mine = await api.get<{ channels: Channel[] }>('/channels', { key: tenant.accountKey });
    const theirs = new Set([rival.site.channels.main, rival.site.channels.second]);
    expect(mine.body.channels.some((c) => theirs.has(c.channelId))).toBe(false);
    expect(
      (await api.get(`/channels?websiteId=${rival.site.websiteId}`, { key: tenant.accountKey })).body,
    ).toMatchObject({ status: 404, code: 'UNKNOWN_WEBSITE' });
  });

  it('a site key naming another site → 403', async () => {
    const res = await api.get(`/channels?siteId=${tenant.sites[1]!.siteId}`, {
      key: tenant.sites[0]!.siteKey,
    });
    expect(res).toMatchObject({ status: 403, body: { code: 'FORBIDDEN' } });
  });

  it('no key → 401; a bad query → 400', async () => {
    expect((await api.get('/channels')).status).toBe(401);
    expect((await api.get(`/channels?siteId=${'x'.repeat(101)}`, { key: tenant.accountKey })).status).toBe(
      400,
    );
  });
});
