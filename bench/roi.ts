/**
 * `npm run bench -- roi`: what the ROI report costs on a long history.
 *
 * 1. Seeds a site's history as the reports suite does (bench/reports-history.ts): `--visits=N`
 *    visits (default 10 million) over `--days=D` days (default 400) ending now, each tagged visit
 *    belonging to one of `--campaigns=C` campaigns (default 200, a quarter per platform) by its
 *    landing URL's campaign parameter (in one campaign in ten by its utm_campaign alone); then the spend of
 *    every campaign for every day (`spend_daily`, D × C rows, set-based), Meta, Google and Snapchat
 *    in EUR, TikTok in USD.
 * 2. Folds the whole history as the job's runs fold it (reports suite), up to the watermark of a
 *    run a quarter hour ago, so the report reads live the longest tail it ever reads.
 * 3. The 90-day ROI report by campaign `--runs=N` times (default 200): p50 and p99, the target
 *    being p99 <= 200 ms; and a few runs by day and by platform.
 *
 * `--database=NAME` (with DATABASE_URL): the history is kept in that database of DATABASE_URL's
 * server instead of a throwaway one, seeded only when it holds none yet, so that the report can
 * be timed again (after a change, on a quieter machine) without the half hour that seeding 10
 * million visits takes. Each run folds what the job would have folded since the last one first.
 */
import pg from 'pg';
import { migrate } from '../backend/db/migrate.js';
import { createPool } from '../backend/db/pool.js';
import { FOLD_LAG_MS, FOLD_STEP_MS, runRollup } from '../backend/domain/reports/rollup.js';
import { roiReport, type RoiGroupBy } from '../backend/domain/reports/roi.js';
import { benchCampaign, seedReportsHistory } from './reports-history.js';
import { openBenchDatabase, option } from './support.js';

function percentile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

async function seedSpend(pool: pg.Pool, siteId: string, campaigns: number, days: number): Promise<number> {
  const perSource = Math.ceil(campaigns / 4);
  let rows = 0;
  for (const [src, platform, currency] of [
    ['fb', 'meta', 'EUR'],
    ['google', 'google', 'EUR'],
    ['tiktok', 'tiktok', 'USD'],
    ['snapchat', 'snapchat', 'EUR'],
  ] as const) {
    const { rows: s } = await pool.query<{ id: string }>(
      `INSERT INTO spend_sources (site_id, platform, account_ref, credentials, currency, time_zone, backfilled)
       VALUES ($1, $2, $3, 'unused', $4, 'UTC', true) RETURNING id`,
      [siteId, platform, `bench-${platform}`, currency],
    );
    const c = benchCampaign(`'${src}'`, 'j');
    const res = await pool.query(
      `INSERT INTO spend_daily (source_id, day, campaign_id, campaign_name, currency, spend, impressions, clicks)
       SELECT $1, d::date, ${c.id}, ${c.name}, $2, round((20 + (j * 37 + extract(doy FROM d)::int * 11) % 180)::numeric, 2),
              1000 + j * 13, 40 + (j * 7) % 60
       FROM generate_series(current_date - ($3::int - 1), current_date, interval '1 day') d, generate_series(0, $4::int - 1) j`,
      [s[0]!.id, currency, days, perSource],
    );
    rows += res.rowCount ?? 0;
  }
  await pool.query('VACUUM ANALYZE spend_daily');
  return rows;
}

async function timeRoi(
  pool: pg.Pool,
  siteId: string,
  groupBy: RoiGroupBy,
  runs: number,
): Promise<{ p50: number; p99: number; max: number; rows: number }> {
  const to = new Date().toISOString().slice(0, 10);
  const from = new Date(Date.now() - 89 * 86_400_000).toISOString().slice(0, 10);
  const ms: number[] = [];
  let rows = 0;
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    const r = await roiReport(pool, { siteId, from, to, groupBy });
    ms.push(performance.now() - started);
    rows = r.rows.length;
  }
  ms.sort((a, b) => a - b);
  return { p50: percentile(ms, 0.5), p99: percentile(ms, 0.99), max: ms[ms.length - 1]!, rows };
}

export async function run(args: string[] = []): Promise<void> {
  const visits = option(args, 'visits', 10_000_000);
  const days = option(args, 'days', 400);
  const campaigns = option(args, 'campaigns', 200);
  const runs = option(args, 'runs', 200);
  const log = (line: string) => process.stderr.write(`${line}\n`);

  const kept = args.find((arg) => arg.startsWith('--database='))?.split('=')[1];
  const db = kept === undefined ? await openBenchDatabase(1) : await keptDatabase(kept);
  // The seeding writes a million visits per statement, which on a busy shared machine outlasts the
  // default statement timeout; the reports' own statements are timed, not bounded, here.
  const pool = createPool(db.databaseUrl, 4, { statementMs: 30 * 60_000 });
  try {
    await migrate(pool);
    const found = await seededHistory(pool);
    let seeded: string;
    let history: { siteId: string };
    if (found === null) {
      const made = await seedReportsHistory(pool, { visits, days, campaigns, log });
      const spendRows = await seedSpend(pool, made.siteId, campaigns, days);
      const h = made.rows;
      seeded = `history: ${h.visits} visits, ${h.joins} joins, ${h.leaves} leaves, ${h.conversions} conversions over ${days} days, seeded in ${made.seconds.toFixed(0)} s; ${spendRows} spend rows (${campaigns} campaigns × ${days} days)`;
      history = made;
    } else {
      seeded = `history kept in ${kept}: ${found.visits} visits, ${found.spendRows} spend rows, seeded earlier`;
      history = found;
    }
    log(seeded);

    const rollStarted = performance.now();
    // The job folds up to half an hour to an hour before its run, so a report reads that much of
    // the site's latest activity live. The seeding wrote its last visit when it began, half an
    // hour or more ago at 10 million visits: the watermark is placed as the job's run right
    // after that visit would place it, so that the live part holds its 45 to 60 busiest minutes
    // rather than the quiet since.
    const { rows: last } = await pool.query<{ ms: number }>(
      `SELECT (extract(epoch FROM max(created_at)) * 1000)::bigint AS ms FROM visits WHERE site_id = $1`,
      [history.siteId],
    );
    const lastVisit = Math.min(Date.now(), last[0]!.ms);
    const todayStart = Math.floor(lastVisit / 86_400_000) * 86_400_000;
    let sealed = 0;
    for (;;) {
      const out = await runRollup(pool, new Date(todayStart + FOLD_LAG_MS), { maxDays: 50 });
      sealed += out.sealed;
      if (out.sealed === 0) break;
      log(`  folded ${sealed} days`);
    }
    for (let t = todayStart + FOLD_LAG_MS + FOLD_STEP_MS; t <= lastVisit - FOLD_STEP_MS; t += FOLD_STEP_MS)
      await runRollup(pool, new Date(t));
    const rollSeconds = (performance.now() - rollStarted) / 1000;
    await pool.query('VACUUM ANALYZE report_rows');
    const reportRows = (
      await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM report_rows WHERE site_id = $1', [
        history.siteId,
      ])
    ).rows[0]!.n;

    const byCampaign = await timeRoi(pool, history.siteId, 'campaign', runs);
    const byDay = await timeRoi(pool, history.siteId, 'day', 20);
    const byPlatform = await timeRoi(pool, history.siteId, 'platform', 20);
    const row = (name: string, n: number, r: Awaited<ReturnType<typeof timeRoi>>) =>
      `| ${name} | ${r.rows} | ${n} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.max.toFixed(1)} |`;
    const lines = [
      seeded,
      `roll-up of the whole history: ${sealed} days folded in ${rollSeconds.toFixed(1)} s, ${reportRows} rows in report_rows`,
      '',
      'ROI report of the site, last 90 days:',
      '',
      '| grouped by | rows | runs | p50 ms | p99 ms | max ms |',
      '|---|---:|---:|---:|---:|---:|',
      row('campaign (target p99 <= 200 ms)', runs, byCampaign),
      row('day', 20, byDay),
      row('platform', 20, byPlatform),
      '',
      `ROI report p99 (90 days by campaign): ${byCampaign.p99.toFixed(1)} ms (target <= 200)`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await pool.end();
    await db.close();
  }
}

/** The database `name` of DATABASE_URL's server, made if missing, kept when the run ends. */
async function keptDatabase(name: string): Promise<{ databaseUrl: string; close(): Promise<void> }> {
  const server = process.env.DATABASE_URL;
  if (server === undefined || server === '' || !/^[a-z_][a-z0-9_]*$/.test(name))
    throw new Error('--database=NAME needs DATABASE_URL, and a lower-case name of letters, digits and _');
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  try {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rowCount === 0) await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(server);
  url.pathname = `/${name}`;
  return { databaseUrl: url.toString(), close: async () => undefined };
}

/** The history an earlier run left in a kept database; null: none yet. */
async function seededHistory(
  pool: pg.Pool,
): Promise<{ siteId: string; visits: number; spendRows: number } | null> {
  const { rows } = await pool.query<{ id: string; visits: number; spend: number }>(
    `SELECT s.id, (SELECT count(*)::int FROM visits v WHERE v.site_id = s.id) AS visits,
            (SELECT count(*)::int FROM spend_daily d JOIN spend_sources o ON o.id = d.source_id WHERE o.site_id = s.id) AS spend
     FROM sites s WHERE s.name = 'Busy' ORDER BY s.created_at LIMIT 1`,
  );
  const r = rows[0];
  return r === undefined || r.spend === 0 ? null : { siteId: r.id, visits: r.visits, spendRows: r.spend };
}
