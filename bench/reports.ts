/**
 * `npm run bench -- reports`: what the reports cost, on a long history.
 *
 * 1. Seeds a site's history (bench/reports-history.ts, set-based, a few minutes for the default):
 *    `--visits=N` visits (default 10 million), N/10 joins, N/5 conversions over `--days=D` days
 *    (default 400) ending now, with invite clicks, leaves, five sources and two channels.
 * 2. The funnel of that site for the last 90 days grouped by day, read live from the raw rows
 *    (before any roll-up, `--live-runs=N` times, default 5), then the roll-up of the whole history
 *    (timed; past days whole, today in quarter-hour parts as the cron's runs leave it) to the
 *    watermark of a run a quarter hour ago (so the report reads live the longest
 *    tail it ever reads, just before the job's next run), then the same report `--runs=N` times
 *    (default 200): p50 and p99, the target being p99 <= 200 ms.
 * 3. `track/init` throughput (as in the tracker suite: 50 keep-alive clients on a site with a
 *    Meta pixel) with the roll-up job running at the worker cron's cadence and without it, in
 *    alternating rounds (`--requests=N` per row, default 20000, `--rounds=N`, default 4), the
 *    target being a ratio >= 0.9. The reports add nothing to track/init's own statements (no
 *    trigger, no index, no counter on visits): what competes with it is the job, which in the
 *    "with" rows runs at every quarter hour of the clock (`--fold-every=MS`, default 900000) as
 *    the cron does. The cost of one such run is timed apart.
 */
import type pg from 'pg';
import { migrate } from '../backend/db/migrate.js';
import { funnelReport } from '../backend/domain/reports/funnel.js';
import { FOLD_LAG_MS, FOLD_STEP_MS, runRollup } from '../backend/domain/reports/rollup.js';
import { seedReportsHistory } from './reports-history.js';
import { openBenchDatabase, option, spawnRole } from './support.js';
import {
  ROLE_ENV,
  initCall,
  load,
  measure,
  seed,
  summarize,
  type Call,
  type Result,
  type Sample,
} from './tracker.js';

const rate = (s: Sample) => (s.requests / s.seconds).toFixed(0);

function percentile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

async function timeReports(
  pool: pg.Pool,
  siteId: string,
  runs: number,
): Promise<{ p50: number; p99: number; max: number }> {
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
  const foldEvery = option(args, 'fold-every', FOLD_STEP_MS);
  const concurrency = 50;
  const log = (line: string) => process.stderr.write(`${line}\n`);

  const db = await openBenchDatabase(4);
  const { databaseUrl, pool } = db;
  let child: Awaited<ReturnType<typeof spawnRole>> | null = null;
  try {
    await migrate(pool);
    const history = await seedReportsHistory(pool, { visits, days, log });
    const size = (
      await pool.query<{ size: string }>(
        'SELECT pg_size_pretty(pg_database_size(current_database())) AS size',
      )
    ).rows[0]!.size;
    const h = history.rows;
    const seeded = `history: ${h.visits} visits, ${h.inviteClicks} invite clicks, ${h.joins} joins, ${h.leaves} leaves, ${h.conversions} conversions over ${days} days, seeded in ${history.seconds.toFixed(0)} s; database ${size}`;
    log(seeded);

    const live = await timeReports(pool, history.siteId, liveRuns);
    log(`live: p50 ${live.p50.toFixed(0)} ms`);
    // The whole history folded as the job's runs fold it: past days whole, then today in parts,
    // one per quarter hour as the cron's runs would have (each adds its rows to the day's), up
    // to the watermark of a run a quarter hour ago: the report then reads live what it reads
    // just before the job's next run (45 minutes to an hour of today), its longest live tail.
    const rollStarted = performance.now();
    const todayStart = Math.floor(Date.now() / 86_400_000) * 86_400_000;
    let sealed = 0;
    for (;;) {
      const out = await runRollup(pool, new Date(todayStart + FOLD_LAG_MS), { maxDays: 50 });
      sealed += out.sealed;
      if (out.sealed === 0) break;
      log(`  folded ${sealed} days`);
    }
    let parts = 0;
    for (let t = todayStart + FOLD_LAG_MS + FOLD_STEP_MS; t <= Date.now() - FOLD_STEP_MS; t += FOLD_STEP_MS)
      parts += (await runRollup(pool, new Date(t))).parts;
    const rollSeconds = (performance.now() - rollStarted) / 1000;
    await pool.query('VACUUM ANALYZE report_rows');
    const rows = (
      await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM report_rows WHERE site_id = $1', [
        history.siteId,
      ])
    ).rows[0]!.n;
    const tail = (
      await pool.query<{ w: Date }>('SELECT folded_until AS w FROM report_sealed WHERE site_id = $1', [
        history.siteId,
      ])
    ).rows[0]!.w;
    const tailMinutes = (Date.now() - tail.getTime()) / 60_000;
    const rolled = await timeReports(pool, history.siteId, runs);
    // One run of the job as the cron makes it: the next quarter hour of today folded.
    const stepStarted = performance.now();
    const step = await runRollup(pool, new Date());
    const stepMs = performance.now() - stepStarted;

    // track/init with and without the roll-up at work, alternating.
    const site = await seed(pool, true);
    child = await spawnRole(new URL('./tracker.ts', import.meta.url).href, ROLE_ENV, 'capigram', [
      databaseUrl,
    ]);
    const init = (_i: number, client: number): Call => initCall(site.websiteId, client);
    // The seeding's writes flushed and the server warmed up before the first row, which would
    // otherwise pay for them (it is a "with" row): with one row's warm-up, the first row still
    // ran a quarter slower than the rest in trial runs; with two, as fast.
    await pool.query('CHECKPOINT');
    await load(child.url, 2 * Math.ceil(total / rounds), concurrency, init);
    const samples: { with: Sample[]; without: Sample[] } = { with: [], without: [] };
    const share = Math.ceil(total / rounds);
    // "With": the job runs as the worker's cron runs it (domain/reports/rollup.ts), at every
    // multiple of --fold-every on the clock (every quarter hour: :00, :15, :30, :45) that falls in
    // a "with" row; "without": it does not run. The rows alternate within the run.
    const folds: number[] = [];
    const order: string[] = [];
    const note = (r: number, row: string, sample: Sample) => {
      order.push(`${row} ${rate(sample)}`);
      log(`  round ${r + 1} ${row}: ${rate(sample)} req/s`);
    };
    for (let r = 0; r < rounds; r++) {
      // Which goes first alternates too, so that neither always follows the other.
      if (r % 2 === 1) samples.without.push(await measure(child, share, concurrency, init));
      if (r % 2 === 1) note(r, 'without', samples.without.at(-1)!);
      let rolling = true;
      let wake: () => void = () => undefined;
      const roller = (async () => {
        while (rolling) {
          const due = Math.ceil(Date.now() / foldEvery) * foldEvery;
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, due - Date.now());
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          if (!rolling) break;
          const started = performance.now();
          await runRollup(pool, new Date());
          folds.push(performance.now() - started);
        }
      })();
      samples.with.push(await measure(child, share, concurrency, init));
      note(r, 'with', samples.with.at(-1)!);
      rolling = false;
      wake();
      await roller;
      if (r % 2 === 0) samples.without.push(await measure(child, share, concurrency, init));
      if (r % 2 === 0) note(r, 'without', samples.without.at(-1)!);
    }

    const withAgg = summarize(samples.with);
    const withoutAgg = summarize(samples.without);
    const row = (name: string, r: Result) =>
      `| ${name} | ${r.perSecond.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.failures} |`;
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
      `roll-up of the whole history: ${sealed} days and ${parts} quarter hours of today folded in ${rollSeconds.toFixed(1)} s, ${rows} rows in report_rows; the report read the last ${tailMinutes.toFixed(0)} minutes live`,
      `a run of the job at the cron's cadence (the next quarter hour of every site folded, ${step.sealed + step.parts} step): ${stepMs.toFixed(0)} ms`,
      '',
      `track/init: ${rounds * share} requests per row in ${rounds} alternating rounds, ${concurrency} concurrent keep-alive clients, site with a Meta pixel`,
      '',
      '| target | req/s | p50 ms | p99 ms | failed |',
      '|---|---:|---:|---:|---:|',
      row(
        `with the roll-up job every ${foldEvery / 60_000} minutes on the clock (${folds.length} runs in the row${folds.length > 0 ? `, ${folds.map((f) => f.toFixed(0)).join(', ')} ms` : ''})`,
        withAgg,
      ),
      row('without the roll-up', withoutAgg),
      '',
      `per round (req/s, in the order run): ${order.join(', ')}`,
      '',
      `throughput with / without: ${(withAgg.perSecond / withoutAgg.perSecond).toFixed(2)} (target >= 0.9)`,
      '',
      `seeding: ${history.seconds.toFixed(0)} s; funnel p99 (90 days by day): ${rolled.p99.toFixed(1)} ms (target <= 200); track/init with / without: ${(withAgg.perSecond / withoutAgg.perSecond).toFixed(2)} (target >= 0.9)`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    child?.process.kill();
    await db.close();
  }
}
