/**
 * `npm run bench -- retention`: the retention job over expired visits while `track/init` runs.
 *
 * Seeds `--expired=N` visits (default 1,000,000; with N/10 leads, N/5 conversions and N sends in
 * proportion, as `history-seed.ts` writes a busy site) spread over the year that ended 401 days
 * ago, so that every one is past the default RETENTION_DAYS. Then `track/init` runs against
 * Capigram in its own process at 50 concurrent clients without a pause, in windows of
 * `--requests=N` requests (default 5000): for `--before=S` seconds (default 90), while the
 * retention job runs in this process, and for `--after=S` seconds (default 90) after it. The
 * figures: the job's duration, and `track/init` p99 while it runs against the windows before and
 * after it together, which bracket what the run's own growth does to the machine meanwhile (the
 * load adds visits at a thousand or more a second; checkpoints come every five minutes). The
 * database's CPU per phase is split by process kind (`sampleDatabaseCpu`): the job's connections,
 * the server's, and PostgreSQL's own workers.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { migrate } from '../backend/db/migrate.js';
import { createPool } from '../backend/db/pool.js';
import { RETENTION_REST, runRetention } from '../backend/domain/erasure/retention.js';
import { createApp } from '../backend/http/app.js';
import { RATE_LIMIT_ENV } from '../backend/domain/rate-limits.js';
import { seedHistory } from './history-seed.js';
import {
  cpuOf,
  machineCpu,
  openBenchDatabase,
  option,
  roleDeps,
  sampleDatabaseCpu,
  serveRoleApp,
  spawnRole,
  type Batch,
  type RoleChild,
} from './support.js';

const ROLE_ENV = 'CAPIGRAM_BENCH_RETENTION_ROLE';
const ORIGIN = 'https://shop.example.com';

async function serveRole(databaseUrl: string): Promise<void> {
  const pool = createPool(databaseUrl, 20);
  const unlimited = Object.fromEntries(Object.values(RATE_LIMIT_ENV).map((name) => [name, '1000000']));
  await serveRoleApp(createApp(roleDeps(pool, { DATABASE_URL: databaseUrl, ...unlimited })));
}

async function initLoad(url: string, websiteId: string, total: number, concurrency: number): Promise<Batch> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies: number[] = [];
  let failures = 0;
  let issued = 0;
  const one = (client: number) =>
    new Promise<void>((resolve) => {
      const body = JSON.stringify({
        websiteId,
        tempId: randomUUID(),
        sessionId: randomUUID(),
        visitRequestId: randomUUID(),
        href: `${ORIGIN}/landing?fbclid=IwAR2F4`,
        landingPage: '/landing?fbclid=IwAR2F4',
        referrer: 'https://l.facebook.com/',
        userAgent: 'Mozilla/5.0 (iPhone) CapigramBench/1.0',
        fbc: `fb.1.${Date.now()}.IwAR2F4`,
        fbp: 'fb.1.1763776500000.1116446470',
      });
      const started = performance.now();
      const req = request(
        `${url}/backend/track/init`,
        {
          agent,
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            origin: ORIGIN,
            'x-capigram-client-ip': `198.51.100.${client + 1}`,
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode === 200) latencies.push(performance.now() - started);
            else failures += 1;
            resolve();
          });
        },
      );
      req.on('error', () => {
        failures += 1;
        resolve();
      });
      req.end(body);
    });
  const client = async (c: number) => {
    while (issued < total) {
      issued += 1;
      await one(c);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, c) => client(c)));
  agent.destroy();
  return { latencies, failures, seconds: (performance.now() - started) / 1000 };
}

function p99(batches: Batch[]): number {
  const all = batches.flatMap((b) => b.latencies).sort((a, b) => a - b);
  return all[Math.min(all.length - 1, Math.floor(0.99 * all.length))] ?? Number.NaN;
}

function summary(batches: Batch[]): string {
  const all = batches.flatMap((b) => b.latencies).sort((a, b) => a - b);
  const q = (p: number) => all[Math.min(all.length - 1, Math.floor(p * all.length))] ?? Number.NaN;
  const seconds = batches.reduce((s, b) => s + b.seconds, 0);
  const failures = batches.reduce((s, b) => s + b.failures, 0);
  return `${(all.length / seconds).toFixed(0)} | ${q(0.5).toFixed(2)} | ${q(0.99).toFixed(2)} | ${all.length} | ${failures}`;
}

interface WalMark {
  at: number;
  lsnBytes: bigint;
  timed: number;
  requested: number;
  /** CPU seconds so far: Capigram's server process, this process (the load, the job's client side). */
  server: number;
  load: number;
  /** The machine's CPU seconds so far, from /proc/stat: busy (all but idle and iowait), and stolen by the hypervisor. */
  busy: number;
  steal: number;
}

/** Where the WAL is and how many checkpoints have begun (pg_stat_checkpointer from 17, pg_stat_bgwriter before). */
async function walMark(pool: ReturnType<typeof createPool>, server: RoleChild): Promise<WalMark> {
  const at = performance.now();
  const machine = machineCpu();
  const own = process.cpuUsage();
  const serverMicros = await cpuOf(server);
  const { rows: lsn } = await pool.query<{ b: string }>(
    `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS b`,
  );
  const { rows: has } = await pool.query<{ v: boolean }>(
    `SELECT to_regclass('pg_catalog.pg_stat_checkpointer') IS NOT NULL AS v`,
  );
  const { rows } = await pool.query<{ timed: number; requested: number }>(
    has[0]!.v
      ? 'SELECT num_timed::int AS timed, num_requested::int AS requested FROM pg_stat_checkpointer'
      : 'SELECT checkpoints_timed::int AS timed, checkpoints_req::int AS requested FROM pg_stat_bgwriter',
  );
  return {
    at,
    lsnBytes: BigInt(lsn[0]!.b.split('.')[0]!),
    ...rows[0]!,
    server: serverMicros / 1e6,
    load: (own.user + own.system) / 1e6,
    busy: machine.busy,
    steal: machine.steal,
  };
}

export async function run(args: string[] = []): Promise<void> {
  const expired = option(args, 'expired', 1_000_000);
  const requests = option(args, 'requests', 5_000);
  const concurrency = option(args, 'concurrency', 50);
  const beforeSeconds = option(args, 'before', 90);
  const afterSeconds = option(args, 'after', 90);
  // The job's pause after each batch, as a multiple of its time (0: no pause); a fraction is fine.
  const restArg = args.find((a) => a.startsWith('--rest='))?.slice('--rest='.length);
  const rest = restArg === undefined || !(Number(restArg) >= 0) ? RETENTION_REST : Number(restArg);
  const db = await openBenchDatabase(4);
  const children: RoleChild[] = [];
  try {
    await migrate(db.pool);
    const h = await seedHistory(db.pool, {
      visits: expired,
      days: 365,
      endDaysAgo: 401,
      log: (l) => process.stderr.write(`${l}\n`),
    });
    const { rows: site } = await db.pool.query<{ website_id: string }>(
      `WITH a AS (INSERT INTO accounts (name) VALUES ('bench') RETURNING id)
       INSERT INTO sites (account_id, website_id, name, domains) SELECT id, 'ws_retention_bench', 'Bench', '{example.com}' FROM a RETURNING website_id`,
    );
    const websiteId = site[0]!.website_id;
    // The seed's gigabytes of dirty pages are written out now, by a checkpoint and the kernel,
    // not during the windows measured (where they slowed the windows before the job by up to a
    // fifth, or the job's own when the first checkpoint fell there).
    await db.pool.query('CHECKPOINT');
    execFileSync('sync');
    const capigram = await spawnRole(import.meta.url, ROLE_ENV, 'capigram', [db.databaseUrl]);
    children.push(capigram);

    await initLoad(capigram.url, websiteId, 10_000, concurrency); // warm-up
    const windows = async (seconds: number): Promise<Batch[]> => {
      const out: Batch[] = [];
      const until = performance.now() + seconds * 1000;
      while (performance.now() < until)
        out.push(await initLoad(capigram.url, websiteId, requests, concurrency));
      return out;
    };
    // The job's connections and the sampler's own carry names, so that the database's CPU can be
    // told apart: the job's, the requests' (the server's pool), and PostgreSQL's own processes.
    const named = (name: string) => {
      const url = new URL(db.databaseUrl);
      url.searchParams.set('application_name', name);
      return url.toString();
    };
    const jobPool = createPool(named('job'), 4);
    const probe = createPool(named('probe'), 1);
    const sampler = await sampleDatabaseCpu(probe);
    const marks: Record<string, WalMark> = {};
    marks.before = await walMark(probe, capigram);
    sampler.phase('before');
    const before = await windows(beforeSeconds);

    marks.during = await walMark(probe, capigram);
    sampler.phase('during');
    const started = performance.now();
    let finished = false;
    const job = runRetention(jobPool, new Date(), { days: 400, rest }).then((r) => {
      finished = true;
      return r;
    });
    const during: Batch[] = [];
    while (!finished) during.push(await initLoad(capigram.url, websiteId, requests, concurrency));
    const result = await job;
    const jobSeconds = (performance.now() - started) / 1000;
    marks.after = await walMark(probe, capigram);
    sampler.phase('after');
    const after = await windows(afterSeconds);
    const cpu = await sampler.stop();
    marks.end = await walMark(probe, capigram);
    await jobPool.end();
    await probe.end();
    const kinds = [...new Set(Object.values(cpu.cpu).flatMap((k) => Object.keys(k)))].sort();
    const cores = (phase: string, kind: string) =>
      ((cpu.cpu[phase]?.[kind] ?? 0) / (cpu.seconds[phase] ?? Number.NaN)).toFixed(2);

    const { rows: left } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM visits WHERE client_ip IS NOT NULL AND created_at < now() - interval '400 days'`,
    );
    const lines = [
      `history: ${h.rows.visits} visits (all expired), ${h.rows.leads} leads, ${h.rows.conversions} conversions, ${h.rows.sends} sends, seeded in ${h.seconds.toFixed(0)} s`,
      `retention job: ${jobSeconds.toFixed(1)} s (rest ${rest}× each batch's time; visits ${result.seconds.visits?.toFixed(1)} s, conversions ${result.seconds.conversions?.toFixed(1)} s, finished sends ${result.seconds.sends?.toFixed(1)} s); cleared ${JSON.stringify(result.cleared)}, finished sends deleted ${result.sendsDeleted}, done ${result.done}; expired visits still holding an IP: ${left[0]!.n}`,
      '',
      `track/init at ${concurrency} concurrent clients, Capigram in its own process:`,
      '',
      '| when | req/s | p50 ms | p99 ms | requests | failed |',
      '|---|---:|---:|---:|---:|---:|',
      `| before the job (${before.length} windows) | ${summary(before)} |`,
      `| while the job runs (${during.length} windows) | ${summary(during)} |`,
      `| after the job (${after.length} windows) | ${summary(after)} |`,
      `| before and after together | ${summary([...before, ...after])} |`,
      '',
      "The database's CPU, in cores busy on average (by process kind: `requests` are the server's connections, `job` the retention job's):",
      '',
      `| when | ${kinds.join(' | ')} |`,
      `|---|${kinds.map(() => '---:').join('|')}|`,
      ...['before', 'during', 'after'].map((p) => `| ${p} | ${kinds.map((k) => cores(p, k)).join(' | ')} |`),
      '',
      "The machine per phase: its CPU in cores busy (of all processes and the kernel) and stolen by the hypervisor, the server's and this process's (the load, the job's client side), the requests' database CPU per request; WAL written and checkpoints begun (by time, or requested by WAL volume):",
      '',
      '| when | machine busy | stolen | server | load | DB µs/request | WAL MB/s | checkpoints timed | requested |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...(
        [
          ['before', 'during'],
          ['during', 'after'],
          ['after', 'end'],
        ] as const
      ).map(([p, next]) => {
        const [a, b] = [marks[p]!, marks[next]!];
        const secs = (b.at - a.at) / 1000;
        const mbps = Number(b.lsnBytes - a.lsnBytes) / 2 ** 20 / secs;
        const served = { before, during, after }[p].reduce((n, x) => n + x.latencies.length + x.failures, 0);
        const perRequest = ((cpu.cpu[p]?.requests ?? Number.NaN) * 1e6) / served;
        const c = (x: number) => (x / secs).toFixed(2);
        return `| ${p} | ${c(b.busy - a.busy)} | ${c(b.steal - a.steal)} | ${c(b.server - a.server)} | ${c(b.load - a.load)} | ${perRequest.toFixed(0)} | ${mbps.toFixed(1)} | ${b.timed - a.timed} | ${b.requested - a.requested} |`;
      }),
      '',
      `track/init p99 while the job runs / before and after: ${(p99(during) / p99([...before, ...after])).toFixed(2)} (target <= 1.2); job ${jobSeconds.toFixed(0)} s (target < 300)`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    for (const child of children) child.process.kill();
    await db.close();
  }
}

if (process.env[ROLE_ENV] !== undefined) {
  serveRole(process.argv[2]!).catch((err: unknown) => {
    process.stderr.write(`bench retention server failed: ${String(err)}\n`);
    process.exit(1);
  });
}
