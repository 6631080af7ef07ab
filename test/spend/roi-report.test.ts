// The ROI report: spend rows and journeys written by hand, and the report's cost per join, cost per
// retained join and ROAS checked to the cent; campaign keys of each kind; currencies kept apart;
// the same figures live and from the roll-up; the API's scoping and validation, and the CLI.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runRollup } from '../../backend/domain/reports/rollup.js';
import { roiReport, type RoiGroupBy } from '../../backend/domain/reports/roi.js';
import { runWith, SECRET_KEY_HEX } from '../cli/harness.js';
import {
  apiClient,
  newUser,
  seedTenant,
  type ApiClient,
  type SiteSeed,
  type Tenant,
} from '../api/support.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { scratchDir } from '../harness/scratch.js';

let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;
let rival: Tenant;
let site: SiteSeed;

const FROM = '2026-10-01';
const TO = '2026-10-03';
/** Well after the range: every join is old enough for both horizons. */
const TODAY = '2026-11-20';
const SNAP = '6f1a2b3c-0000-4a5b-9c8d-112233445566';
const at = (day: string, hour = 10) => new Date(`${day}T${String(hour).padStart(2, '0')}:00:00Z`);

async function source(platform: string, currency: string): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO spend_sources (site_id, platform, account_ref, credentials, currency, time_zone)
     VALUES ($1, $2, $3, 'sealed', $4, 'UTC') RETURNING id`,
    [site.siteId, platform, `acct-${randomBytes(4).toString('hex')}`, currency],
  );
  return rows[0]!.id;
}

async function spend(
  sourceId: string,
  day: string,
  campaignId: string,
  name: string,
  currency: string,
  amount: number,
  clicks: number,
  adSet = '',
): Promise<void> {
  await db.pool.query(
    `INSERT INTO spend_daily (source_id, day, campaign_id, ad_set_id, campaign_name, currency, spend, impressions, clicks)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8 * 20, $8)`,
    [sourceId, day, campaignId, adSet, name, currency, amount, clicks],
  );
}

async function visit(
  day: string,
  landing: string,
  click: { fbc?: string; gclid?: string; ttclid?: string; sccid?: string } = {},
  utmCampaign: string | null = null,
): Promise<string> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO visits (site_id, temp_id, session_id, landing_page, href, utm_campaign, fbc, gclid, ttclid, sccid, channel_id, created_at)
     VALUES ($1, gen_random_uuid(), gen_random_uuid(), $2, 'https://shop.example.com/thanks', $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
    [
      site.siteId,
      landing,
      utmCampaign,
      click.fbc ?? null,
      click.gclid ?? null,
      click.ttclid ?? null,
      click.sccid ?? null,
      site.channels.main,
      at(day, 9),
    ],
  );
  return rows[0]!.id;
}

async function member(
  kind: 'join' | 'leave',
  user: number,
  when: Date,
  visitId: string | null,
): Promise<void> {
  await db.pool.query(
    `INSERT INTO memberships (channel_id, telegram_user_id, kind, visit_id, attributed, occurred_at) VALUES ($1, $2, $3, $4, $5, $6)`,
    [site.channels.main, user, kind, visitId, kind === 'join' && visitId !== null, when],
  );
}

/** A visit that joins on its day (and leaves `leftAfter` days later), with a purchase if given. */
async function journey(
  visitId: string | null,
  day: string,
  o: { leftAfter?: number; value?: [number, string] } = {},
): Promise<void> {
  const user = newUser();
  await member('join', user, at(day, 10), visitId);
  if (o.leftAfter !== undefined)
    await member('leave', user, new Date(at(day, 10).getTime() + o.leftAfter * 86_400_000 + 60_000), null);
  if (o.value)
    await db.pool.query(
      `INSERT INTO conversions (site_id, channel_id, telegram_user_id, visit_id, event_type, value, currency, event_time, attributed_at, received_at, source)
       VALUES ($1, $2, $3, $4, 'Purchase', $5, $6, $7, $7, $7, 'api')`,
      [site.siteId, site.channels.main, user, visitId, o.value[0], o.value[1], at(day, 11)],
    );
}

/**
 * The site's campaigns, 2026-10-01 to 10-03:
 * - Meta 111 "Spring" (EUR): 60 + 40 spent, 30 + 20 clicks (10-01 also read per ad set: not counted
 *   twice). Visits by utm_id (joins, buys for 50 EUR), by fb_campaign_id (joins, leaves after 4
 *   days) and by name (utm_campaign=Spring, no key: joins on 10-03).
 * - Google 222 "Brand" (EUR), read per ad set only (30 + 20, clicks 6 + 4): one visit by
 *   gad_campaignid that joins, leaves after 18 days, buys for 25 USD (no ROAS: EUR against USD).
 * - TikTok 333 "Video" (USD): 30 spent, 15 clicks; a visit by tt_campaign_id joins, buys for 60 USD.
 *   Named "Video draft" the day before (nothing spent): the report shows its latest name.
 * - Snapchat SNAP "Snap" (EUR): 20 spent; a visit by sc_campaign_id, no join.
 * - Meta 444 "Ghost" (EUR): 5 spent, no visit (a warning).
 * - utm_id 999 on a Meta click: a visit, no spend (a warning).
 * - no campaign: an untagged visit, an organic join; an unexpanded macro is no key.
 */
beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
  api = apiClient(t.url);
  tenant = await seedTenant(db.pool, t.deps.box);
  rival = await seedTenant(db.pool, t.deps.box);
  site = tenant.site;

  const meta = await source('meta', 'EUR');
  const google = await source('google', 'EUR');
  const tiktok = await source('tiktok', 'USD');
  const snap = await source('snapchat', 'EUR');
  await spend(meta, '2026-10-01', '111', 'Spring', 'EUR', 60, 30);
  await spend(meta, '2026-10-01', '111', 'Spring', 'EUR', 60, 30, 'as-1');
  await spend(meta, '2026-10-02', '111', 'Spring', 'EUR', 40, 20);
  await spend(meta, '2026-10-01', '444', 'Ghost', 'EUR', 5, 0);
  await spend(google, '2026-10-01', '222', 'Brand', 'EUR', 30, 6, 'ag-1');
  await spend(google, '2026-10-01', '222', 'Brand', 'EUR', 20, 4, 'ag-2');
  await spend(tiktok, '2026-10-02', '333', 'Video', 'USD', 30, 15);
  await spend(tiktok, '2026-10-01', '333', 'Video draft', 'USD', 0, 0);
  await spend(snap, '2026-10-01', SNAP, 'Snap', 'EUR', 20, 0);
  // Outside the range: not counted.
  await spend(meta, '2026-09-30', '111', 'Spring', 'EUR', 1000, 500);

  const base = 'https://shop.example.com/l';
  await journey(
    await visit('2026-10-01', `${base}?utm_id=111&utm_campaign=Other`, { fbc: 'fb.1.1.a' }, 'Other'),
    '2026-10-01',
    {
      value: [50, 'EUR'],
    },
  );
  await journey(
    await visit('2026-10-01', `${base}?fbclid=F&fb_campaign_id=111`, { fbc: 'fb.1.1.b' }),
    '2026-10-01',
    {
      leftAfter: 4,
    },
  );
  await journey(
    await visit('2026-10-02', `${base}?gclid=G&gad_campaignid=222`, { gclid: 'G' }),
    '2026-10-02',
    {
      leftAfter: 18,
      value: [25, 'USD'],
    },
  );
  await journey(
    await visit('2026-10-02', `${base}?tt_campaign_id=333`, { ttclid: 'E.C.P.x' }),
    '2026-10-02',
    {
      value: [60, 'USD'],
    },
  );
  await visit('2026-10-01', `${base}?sc_campaign_id=${SNAP}`, { sccid: 'sc-1' });
  await journey(
    await visit(
      '2026-10-03',
      `${base}?utm_id={{campaign.id}}&utm_campaign=Spring`,
      { fbc: 'fb.1.1.c' },
      'Spring',
    ),
    '2026-10-03',
  );
  await visit('2026-10-03', `${base}?utm_id=999`, { fbc: 'fb.1.1.d' });
  await visit('2026-10-03', base);
  await journey(null, '2026-10-02');
});
afterAll(async () => {
  await t.stop();
  await db.drop();
});

const report = (groupBy: RoiGroupBy, today = TODAY) =>
  roiReport(db.pool, { siteId: site.siteId, from: FROM, to: TO, groupBy, today });

describe('roi report', () => {
  it('gives each campaign its spend, clicks, journeys, cost per join, cost per retained join and ROAS', async () => {
    const out = await report('campaign');
    const rows = Object.fromEntries(out.rows.map((r) => [String(r.key), r]));
    expect(Object.keys(rows).sort()).toEqual(['111', '222', '333', '444', '999', SNAP, 'null'].sort());
    expect(rows['111']).toEqual({
      key: '111',
      platform: 'meta',
      campaignId: '111',
      campaignName: 'Spring',
      spend: { EUR: 100 },
      clicks: 50,
      visits: 3,
      joins: 3,
      retained: { d7: 2, d30: 2 },
      conversions: 1,
      value: { EUR: 50 },
      costPerJoin: { EUR: 33.3333 },
      costPerRetained: { d7: { EUR: 50 }, d30: { EUR: 50 } },
      roas: 0.5,
    });
    // Spend in EUR, value in USD: both shown, no ROAS.
    expect(rows['222']).toMatchObject({
      platform: 'google',
      campaignName: 'Brand',
      spend: { EUR: 50 },
      clicks: 10,
      visits: 1,
      joins: 1,
      retained: { d7: 1, d30: 0 },
      value: { USD: 25 },
      costPerJoin: { EUR: 50 },
      costPerRetained: { d7: { EUR: 50 }, d30: {} },
      roas: null,
    });
    expect(rows['333']).toMatchObject({
      platform: 'tiktok',
      campaignName: 'Video',
      spend: { USD: 30 },
      clicks: 15,
      joins: 1,
      value: { USD: 60 },
      costPerJoin: { USD: 30 },
      roas: 2,
    });
    expect(rows[SNAP]).toMatchObject({
      platform: 'snapchat',
      spend: { EUR: 20 },
      visits: 1,
      joins: 0,
      costPerJoin: {},
    });
    expect(rows['999']).toMatchObject({
      platform: 'meta',
      campaignName: null,
      spend: {},
      visits: 1,
      roas: null,
    });
    expect(rows.null).toMatchObject({ campaignId: null, visits: 1, joins: 1, spend: {} });
    expect(out.totals).toMatchObject({
      spend: { EUR: 175, USD: 30 },
      clicks: 75,
      visits: 8,
      joins: 6,
      retained: { d7: 5, d30: 4 },
      conversions: 3,
      value: { EUR: 50, USD: 85 },
      roas: null,
    });
    expect(out.warnings).toEqual([
      {
        kind: 'spend_without_visits',
        campaignId: '444',
        platform: 'meta',
        campaignName: 'Ghost',
        spend: { EUR: 5 },
      },
      { kind: 'visits_without_spend', campaignId: '999', platform: 'meta', visits: 1 },
    ]);
  });

  it('groups by day (every day, spend on its own day) and by platform, with the same totals', async () => {
    const byDay = await report('day');
    expect(byDay.rows.map((r) => r.key)).toEqual(['2026-10-01', '2026-10-02', '2026-10-03']);
    const [d1, d2, d3] = byDay.rows;
    expect(d1).toMatchObject({
      spend: { EUR: 135 },
      clicks: 40,
      visits: 3,
      joins: 2,
      retained: { d7: 1, d30: 1 },
    });
    expect(d1!.costPerJoin).toEqual({ EUR: 67.5 });
    expect(d2).toMatchObject({
      spend: { EUR: 40, USD: 30 },
      clicks: 35,
      visits: 2,
      joins: 3,
      retained: { d7: 3, d30: 2 },
      value: { USD: 85 },
      roas: null,
    });
    expect(d3).toMatchObject({ spend: {}, visits: 3, joins: 1, costPerJoin: {} });

    const byPlatform = await report('platform');
    const p = Object.fromEntries(byPlatform.rows.map((r) => [String(r.key), r]));
    expect(byPlatform.rows.map((r) => r.key)).toEqual(['google', 'meta', 'snapchat', 'tiktok', 'none']);
    expect(p.meta).toMatchObject({ spend: { EUR: 105 }, clicks: 50, visits: 4, joins: 3, roas: 0.4762 });
    expect(p.google).toMatchObject({ spend: { EUR: 50 }, visits: 1, value: { USD: 25 }, roas: null });
    expect(p.none).toMatchObject({ spend: {}, visits: 1, joins: 1 });
    const campaign = await report('campaign');
    expect(byDay.totals).toEqual(campaign.totals);
    expect(byPlatform.totals).toEqual(campaign.totals);
  });

  it('leaves a retention horizon unknown while no day of the range is old enough', async () => {
    const out = await report('campaign', '2026-10-20');
    const spring = out.rows.find((r) => r.key === '111')!;
    expect(spring.retained).toEqual({ d7: 2, d30: null });
    expect(spring.costPerRetained).toEqual({ d7: { EUR: 50 }, d30: {} });
    // By day, 10-03 is old enough for d7 only on 10-11.
    const byDay = await report('day', '2026-10-11');
    expect(byDay.rows.map((r) => r.retained.d7)).toEqual([1, 3, 1]);
    const early = await report('day', '2026-10-10');
    expect(early.rows.map((r) => r.retained.d7)).toEqual([1, 3, null]);
  });

  it('reads the same figures from the roll-up as live', async () => {
    const live = await Promise.all((['campaign', 'day', 'platform'] as const).map((g) => report(g)));
    const out = await runRollup(db.pool, at(TODAY, 0));
    expect(out.sealed).toBeGreaterThanOrEqual(3);
    const { rows } = await db.pool.query<{ keys: string[] }>(
      `SELECT array_agg(DISTINCT campaign_key) FILTER (WHERE campaign_key IS NOT NULL) AS keys FROM report_rows WHERE site_id = $1`,
      [site.siteId],
    );
    expect(rows[0]!.keys.sort()).toEqual(['111', '222', '333', '999', SNAP].sort());
    const rolled = await Promise.all((['campaign', 'day', 'platform'] as const).map((g) => report(g)));
    expect(rolled).toEqual(live);
  });
});

describe('GET /api/v1/reports/roi', () => {
  const path = '/reports/roi';

  it('answers the report for the caller’s site, and 404 for another account’s', async () => {
    const ok = await api.get(`${path}?siteId=${site.siteId}&from=${FROM}&to=${TO}&groupBy=platform`, {
      key: tenant.accountKey,
    });
    expect(ok.status).toBe(200);
    expect(ok.body.groupBy).toBe('platform');
    expect(ok.body.totals.spend).toEqual({ EUR: 175, USD: 30 });
    const bySite = await api.get(`${path}?from=${FROM}&to=${TO}`, { key: site.siteKey });
    expect(bySite.body.rows.find((r: any) => r.key === '111').costPerJoin).toEqual({ EUR: 33.3333 });
    const other = await api.get(`${path}?siteId=${site.siteId}&from=${FROM}&to=${TO}`, {
      key: rival.accountKey,
    });
    expect([other.status, other.body.code]).toEqual([404, 'UNKNOWN_WEBSITE']);
    const own = await api.get(`${path}?from=${FROM}&to=${TO}`, { key: rival.site.siteKey });
    expect(own.status).toBe(200);
    expect(own.body.totals).toMatchObject({ spend: {}, visits: 0 });
    expect(own.body.rows).toEqual([]);
    expect((await api.get(`${path}?siteId=${site.siteId}`, { key: null })).status).toBe(401);
  });

  it.each([
    ['groupBy=week', 'groupBy'],
    ['from=0000-12-31&to=2026-10-01', 'from'],
    ['from=2026-02-30', 'from'],
    ['to=20261001', 'to'],
    ['from=2026-10-05&to=2026-10-01', 'from'],
    ['from=2020-01-01&to=2026-10-01', 'from'],
  ])('refuses %s with a problem+json 400', async (query, field) => {
    const res = await api.get(`${path}?siteId=${site.siteId}&${query}`, { key: tenant.accountKey });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body.code).toBe('VALIDATION_FAILED');
    expect(JSON.stringify(res.body.errors)).toContain(field);
  });
});

describe('report roi', () => {
  it('prints the report as a table with its warnings, and as JSON', async () => {
    const env = {
      PATH: process.env.PATH,
      DATABASE_URL: db.url,
      DATA_DIR: scratchDir('roi'),
      SECRET_KEY: SECRET_KEY_HEX,
    };
    const json = await runWith(env, [
      'report',
      'roi',
      '--site',
      site.siteId,
      '--from',
      FROM,
      '--to',
      TO,
      '--json',
    ]);
    expect(json.code, json.stderr).toBe(0);
    expect(json.json().totals).toMatchObject({ spend: { EUR: 175, USD: 30 }, joins: 6 });
    const human = await runWith(env, [
      'report',
      'roi',
      '--site',
      site.siteId,
      '--from',
      FROM,
      '--to',
      TO,
      '--group-by',
      'day',
    ]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^day\s+spend\s+clicks/m);
    expect(human.stdout).toMatch(/^2026-10-02\s+40 EUR, 30 USD\s+35\s+2\s+3/m);
    expect(human.stdout).toContain('meta campaign 444 (Ghost) spent 5 EUR and has no visits');
    const bad = await runWith(env, ['report', 'roi', '--site', site.siteId, '--group-by', 'week']);
    expect([bad.code, bad.stdout]).toEqual([1, '']);
    expect(bad.stderr).toMatch(/--group-by must be one of campaign, day, platform/);
  });
});
