// Migration 203: report_rows get a campaign key. Days folded before it have none: the last 92 days
// with rows are marked dirty and counted again (with keys) by the next roll-up run; older days
// keep the counts they were folded with, keyless.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMigrations, migrate } from '../../backend/db/migrate.js';
import { runRollup } from '../../backend/domain/reports/rollup.js';
import { roiReport } from '../../backend/domain/reports/roi.js';
import { addDays } from '../../backend/domain/spend/sync.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

const VERSION = 203;
const today = new Date().toISOString().slice(0, 10);
const recent = addDays(today, -10);
const old = addDays(today, -200);
const CAMPAIGN = '120001';

let db: TestDatabase;
let siteId = '';
/** The old day's rows as the fold before 203 wrote them. */
let oldRows: Record<string, unknown>[] = [];

const rowsOf = async (day: string) =>
  (
    await db.pool.query(
      `SELECT utm_campaign, platform, visits::int, campaign_key FROM report_rows
       WHERE site_id = $1 AND day = $2::date ORDER BY campaign_key NULLS LAST, utm_campaign`,
      [siteId, day],
    )
  ).rows;

async function visit(day: string, landing: string, utmCampaign: string | null): Promise<void> {
  await db.pool.query(
    `INSERT INTO visits (site_id, temp_id, session_id, landing_page, href, utm_campaign, created_at)
     VALUES ($1, $2, $3, $4, $4, $5, $6)`,
    [siteId, randomUUID(), randomUUID(), landing, utmCampaign, `${day}T12:00:00Z`],
  );
}

beforeAll(async () => {
  db = await createTestDatabase(2);
  await db.pool.query(
    'DROP SCHEMA public CASCADE; CREATE SCHEMA public; DROP SCHEMA graphile_worker CASCADE',
  );
  await migrate(
    db.pool,
    listMigrations().filter((m) => m.version < VERSION),
  );
  const { rows } = await db.pool.query<{ id: string }>(
    `WITH a AS (INSERT INTO accounts (name) VALUES ('shop') RETURNING id)
     INSERT INTO sites (account_id, name, website_id, domains)
     SELECT id, 'shop', 'ws_shop_203', ARRAY['shop.example.com'] FROM a RETURNING id`,
  );
  siteId = rows[0]!.id;
  const meta = `https://shop.example.com/?utm_source=facebook&utm_campaign=spring&fb_campaign_id=${CAMPAIGN}`;
  for (const day of [recent, old]) {
    await visit(day, meta, 'spring');
    await visit(day, `https://shop.example.com/?utm_campaign=spring&utm_id=${CAMPAIGN}`, 'spring');
    await visit(day, 'https://shop.example.com/', null);
  }
  // The fold as it was before 203 (its report_compute_at has no campaign key): both days whole,
  // the watermark at the end of the recent one.
  await db.pool.query(
    `INSERT INTO report_rows (site_id, day, channel_id, utm_source, utm_campaign, platform, visits, invite_clicks, joins,
       attributed_joins, conversions, currency, value, leaves, join_day, lasted_days)
     SELECT $1, day, channel_id, utm_source, utm_campaign, platform, visits, invite_clicks, joins,
       attributed_joins, conversions, currency, value, leaves, join_day, lasted_days
     FROM report_compute_at($1, $2, $3)`,
    [siteId, `${old}T00:00:00Z`, `${addDays(recent, 1)}T00:00:00Z`],
  );
  await db.pool.query('INSERT INTO report_sealed (site_id, folded_until) VALUES ($1, $2)', [
    siteId,
    `${addDays(recent, 1)}T00:00:00Z`,
  ]);
  expect((await db.pool.query('SELECT count(*)::int AS n FROM report_dirty')).rows[0].n).toBe(0);
  expect(
    (
      await db.pool.query(
        `SELECT day::text, sum(visits)::int AS visits FROM report_rows GROUP BY day ORDER BY day`,
      )
    ).rows,
  ).toEqual([
    { day: old, visits: 3 },
    { day: recent, visits: 3 },
  ]);
  oldRows = (
    await db.pool.query(
      `SELECT utm_source, utm_campaign, platform, visits::int FROM report_rows WHERE day = $1::date ORDER BY utm_campaign, utm_source`,
      [old],
    )
  ).rows;
  const all = listMigrations();
  expect(await migrate(db.pool, all)).toEqual(all.filter((m) => m.version >= VERSION).map((m) => m.version));
});
afterAll(async () => db?.drop());

describe('migration 203: the re-fold of the last 92 days', () => {
  it('marks dirty the recent day with rows, not the old one; rows folded before stay keyless until counted again', async () => {
    const { rows } = await db.pool.query('SELECT site_id, day::text FROM report_dirty ORDER BY day');
    expect(rows).toEqual([{ site_id: siteId, day: recent }]);
    expect((await rowsOf(recent)).every((r) => r.campaign_key === null)).toBe(true);
  });

  it('the next roll-up counts the recent day again with campaign keys; the old day keeps its counts, keyless', async () => {
    const out = await runRollup(db.pool, new Date());
    expect(out.resealed).toBe(1);
    expect((await db.pool.query('SELECT count(*)::int AS n FROM report_dirty')).rows[0].n).toBe(0);
    expect(await rowsOf(recent)).toEqual([
      expect.objectContaining({ utm_campaign: 'spring', visits: 2, campaign_key: CAMPAIGN }),
      expect.objectContaining({ utm_campaign: '', visits: 1, campaign_key: null }),
    ]);
    const kept = await rowsOf(old);
    expect(kept.every((r) => r.campaign_key === null)).toBe(true);
    expect(
      (
        await db.pool.query(
          `SELECT utm_source, utm_campaign, platform, visits::int FROM report_rows WHERE day = $1::date ORDER BY utm_campaign, utm_source`,
          [old],
        )
      ).rows,
    ).toEqual(oldRows);
  });

  it('the ROI report credits the recent visits to their campaign', async () => {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO spend_sources (site_id, platform, account_ref, credentials, currency, time_zone)
       VALUES ($1, 'meta', 'act_101', 'sealed', 'EUR', 'UTC') RETURNING id`,
      [siteId],
    );
    await db.pool.query(
      `INSERT INTO spend_daily (source_id, day, campaign_id, campaign_name, currency, spend, impressions, clicks)
       VALUES ($1, $2, $3, 'Spring sale', 'EUR', 30, 900, 12)`,
      [rows[0]!.id, recent, CAMPAIGN],
    );
    const report = await roiReport(db.pool, {
      siteId,
      from: addDays(recent, -3),
      to: addDays(recent, 3),
      groupBy: 'campaign',
    });
    expect(report.rows).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          key: CAMPAIGN,
          platform: 'meta',
          campaignId: CAMPAIGN,
          spend: { EUR: 30 },
          clicks: 12,
          visits: 2,
        }),
        expect.objectContaining({ key: null, visits: 1 }),
      ]),
    );
    expect(report.totals.visits).toBe(3);
  });
});
