/**
 * `npm run bench -- reports`: what the reports cost, on a long history.
 *
 * 1. Seeds a site's history (bench/history.ts): `--visits=N` visits (default 10 million), N/10
 *    joins and N/5 conversions over `--days=D` days (default 400) ending now, and leaves for a
 *    tenth of the joins. PageView sends are left out (the reports do not read them).
 * 2. The funnel of that site for the last 90 days grouped by day, read live from the raw rows
 *    (before any roll-up, `--live-runs=N` times, default 5), then the roll-up of the whole history
 *    (timed), then the same report from the roll-up and the live tail `--runs=N` times (default
 *    200): p50 and p99, the target being p99 <= 200 ms.
 * 3. `track/init` throughput (as in the tracker suite: 50 keep-alive clients on a site with a
 *    Meta pixel) with the roll-up working and without it, in alternating rounds (`--requests=N`
 *    per row, default 20000, `--rounds=N`, default 4), the target being a ratio >= 0.9. The reports
 *    add nothing to track/init's own statements (no trigger, no index, no counter on visits): what
 *    competes with it is the roll-up job. Production seals each site's day once a day; here, during
 *    the "with" rounds, the last sealed day of the 10-million-visit site is sealed again every
 *    `--seal-every=MS` (default 5000): at 5 s, as if 17,280 sites of that size sealed their day,
 *    spread over the day.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { migrate } from '../backend/db/migrate.js';
import { funnelReport } from '../backend/domain/reports/funnel.js';
import { runRollup } from '../backend/domain/reports/rollup.js';
import { seedHistory } from './history.js';
import { openBenchDatabase, option, spawnRole } from './support.js';
import { ROLE_ENV, load, measure, seed, summarize, type Call, type Result, type Sample } from './tracker.js';

const ORIGIN = 'https://shop.example.com';

function percentile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

async function timeReports(pool: pg.Pool, siteId: string, runs: number): Promise<{ p50: number; p99: number; max: number }> {
  const to = new Date().toISOString().slice(0, 10);
  const from = new Date(Date.now() - 89 * 86_400_000).toISOString().slice(0, 10);
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    const f = await funnelReport(pool, { siteId, from, to, groupBy: 'day' });
    ms.push(performance.now() - started);
    if (f.rows.length !== 90) throw new Error(`expected 90 days, got ${f.rows.length}`);
  }
  ms.sort((a, b) => a - b);
  return { p50: percentile(ms, 0.5), p99: percentile(ms, 0.99), max: ms[ms.length - 1]! };
}

export async function run(args: string[] = []): Promise<void> {
  const visits = option(args, 'visits', 10_000_000);
  const days = option(args, 'days', 400);
  const runs = option(args, 'runs', 200);
  const liveRuns = option(args, 'live-runs', 5);
  const total = option(args, 'requests', 20_000);
  const rounds = option(args, 'rounds', 4);
  const sealEvery = option(args, 'seal-every', 5_000);
  const concurrency = 50;
  const log = (line: string) => process.stderr.write(`${line}\n`);

  const db = await openBenchDatabase(4);
  const { databaseUrl, pool } = db;
  let child: Awaited<ReturnType<typeof spawnRole>> | null = null;
  try {
    await migrate(pool);
    const history = await seedHistory(pool, { visits, days, pageViewSends: false, log });
    const leavesStarted = performance.now();
    const { rowCount: leaves } = await pool.query(
      `INSERT INTO memberships (channel_id, telegram_user_id, kind, occurred_at, created_at)
       SELECT channel_id, telegram_user_id, 'leave', least(now(), occurred_at + make_interval(hours => (telegram_user_id % 900)::int)),
              least(now(), occurred_at + make_interval(hours => (telegram_user_id % 900)::int))
       FROM memberships m JOIN channels c ON c.id = m.channel_id WHERE c.site_id = $1 AND m.kind = 'join' AND m.telegram_user_id % 10 = 0`,
      [history.siteId],
    );
    await pool.query('VACUUM ANALYZE memberships');
    const size = (await pool.query<{ size: string }>('SELECT pg_size_pretty(pg_database_size(current_database())) AS size')).rows[0]!.size;
    const seeded = `history: ${history.rows.visits} visits, ${history.rows.leads} joins, ${leaves} leaves, ${history.rows.conversions} conversions over ${days} days, seeded in ${(history.seconds + (performance.now() - leavesStarted) / 1000).toFixed(0)} s; database ${size}`;
    log(seeded);

    const live = await timeReports(pool, history.siteId, liveRuns);
    log(`live: p50 ${live.p50.toFixed(0)} ms`);
    const rollStarted = performance.now();
    let sealed = 0;
    for (;;) {
      const out = await runRollup(pool, new Date(), { maxDays: 50 });
      sealed += out.sealed;
      if (out.sealed === 0) break;
      log(`  sealed ${sealed} days`);
    }
    const rollSeconds = (performance.now() - rollStarted) / 1000;
    await pool.query('VACUUM ANALYZE report_rows');
    const rows = (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM report_rows WHERE site_id = $1', [history.siteId])).rows[0]!.n;
    const rolled = await timeReports(pool, history.siteId, runs);

    // track/init with and without the roll-up at work, alternating.
    const site = await seed(pool, true);
    child = await spawnRole(new URL('./tracker.ts', import.meta.url).href, ROLE_ENV, 'capigram', [databaseUrl]);
    const init = (_i: number, client: number): Call => ({
      method: 'POST',
      path: '/backend/track/init',
      expect: 200,
      headers: { 'content-type': 'application/json', origin: ORIGIN, 'x-capigram-client-ip': `198.51.100.${client + 1}` },
      body: JSON.stringify({
        websiteId: site.websiteId, tempId: randomUUID(), sessionId: randomUUID(), visitRequestId: randomUUID(),
        href: `${ORIGIN}/landing?fbclid=IwAR2F4&utm_source=fb`, landingPage: '/landing?fbclid=IwAR2F4&utm_source=fb', referrer: 'https://l.facebook.com/',
        userAgent: 'Mozilla/5.0 CapigramBench/1.0', fbc: `fb.1.${Date.now()}.IwAR2F4`, fbp: 'fb.1.1763776500000.1116446470', utmSource: 'fb',
      }),
    });
    await load(child.url, Math.min(2_000, total), concurrency, init);
    const samples: { with: Sample[]; without: Sample[] } = { with: [], without: [] };
    const share = Math.ceil(total / rounds);
    const lastSealed = (await pool.query<{ day: string }>(`SELECT to_char(sealed_before - 1, 'YYYY-MM-DD') AS day FROM report_sealed WHERE site_id = $1`, [history.siteId])).rows[0]!.day;
    let resealed = 0;
    for (let r = 0; r < rounds; r++) {
      // Which goes first alternates too, so that neither always follows the other.
      if (r % 2 === 1) samples.without.push(await measure(child, share, concurrency, init));
      let rolling = true;
      const roller = (async () => {
        while (rolling) {
          await pool.query('INSERT INTO report_dirty (site_id, day) VALUES ($1, $2::date) ON CONFLICT DO NOTHING', [history.siteId, lastSealed]);
          resealed += (await runRollup(pool, new Date())).resealed;
          for (let waited = 0; rolling && waited < sealEvery; waited += 50) await new Promise((r) => setTimeout(r, 50));
        }
      })();
      samples.with.push(await measure(child, share, concurrency, init));
      rolling = false;
      await roller;
      if (r % 2 === 0) samples.without.push(await measure(child, share, concurrency, init));
    }

    const withAgg = summarize(samples.with);
    const withoutAgg = summarize(samples.without);
    const row = (name: string, r: Result) => `| ${name} | ${r.perSecond.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.failures} |`;
    const lines = [
      seeded,
      '',
      'funnel of the site, last 90 days grouped by day:',
      '',
      '| read | runs | p50 ms | p99 ms | max ms |',
      '|---|---:|---:|---:|---:|',
      `| live from the raw rows (no roll-up) | ${liveRuns} | ${live.p50.toFixed(1)} | ${live.p99.toFixed(1)} | ${live.max.toFixed(1)} |`,
      `| roll-up + live tail (target p99 <= 200 ms) | ${runs} | ${rolled.p50.toFixed(1)} | ${rolled.p99.toFixed(1)} | ${rolled.max.toFixed(1)} |`,
      '',
      `roll-up of the whole history: ${sealed} days sealed in ${rollSeconds.toFixed(1)} s (${((rollSeconds * 1000) / Math.max(1, sealed)).toFixed(0)} ms a day), ${rows} rows in report_rows`,
      '',
      `track/init: ${rounds * share} requests per row in ${rounds} alternating rounds, ${concurrency} concurrent keep-alive clients, site with a Meta pixel`,
      '',
      '| target | req/s | p50 ms | p99 ms | failed |',
      '|---|---:|---:|---:|---:|',
      row(`with the roll-up sealing a day of the big site every ${sealEvery} ms (${resealed} times in all)`, withAgg),
      row('without the roll-up', withoutAgg),
      '',
      `throughput with / without: ${(withAgg.perSecond / withoutAgg.perSecond).toFixed(2)} (target >= 0.9)`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    child?.process.kill();
    await db.close();
  }
}
