// Tenancy on the write path: a site-scoped key writes only to its site, an account-scoped key only
// to its account, nothing of another tenant leaks through an answer, and keys never reach the logs.
import { Writable } from 'node:stream';
import { serve } from '@hono/node-server';
import { pino } from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../backend/domain/admin/api-keys.js';
import { createApp } from '../../backend/http/app.js';
import type { TestDatabase } from '../harness/db.js';
import { testDeps, type TestApp } from '../harness/app.js';
import {
  apiClient,
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

const [A, B] = [0, 1];
const rivalWrites = () => count(db.pool, 'conversions WHERE site_id = $1', [rival.site.siteId]);

describe('a site-scoped key', () => {
  it('is refused (403) when it names another site, by id or by websiteId, even of its own account', async () => {
    const user = newUser();
    const s = tenant.sites;
    for (const ref of [
      { siteId: s[B]!.siteId },
      { websiteId: s[B]!.websiteId },
      { siteId: rival.site.siteId },
      { websiteId: 'ws_nonexistent' },
    ]) {
      const res = await api.post(
        '/events/conversion',
        { telegramUserId: user, eventType: 'Lead', channelId: s[B]!.channels.main, ...ref },
        { key: s[A]!.siteKey },
      );
      expect(res.status, JSON.stringify(ref)).toBe(403);
      expect(res.body.code).toBe('FORBIDDEN');
    }
    expect(await count(db.pool, 'conversions WHERE telegram_user_id = $1', [user])).toBe(0);
  });

  it("never uses another site's acquisition: the user is a cold lead on its own site", async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.sites[B]!.siteId,
      channelId: tenant.sites[B]!.channels.main,
      telegramUserId: user,
    });
    const noChannel = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead' },
      { key: tenant.sites[A]!.siteKey },
    );
    expect(noChannel.body.code).toBe('CHANNEL_REQUIRED');
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', channelId: tenant.sites[A]!.channels.main },
      { key: tenant.sites[A]!.siteKey },
    );
    expect(res.status).toBe(201);
    expect(res.body.coldLead).toBe(true);
    const { rows } = await db.pool.query('SELECT site_id, visit_id FROM conversions WHERE id = $1', [
      res.body.conversionId,
    ]);
    expect(rows[0]).toEqual({ site_id: tenant.sites[A]!.siteId, visit_id: null });
  });

  it("cannot send a warm lead's event to another site's channel", async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.sites[A]!.siteId,
      channelId: tenant.sites[A]!.channels.main,
      telegramUserId: user,
    });
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', channelId: tenant.sites[B]!.channels.main },
      { key: tenant.sites[A]!.siteKey },
    );
    const { rows } = await db.pool.query('SELECT site_id, channel_id FROM conversions WHERE id = $1', [
      res.body.conversionId,
    ]);
    expect(rows[0]).toEqual({ site_id: tenant.sites[A]!.siteId, channel_id: tenant.sites[A]!.channels.main });
  });
});

describe('an account-scoped key', () => {
  it("cannot name another account's site: 404 UNKNOWN_WEBSITE, the answer for a site that does not exist", async () => {
    const before = await rivalWrites();
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: newUser(),
        eventType: 'Lead',
        siteId: rival.site.siteId,
        channelId: rival.site.channels.main,
      },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('UNKNOWN_WEBSITE');
    expect(await rivalWrites()).toBe(before);
  });

  it("never resolves a user through another account's history", async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: rival.site.siteId,
      channelId: rival.site.channels.main,
      telegramUserId: user,
    });
    await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead' },
      { key: rival.accountKey },
    );
    const before = await rivalWrites();
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Purchase', value: 1, currency: 'USD' },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('SITE_REQUIRED');
    expect(JSON.stringify(res.body)).not.toContain(rival.site.siteId);
    expect(await rivalWrites()).toBe(before);
  });

  it("cannot use another account's channel for a cold lead", async () => {
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: newUser(),
        eventType: 'Lead',
        siteId: tenant.site.siteId,
        channelId: rival.site.channels.main,
      },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('FORBIDDEN');
  });
});

describe('keys stay out of the logs', () => {
  it('neither a valid, a revoked nor a forged key appears in any log line, even at debug level', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write: (chunk, _enc, done) => {
        lines.push(String(chunk));
        done();
      },
    });
    const deps = { ...testDeps(db.pool), log: pino({ level: 'debug' }, sink) };
    const app = createApp(deps);
    const server = await new Promise<ReturnType<typeof serve>>((ok) => {
      const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => ok(s));
    });
    const port = (server.address() as { port: number }).port;
    const local = apiClient(`http://127.0.0.1:${port}`);
    const extra = await seedTenant(db.pool, t.deps.box);
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: extra.site.siteId,
      channelId: extra.site.channels.main,
      telegramUserId: user,
    });
    try {
      await local.post(
        '/events/conversion',
        { telegramUserId: user, eventType: 'Lead' },
        { key: extra.accountKey },
      );
      await local.post(
        '/events/conversion',
        { telegramUserId: user, eventType: 'Lead' },
        { key: extra.accountKey.replace(/.$/, '#') },
      );
      await revokeApiKey(db.pool, extra.site.siteKeyId);
      await local.get('/channels', { key: extra.site.siteKey });
    } finally {
      await new Promise<void>((ok) => server.close(() => ok()));
    }
    const logged = lines.join('');
    expect(lines.length).toBeGreaterThan(2);
    for (const key of [extra.accountKey, extra.site.siteKey]) {
      expect(logged).not.toContain(key);
      // The secret part is everything after `cgk_<prefix>_`; base64url may itself contain `_`.
      const secret = key.slice('cgk_'.length + 12 + 1);
      expect(secret).toHaveLength(43);
      expect(logged).not.toContain(secret);
    }
  });
});
