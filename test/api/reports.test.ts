// GET /api/v1/reports/funnel and /reports/match-quality: numbers of journeys with known counts,
// read live and from the roll-up alike, kept through erasure, and scoped to the caller's sites.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { campaignRetention } from '../../backend/domain/reports/retention.js';
import { runRollup } from '../../backend/domain/reports/rollup.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { apiClient, newUser, seedTenant, type ApiClient, type SiteSeed, type Tenant } from './support.js';

let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;
let rival: Tenant;
let site: SiteSeed;

const _DAY = 86_400_000;
const today = Date.UTC(2026, 10, 20); // the app's clock is real; the journeys are dated well before it
const D1 = new Date(Date.UTC(2026, 9, 10, 9)); // 2026-10-10
const D2 = new Date(Date.UTC(2026, 9, 11, 15)); // 2026-10-11
const FROM = '2026-10-10';
const TO = '2026-10-12';

async function visit(v: {
  at: Date;
  utmSource?: string;
  utmCampaign?: string;
  fbc?: string;
  ttclid?: string;
  channelId?: string;
}): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO visits (site_id, temp_id, session_id, utm_source, utm_campaign, fbc, fbp, ttclid, client_ip, user_agent, channel_id, created_at)
     VALUES ($1, gen_random_uuid(), gen_random_uuid(), $2, $3, $4, 'fb.1.1.fbp', $5, '203.0.113.9', 'Mozilla/5.0', $6, $7) RETURNING id`,
    [
      site.siteId,
      v.utmSource ?? null,
      v.utmCampaign ?? null,
      v.fbc ?? null,
      v.ttclid ?? null,
      v.channelId ?? null,
      v.at,
    ],
  );
  return rows[0]!.id;
}

async function inviteClick(channelId: string, visitId: string, at: Date): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO invitations (channel_id, invite_link, visit_id, assigned_at) VALUES ($1, $2, $3, $4) RETURNING id`,
    [channelId, `https://t.me/+${randomBytes(12).toString('base64url')}`, visitId, at],
  );
  return rows[0]!.id;
}

async function membership(
  kind: 'join' | 'leave',
  channelId: string,
  user: number,
  at: Date,
  visitId: string | null = null,
): Promise<void> {
  await db.pool.query(
    `INSERT INTO memberships (channel_id, telegram_user_id, kind, visit_id, attributed, occurred_at) VALUES ($1, $2, $3, $4, $5, $6)`,
    [channelId, user, kind, visitId, kind === 'join' && visitId !== null, at],
  );
}

async function conversion(c: {
  user: number;
  visitId: string | null;
  channelId: string;
  value?: number;
  currency?: string;
  at: Date;
}): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO conversions (site_id, channel_id, telegram_user_id, visit_id, event_type, value, currency, event_time, attributed_at, received_at, source)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $8, 'api') RETURNING id`,
    [
      site.siteId,
      c.channelId,
      c.user,
      c.visitId,
      c.value === undefined ? 'Lead' : 'Purchase',
      c.value ?? null,
      c.currency ?? null,
      c.at,
    ],
  );
  return rows[0]!.id;
}

/**
 * The journeys, on 2026-10-10 (D1) and 2026-10-11 (D2):
 * - Ann: Meta ad (utm fb / spring), invite click, joins main on D1, buys for 30 EUR and 20 USD, leaves on D2.
 * - Bob: TikTok ad (utm tt / autumn), invite click, joins VIP on D1, buys for 10 EUR on D2.
 * - Cat: organic join of main on D2, a Lead with no visit.
 * - two more visits without an invite click: one from Meta (fb / spring) on D1, one with no tags on D2.
 */
let annUser: number;
let purchaseEur: string;
beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
  api = apiClient(t.url);
  tenant = await seedTenant(db.pool, t.deps.box, { sites: 2 });
  rival = await seedTenant(db.pool, t.deps.box);
  site = tenant.site;
  const { main, second } = site.channels;

  annUser = newUser();
  const ann = await visit({
    at: D1,
    utmSource: 'fb',
    utmCampaign: 'spring',
    fbc: 'fb.1.1.ann',
    channelId: main,
  });
  await inviteClick(main, ann, new Date(D1.getTime() + 60_000));
  await membership('join', main, annUser, new Date(D1.getTime() + 120_000), ann);
  purchaseEur = await conversion({
    user: annUser,
    visitId: ann,
    channelId: main,
    value: 30,
    currency: 'EUR',
    at: new Date(D1.getTime() + 3_600_000),
  });
  await conversion({
    user: annUser,
    visitId: ann,
    channelId: main,
    value: 20,
    currency: 'USD',
    at: new Date(D1.getTime() + 7_200_000),
  });
  await membership('leave', main, annUser, D2);

  const bobUser = newUser();
  const bob = await visit({
    at: D1,
    utmSource: 'tt',
    utmCampaign: 'autumn',
    ttclid: 'E.C.P.bob',
    channelId: second,
  });
  await inviteClick(second, bob, new Date(D1.getTime() + 60_000));
  await membership('join', second, bobUser, new Date(D1.getTime() + 120_000), bob);
  await conversion({ user: bobUser, visitId: bob, channelId: second, value: 10, currency: 'EUR', at: D2 });

  const catUser = newUser();
  await membership('join', main, catUser, D2);
  await conversion({ user: catUser, visitId: null, channelId: main, at: D2 });

  await visit({ at: D1, utmSource: 'fb', utmCampaign: 'spring', fbc: 'fb.1.1.other' });
  await visit({ at: D2 });
});
afterAll(async () => {
  await t.stop();
  await db.drop();
});

const funnel = (query: string, key: string | null = site.siteKey) =>
  api.get(`/reports/funnel?${query}`, { key });

const TOTALS = {
  visits: 4,
  inviteClicks: 2,
  clickedVisits: 2,
  joinedVisits: 2,
  joins: 3,
  attributedJoins: 2,
  organicJoins: 1,
  leaves: 1,
  retained: 2,
  conversions: 4,
  value: { EUR: 40, USD: 20 },
};

describe('funnel', () => {
  it('counts the journeys by day, every day of the range listed', async () => {
    const res = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}&groupBy=day`);
    expect(res.status).toBe(200);
    expect(res.body.totals).toEqual(TOTALS);
    expect(res.body.rows.map((r: any) => r.key)).toEqual(['2026-10-10', '2026-10-11', '2026-10-12']);
    const [d1, d2, d3] = res.body.rows;
    expect(d1).toMatchObject({
      visits: 3,
      inviteClicks: 2,
      joins: 2,
      attributedJoins: 2,
      organicJoins: 0,
      leaves: 0,
      conversions: 2,
      value: { EUR: 30, USD: 20 },
    });
    // Ann's join of D1 ended on D2: D1's joins keep one member, the leave shows on D2.
    expect(d1.retained).toBe(1);
    expect(d2).toMatchObject({
      visits: 1,
      joins: 1,
      organicJoins: 1,
      leaves: 1,
      retained: 1,
      conversions: 2,
      value: { EUR: 10 },
    });
    expect(d3).toEqual({
      key: '2026-10-12',
      visits: 0,
      inviteClicks: 0,
      clickedVisits: 0,
      joinedVisits: 0,
      joins: 0,
      attributedJoins: 0,
      organicJoins: 0,
      leaves: 0,
      retained: 0,
      conversions: 0,
      value: {},
    });
  });

  it('groups by campaign, source, platform and channel, values per currency apart', async () => {
    const byCampaign = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}&groupBy=utm_campaign`);
    const rows = Object.fromEntries(byCampaign.body.rows.map((r: any) => [String(r.key), r]));
    expect(rows.spring).toMatchObject({
      visits: 2,
      inviteClicks: 1,
      joins: 1,
      attributedJoins: 1,
      leaves: 1,
      retained: 0,
      conversions: 2,
      value: { EUR: 30, USD: 20 },
    });
    expect(rows.autumn).toMatchObject({
      visits: 1,
      joins: 1,
      retained: 1,
      conversions: 1,
      value: { EUR: 10 },
    });
    expect(rows.null).toMatchObject({ visits: 1, joins: 1, organicJoins: 1, conversions: 1, value: {} });
    expect(byCampaign.body.totals).toEqual(TOTALS);

    const byPlatform = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}&groupBy=platform`);
    const p = Object.fromEntries(byPlatform.body.rows.map((r: any) => [r.key, r]));
    expect(Object.keys(p).sort()).toEqual(['meta', 'none', 'tiktok']);
    expect(p.meta).toMatchObject({ visits: 2, joins: 1, value: { EUR: 30, USD: 20 } });
    expect(p.tiktok).toMatchObject({ visits: 1, joins: 1, value: { EUR: 10 } });
    expect(p.none).toMatchObject({ visits: 1, joins: 1, organicJoins: 1 });

    const bySource = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}&groupBy=utm_source`);
    expect(bySource.body.rows.find((r: any) => r.key === 'fb')).toMatchObject({ visits: 2, joins: 1 });

    const byChannel = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}&groupBy=channel`);
    const c = Object.fromEntries(byChannel.body.rows.map((r: any) => [String(r.key), r]));
    expect(c[site.channels.main]).toMatchObject({
      visits: 1,
      inviteClicks: 1,
      joins: 2,
      attributedJoins: 1,
      organicJoins: 1,
      leaves: 1,
      retained: 1,
      conversions: 3,
      value: { EUR: 30, USD: 20 },
    });
    expect(c[site.channels.second]).toMatchObject({
      visits: 1,
      inviteClicks: 1,
      joins: 1,
      attributedJoins: 1,
      retained: 1,
      conversions: 1,
      value: { EUR: 10 },
    });
    expect(c.null).toMatchObject({ visits: 2, joins: 0 });

    // One channel of the site: what concerns it alone.
    const vip = await funnel(
      `siteId=${site.siteId}&from=${FROM}&to=${TO}&groupBy=utm_campaign&channelId=${site.channels.second}`,
    );
    expect(vip.body.channelId).toBe(site.channels.second);
    expect(vip.body.totals).toEqual({
      visits: 1,
      inviteClicks: 1,
      clickedVisits: 1,
      joinedVisits: 1,
      joins: 1,
      attributedJoins: 1,
      organicJoins: 0,
      leaves: 0,
      retained: 1,
      conversions: 1,
      value: { EUR: 10 },
    });
    expect(vip.body.rows.map((r: any) => r.key)).toEqual(['autumn']);
    const foreign = await funnel(`siteId=${site.siteId}&channelId=${tenant.sites[1]!.channels.main}`);
    expect([foreign.status, foreign.body.code]).toEqual([400, 'VALIDATION_FAILED']);
  });

  it('answers zeros for an empty range, and the same numbers once the days are rolled up', async () => {
    const empty = await funnel(`siteId=${site.siteId}&from=2025-01-01&to=2025-01-02&groupBy=utm_campaign`);
    expect(empty.status).toBe(200);
    expect(empty.body.rows).toEqual([]);
    expect(empty.body.totals).toEqual({
      ...TOTALS,
      visits: 0,
      inviteClicks: 0,
      clickedVisits: 0,
      joinedVisits: 0,
      joins: 0,
      attributedJoins: 0,
      organicJoins: 0,
      leaves: 0,
      retained: 0,
      conversions: 0,
      value: {},
    });

    const live = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}&groupBy=utm_campaign`);
    const out = await runRollup(db.pool, new Date(today));
    expect(out.sealed).toBeGreaterThanOrEqual(3);
    expect(await count(`report_rows WHERE site_id = $1`, [site.siteId])).toBeGreaterThan(0);
    const rolled = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}&groupBy=utm_campaign`);
    expect(rolled.body).toEqual(live.body);
    // The sealed days are read from the roll-up, not from the raw rows: a mark in the roll-up shows.
    await db.pool.query(
      `UPDATE report_rows SET visits = visits + 100 WHERE site_id = $1 AND visits > 0 AND day = '2026-10-11'`,
      [site.siteId],
    );
    expect((await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}`)).body.totals.visits).toBe(104);
    await db.pool.query(
      `UPDATE report_rows SET visits = visits - 100 WHERE site_id = $1 AND visits > 0 AND day = '2026-10-11'`,
      [site.siteId],
    );
    const byDay = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}`);
    expect(byDay.body.totals).toEqual(TOTALS);
    expect(byDay.body.rows[0].retained).toBe(1);
  });

  it('reads a rolled-up day live again when a late row changes it, until the next run', async () => {
    await runRollup(db.pool, new Date(today));
    await db.pool.query(`UPDATE conversions SET value = 35 WHERE id = $1`, [purchaseEur]);
    expect(await count(`report_dirty WHERE site_id = $1`, [site.siteId])).toBe(1);
    const dirty = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}`);
    expect(dirty.body.totals.value).toEqual({ EUR: 45, USD: 20 });
    const out = await runRollup(db.pool, new Date(today));
    expect(out.resealed).toBe(1);
    expect(await count(`report_dirty WHERE site_id = $1`, [site.siteId])).toBe(0);
    const after = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}`);
    expect(after.body).toEqual(dirty.body);
    await db.pool.query(`UPDATE conversions SET value = 30 WHERE id = $1`, [purchaseEur]);
    await runRollup(db.pool, new Date(today));
  });

  it('counts a join Telegram reported late into its sealed day', async () => {
    await runRollup(db.pool, new Date(today));
    const late = newUser();
    await membership('join', site.channels.main, late, new Date(Date.UTC(2026, 9, 12, 8)));
    expect(await count(`report_dirty WHERE site_id = $1 AND day = '2026-10-12'`, [site.siteId])).toBe(1);
    const dirty = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}`);
    expect(dirty.body.totals).toMatchObject({ joins: 4, organicJoins: 2 });
    expect(dirty.body.rows[2]).toMatchObject({ key: '2026-10-12', joins: 1, retained: 1 });
    await runRollup(db.pool, new Date(today));
    expect((await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}`)).body).toEqual(dirty.body);
    await db.pool.query('DELETE FROM memberships WHERE telegram_user_id = $1', [late]);
    await db.pool.query(`INSERT INTO report_dirty (site_id, day) VALUES ($1, '2026-10-12')`, [site.siteId]);
    await runRollup(db.pool, new Date(today));
  });

  it('keeps its totals when a lead is erased', async () => {
    const before = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}&groupBy=platform`);
    const res = await fetch(`${t.url}/api/v1/leads/${annUser}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${site.siteKey}` },
    });
    expect(res.status).toBe(204);
    const after = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}&groupBy=platform`);
    expect(after.body).toEqual(before.body);
    // Also when the days are read live: the raw rows keep their counts.
    await db.pool.query('DELETE FROM report_sealed WHERE site_id = $1', [site.siteId]);
    await db.pool.query('DELETE FROM report_rows WHERE site_id = $1', [site.siteId]);
    const live = await funnel(`siteId=${site.siteId}&from=${FROM}&to=${TO}`);
    expect(live.body.totals).toEqual(TOTALS);
  });

  it("gives the retention of each campaign's joins after 1, 7 and 30 days, once that long has passed", async () => {
    const at = (today: string) =>
      campaignRetention(db.pool, { siteId: site.siteId, from: FROM, to: TO, today });
    // Ann (spring) stayed a day and some hours; Bob (autumn) and Cat (organic) stayed.
    expect(await at('2026-11-20')).toEqual([
      { campaign: 'autumn', joins: 1, retained: { d1: 1, d7: 1, d30: 1 } },
      { campaign: 'spring', joins: 1, retained: { d1: 1, d7: 0, d30: 0 } },
      { campaign: null, joins: 1, retained: { d1: 1, d7: 1, d30: 1 } },
    ]);
    // Ten days after: the 30-day horizon has not passed for any of these joins yet.
    const early = await at('2026-10-20');
    expect(early.find((r) => r.campaign === 'spring')!.retained).toEqual({ d1: 1, d7: 0, d30: null });
  });

  it('refuses malformed ranges and groupings with 400', async () => {
    for (const q of [
      'from=2026-13-01',
      'to=2026-02-30',
      'from=2026-10-12&to=2026-10-10',
      'from=2020-01-01&to=2026-01-01',
      'groupBy=week',
      'from=yesterday',
      'from=0000-01-01&to=0000-01-05',
      'to=0000-12-31',
    ]) {
      const res = await funnel(`siteId=${site.siteId}&${q}`);
      expect(res.status, q).toBe(400);
      expect(res.body.code, q).toBe('VALIDATION_FAILED');
    }
  });

  it('answers for the first and the last day the calendar holds', async () => {
    for (const path of ['/reports/funnel', '/reports/match-quality'])
      for (const q of ['from=0001-01-01&to=0001-01-03', 'to=0001-01-02', 'from=9999-12-30&to=9999-12-31']) {
        const res = await api.get(`${path}?siteId=${site.siteId}&${q}`, { key: site.siteKey });
        expect(res.status, `${path}?${q}: ${JSON.stringify(res.body)}`).toBe(200);
      }
  });
});

async function count(sql: string, params: unknown[]): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, params);
  return rows[0]!.n;
}

describe.each(['/reports/funnel', '/reports/match-quality'])('tenant isolation of %s', (path) => {
  it('answers only for the sites a key may see', async () => {
    const q = `from=${FROM}&to=${TO}`;
    expect((await api.get(`${path}?siteId=${site.siteId}&${q}`, { key: tenant.accountKey })).status).toBe(
      200,
    );
    expect((await api.get(`${path}?websiteId=${site.websiteId}&${q}`, { key: site.siteKey })).status).toBe(
      200,
    );
    const noKey = await api.get(`${path}?siteId=${site.siteId}&${q}`, { key: null });
    expect(noKey.status).toBe(401);
    const otherSite = await api.get(`${path}?siteId=${site.siteId}&${q}`, { key: tenant.sites[1]!.siteKey });
    expect([otherSite.status, otherSite.body.code]).toEqual([403, 'FORBIDDEN']);
    const otherAccount = await api.get(`${path}?siteId=${site.siteId}&${q}`, { key: rival.accountKey });
    expect([otherAccount.status, otherAccount.body.code]).toEqual([404, 'UNKNOWN_WEBSITE']);
    const noSite = await api.get(`${path}?${q}`, { key: tenant.accountKey });
    expect([noSite.status, noSite.body.code]).toEqual([400, 'SITE_REQUIRED']);
    // The rival's own site reports its own (empty) numbers, never this site's.
    const own = await api.get(`${path}?${q}`, { key: rival.site.siteKey });
    expect(own.status).toBe(200);
    if (path.endsWith('funnel')) expect(own.body.totals.visits).toBe(0);
    else expect(own.body.rows).toEqual([]);
  });
});

describe('match quality', () => {
  it('gives per platform and event type the share of delivered events carrying each signal, and what to fix', async () => {
    const other = tenant.sites[1]!;
    const { main } = other.channels;
    const { rows: v } = await db.pool.query<{ id: string }>(
      `INSERT INTO visits (site_id, temp_id, session_id, fbc, fbp, client_ip, user_agent, utm_campaign) VALUES ($1, gen_random_uuid(), gen_random_uuid(), 'fb.1.1.mq', 'fb.1.1.fbp', '203.0.113.5', 'Mozilla/5.0', 'mq') RETURNING id`,
      [other.siteId],
    );
    // Four warm leads from the visit, a Purchase each: one with an e-mail; one failed (not counted).
    const ids: string[] = [];
    for (const [i, pii] of [{ email: 'a@example.com' }, {}, {}, {}].entries()) {
      const user = newUser();
      await db.pool.query(
        `INSERT INTO memberships (channel_id, telegram_user_id, kind, visit_id, attributed, occurred_at) VALUES ($1, $2, 'join', $3, true, now())`,
        [main, user, v[0]!.id],
      );
      const res = await api.post(
        '/events/conversion',
        {
          telegramUserId: user,
          eventType: 'Purchase',
          value: 10 + i,
          currency: 'EUR',
          channelId: main,
          pii,
          contentName: `order ${i}`,
        },
        { key: other.siteKey },
      );
      expect(res.status).toBe(201);
      ids.push(res.body.conversionId);
    }
    await db.pool.query(
      `UPDATE sends SET status = 'sent', sent_at = now() WHERE conversion_id = ANY($1::uuid[])`,
      [ids.slice(0, 3)],
    );
    await db.pool.query(`UPDATE sends SET status = 'failed', last_error = 'boom' WHERE conversion_id = $1`, [
      ids[3],
    ]);
    // An organic join of the public channel: most of its joins are organic.
    await db.pool.query(`UPDATE channels SET chat_is_public = true WHERE id = $1`, [other.channels.second]);
    await db.pool.query(
      `INSERT INTO memberships (channel_id, telegram_user_id, kind, occurred_at) VALUES ($1, $2, 'join', now())`,
      [other.channels.second, newUser()],
    );

    const res = await api.get(`/reports/match-quality?siteId=${other.siteId}`, { key: tenant.accountKey });
    expect(res.status).toBe(200);
    const purchase = res.body.rows.find((r: any) => r.platform === 'meta' && r.eventType === 'Purchase');
    expect(purchase.sent).toBe(3);
    expect(purchase.shares).toEqual({
      fbc: 1,
      fbp: 1,
      ip: 1,
      userAgent: 1,
      email: 0.3333,
      phone: 0,
      externalId: 1,
      clickId: 1,
    });
    expect(purchase.advice).toContain(
      '67 % of Purchases carry no e-mail: send `pii.email` from your backend.',
    );
    expect(purchase.advice.some((a: string) => a.includes('no phone'))).toBe(true);
    expect(purchase.advice.some((a: string) => a.includes('fbc'))).toBe(false);

    const coverage = Object.fromEntries(res.body.coverage.map((c: any) => [c.channelId, c]));
    expect(coverage[main]).toMatchObject({ attributedJoins: 4, organicJoins: 0, share: 1 });
    expect(coverage[main].warning).toBeUndefined();
    expect(coverage[other.channels.second]).toMatchObject({
      attributedJoins: 0,
      organicJoins: 1,
      share: 0,
      isPublic: true,
    });
    expect(coverage[other.channels.second].warning).toMatch(/public channel/);
  });
});
