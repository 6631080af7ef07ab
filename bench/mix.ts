/**
 * `npm run bench -- mix`: the write path on the workload users send, with the worker delivering
 * everything meanwhile.
 *
 * One PostgreSQL (DATABASE_URL, or an embedded one with default durability), and in processes of
 * their own: the cheapest write (a bare hono handler doing one INSERT of a UUID and the body as
 * jsonb into a table with only its key), Capigram's server, Capigram's worker (production
 * settings: concurrency 8, poll interval 1 s) and a fake Meta (`test/fakes/meta.ts`, validating
 * every event) that the worker delivers every conversion and PageView to. The load generator is
 * this process. Every Capigram row runs while the worker delivers what the rows before it queued.
 *
 * Rows, taking turns in `--rounds` rounds (so a machine that gets busier weighs on all alike):
 * - the cheapest write (50 clients), the ceiling every ratio is against;
 * - `events/conversion` for a warm lead (a join attributed to a visit) naming nothing, as the
 *   `api` suite sends it;
 * - the same naming its site (`websiteId`);
 * - a cold lead (a Telegram user never seen) naming its site and channel, with fbc, fbp, IP and
 *   User-Agent, without and with an `Idempotency-Key`;
 * - `track/init` on the site with a Meta pixel (a PageView send per visit);
 * - invite clicks, `track/invite` and `/r/{site}/{channel}`, 10 clients each, while `track/init`
 *   runs at 40 clients beside them: everything saturated, the clicks' capacity.
 *
 * Then, after each round's rows, the paced rows: the latency a visitor sees. Clicks at a fixed
 * total rate (`--click-rate`, default 100/s) from 10 connections, each waiting for its answer
 * before its next click, from a process of their own (a visitor's browser is not the load
 * generator), while `track/init` runs from 40 connections paced at half the rate the track/init
 * row reached in the same round, and the worker delivers. At the end, the round trips
 * and commits the server spends per click with no other requests (the worker still delivering).
 *
 * Per row: requests per second and the ratio to the cheapest write of the same round; p50 and
 * p99; the server's CPU, the worker's, and PostgreSQL's (every postgres process, from /proc), per
 * request; the database CPU of the server's and the worker's own connections (by application
 * name); the server's round trips (queries it sent) and the database's commits (pg_stat_database
 * `xact_commit`, every connection) per request. Then delivery: sends delivered over the whole run
 * (the last backlog drained at the end), and per delivered send the worker's CPU, its
 * connections' database CPU, its round trips and its commits (counted by the worker process).
 *
 * Options: `--requests=N` (per row and round, default 4000), `--rounds=N` (default 2),
 * `--concurrency=N` (default 50), `--short` (1000 requests per row and round: a quick run of a
 * minute or two), `--click-rate=N` (the paced rows' clicks per second, default 100; each paced
 * row clicks half the requests per row and round, at least 300), `--init-rate=N` (the paced rows
 * alone, track/init beside them at N visits a second: the clicks' latency against the load).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createSecretBox, parseSecretKey } from '../backend/crypto/secret-box.js';
import { migrate } from '../backend/db/migrate.js';
import { createPool, type Pool } from '../backend/db/pool.js';
import { createAccount } from '../backend/domain/admin/accounts.js';
import { createApiKey } from '../backend/domain/admin/api-keys.js';
import { addPixel } from '../backend/domain/admin/pixels.js';
import { createSite } from '../backend/domain/admin/sites.js';
import { RATE_LIMIT_ENV } from '../backend/domain/rate-limits.js';
import { createApp } from '../backend/http/app.js';
import { startWorker } from '../backend/worker/runner.js';
import { deliveryTasks } from '../backend/worker/tasks/deliver.js';
import { startMeta } from '../test/fakes/meta.js';
import { type Call, initCall as trackInitCall } from './tracker.js';
import {
  cheapestWrite,
  createCheapestTable,
  databaseCpuMicros,
  openBenchDatabase,
  option,
  roleDeps,
} from './support.js';

const ROLE_ENV = 'CAPIGRAM_BENCH_MIX_ROLE';
const POOL_SIZE = 20;
const ORIGIN = 'https://shop.example.com';
const UA = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) CapigramBench/1.0';
const FIRST_WARM = 900_000_000;
const FIRST_COLD = 950_000_000;
/** The application names the roles' connections carry, by which the database's CPU is split. */
const APP = { server: 'bench_capigram_server', worker: 'bench_capigram_worker', cheapest: 'bench_cheapest' };

type Role = 'cheapest' | 'capigram' | 'worker' | 'meta' | 'visitors';

interface RoleSpec {
  role: Role;
  databaseUrl: string;
  metaUrl: string;
  secretKey: string;
}

// ---------------------------------------------------------------------------------------------
// The role processes.

/** What a role process has spent so far: its CPU, the queries it sent and the commits they made. */
interface RoleStats {
  cpuMicros: number;
  queries: number;
  commits: number;
  /** The process's event-loop delay since the last reset (`statsOf(child, true)`), ms. */
  loopDelay: { p99: number; max: number };
}

/**
 * Counts every query the process's PostgreSQL clients send (one round trip each) and the
 * transactions they commit: a statement outside `BEGIN … COMMIT` commits by itself, as
 * `xact_commit` counts it.
 */
function countQueries(): () => { queries: number; commits: number } {
  let queries = 0;
  let commits = 0;
  const open = new WeakSet<object>();
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: object, ...args: unknown[]) {
    const config = args[0];
    const text =
      typeof config === 'string'
        ? config
        : typeof (config as { text?: unknown } | null)?.text === 'string'
          ? (config as { text: string }).text
          : '';
    queries += 1;
    const head = text.trimStart().slice(0, 8).toUpperCase();
    const tail = text.trimEnd().slice(-12).toUpperCase();
    if (tail.endsWith('COMMIT')) {
      commits += 1;
      open.delete(this);
    } else if (tail.endsWith('ROLLBACK')) open.delete(this);
    else if (head.startsWith('BEGIN')) open.add(this);
    else if (!open.has(this)) commits += 1;
    return original.apply(this, args);
  };
  return () => ({ queries, commits });
}

/**
 * Answers the parent's `stats` message. The event-loop delay tells a process that was late to
 * run its callbacks (its own work, a garbage collection, or the operating system giving the core
 * to another process) from time spent elsewhere; `reset` starts its histogram afresh.
 */
function answerStats(counts: () => { queries: number; commits: number }): void {
  process.once('SIGTERM', () => process.exit(0));
  const delay = monitorEventLoopDelay({ resolution: 2 });
  delay.enable();
  process.on('message', (message: { stats?: boolean; reset?: boolean }) => {
    if (message.stats !== true) return;
    const usage = process.cpuUsage();
    const loopDelay = { p99: delay.percentile(99) / 1e6, max: delay.max / 1e6 };
    if (message.reset === true) delay.reset();
    process.send?.({ stats: { cpuMicros: usage.user + usage.system, ...counts(), loopDelay } });
  });
}

function withApplicationName(databaseUrl: string, name: string): string {
  const url = new URL(databaseUrl);
  url.searchParams.set('application_name', name);
  return url.toString();
}

async function serveRole(spec: RoleSpec): Promise<void> {
  const counts = countQueries();
  answerStats(counts);
  if (spec.role === 'visitors') {
    serveVisitors();
    process.send?.({ ready: 'visitors' });
    return;
  }
  if (spec.role === 'meta') {
    const meta = await startMeta();
    process.send?.({ ready: meta.url });
    return;
  }
  if (spec.role === 'worker') {
    const url = withApplicationName(spec.databaseUrl, APP.worker);
    const deps = roleDeps(
      createPool(url, POOL_SIZE),
      { DATABASE_URL: url, META_GRAPH_URL: spec.metaUrl, LOG_LEVEL: 'warn' },
      spec.secretKey,
    );
    await startWorker(deps, { extraTasks: deliveryTasks(deps), crontab: '' });
    process.send?.({ ready: 'worker' });
    return;
  }
  const { serve } = await import('@hono/node-server');
  const url = withApplicationName(spec.databaseUrl, spec.role === 'cheapest' ? APP.cheapest : APP.server);
  const pool = createPool(url, POOL_SIZE);
  let app: { fetch: (request: Request, env?: unknown) => Response | Promise<Response> };
  if (spec.role === 'cheapest') {
    app = cheapestWrite('/cheapest', 201, (sql, params) => pool.query(sql, params));
  } else {
    // The limiter stays in the path with a budget the benchmark's few addresses cannot exhaust.
    const unlimited = Object.fromEntries(Object.values(RATE_LIMIT_ENV).map((name) => [name, '1000000']));
    app = createApp(roleDeps(pool, { DATABASE_URL: url, ...unlimited }, spec.secretKey));
  }
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
  await once(server, 'listening');
  const address = server.address() as { port: number };
  process.send?.({ ready: `http://127.0.0.1:${address.port}` });
}

interface Child {
  process: ChildProcess;
  url: string;
}

async function spawn(spec: RoleSpec): Promise<Child> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, [ROLE_ENV]: JSON.stringify(spec) },
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  for (;;) {
    const [message] = (await once(child, 'message')) as [{ ready?: string }];
    if (message.ready !== undefined) return { process: child, url: message.ready };
  }
}

async function statsOf(child: Child, reset = false): Promise<RoleStats> {
  child.process.send({ stats: true, reset });
  for (;;) {
    const [message] = (await once(child.process, 'message')) as [{ stats?: RoleStats }];
    if (message.stats !== undefined) return message.stats;
  }
}

// ---------------------------------------------------------------------------------------------
// The visitors: the paced rows' clicks, from a process of their own.

/** What a paced row's clicks need to be made: the site, and the browsers track/init has seen. */
interface ClickSpec {
  kind: 'invite' | 'redirect';
  websiteId: string;
  channelId: string;
  /** For `track/invite`: the browsers (and sessions) it clicks as, taken in turn. */
  browsers: { tid: string; sid: string }[];
}

/** A click's call: `track/invite` as one of `browsers` (the `n`th click), or an ad's `/r/` redirect. */
function clickCall(spec: ClickSpec, client: number, n: number): Call {
  if (spec.kind === 'invite') {
    const b = spec.browsers[n % spec.browsers.length]!;
    return {
      method: 'GET',
      path: `/backend/track/invite?website=${spec.websiteId}&tid=${b.tid}&sid=${b.sid}`,
      expect: 302,
      headers: { referer: `${ORIGIN}/landing`, 'x-capigram-client-ip': `198.51.100.${client + 101}` },
    };
  }
  return {
    method: 'GET',
    path: `/r/${spec.websiteId}/${spec.channelId}?fbclid=IwAR${randomBytes(6).toString('hex')}&utm_source=fb`,
    expect: 302,
    headers: {
      'user-agent': UA,
      accept: 'text/html',
      'x-capigram-client-ip': `198.51.100.${client + 151}`,
    },
  };
}

interface PacedClicks {
  url: string;
  spec: ClickSpec;
  perSecond: number;
  connections: number;
  count: number;
}

/**
 * The paced rows' clicks come from this process, as a visitor's browser is not the load
 * generator: measured from the generator, whose event loop and garbage collector also serve 40
 * track/init connections, a click's latency included the generator's own delays.
 */
function serveVisitors(): void {
  process.on('message', (message: { clicks?: PacedClicks }) => {
    const c = message.clicks;
    if (c === undefined) return;
    let n = 0;
    void paced(
      c.url,
      c.connections,
      c.perSecond,
      (client) => clickCall(c.spec, client, n++),
      (sent) => sent >= c.count,
    ).then((batch) => process.send?.({ clicked: batch }));
  });
}

async function clicksFrom(visitors: Child, clicks: PacedClicks): Promise<Batch> {
  visitors.process.send({ clicks });
  for (;;) {
    const [message] = (await once(visitors.process, 'message')) as [{ clicked?: Batch }];
    if (message.clicked !== undefined) return message.clicked;
  }
}

// ---------------------------------------------------------------------------------------------
// The database's side.

/** CPU (µs) of each connection's backend so far, by application name; others under `other`. */
async function backendCpu(pool: Pool): Promise<Map<number, { kind: string; micros: number }>> {
  const { rows } = await pool.query<{ pid: number; kind: string }>(
    `SELECT pid, coalesce(nullif(application_name, ''), backend_type) AS kind FROM pg_stat_activity
     WHERE datname = current_database() AND pid <> pg_backend_pid()`,
  );
  const out = new Map<number, { kind: string; micros: number }>();
  for (const r of rows) {
    const micros = procCpuMicros(r.pid);
    if (micros !== undefined) out.set(r.pid, { kind: r.kind, micros });
  }
  return out;
}

function procCpuMicros(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / 100;
  } catch {
    return undefined;
  }
}

/** The CPU each kind of connection spent between two readings (a backend born meanwhile counts from 0). */
function cpuBetween(
  before: Map<number, { kind: string; micros: number }>,
  after: Map<number, { kind: string; micros: number }>,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [pid, a] of after) {
    const spent = a.micros - (before.get(pid)?.micros ?? 0);
    out[a.kind] = (out[a.kind] ?? 0) + spent;
  }
  return out;
}

async function databaseCounters(
  pool: Pool,
): Promise<{ commits: number; delivered: number; pending: number }> {
  const { rows } = await pool.query<{ commits: string; delivered: number; pending: number }>(
    `SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits,
            (SELECT count(*)::int FROM sends WHERE status = 'sent') AS delivered,
            (SELECT count(*)::int FROM sends WHERE status = 'pending') AS pending`,
  );
  return { commits: Number(rows[0]!.commits), delivered: rows[0]!.delivered, pending: rows[0]!.pending };
}

// ---------------------------------------------------------------------------------------------
// The load.

interface Batch {
  latencies: number[];
  failures: number;
  seconds: number;
}

/** Sends one call at a time on `agent`, recording its latency (or its failure) in `batch`. */
function sender(agent: Agent, batch: { latencies: number[]; failures: number }) {
  return (url: string, call: Call) =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      const req = request(
        `${url}${call.path}`,
        { agent, method: call.method, headers: call.headers },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode === call.expect) batch.latencies.push(performance.now() - started);
            else batch.failures += 1;
            resolve();
          });
        },
      );
      req.on('error', () => {
        batch.failures += 1;
        resolve();
      });
      req.end(call.body);
    });
}

/** `total` calls from `concurrency` closed-loop clients, each sending its next call as soon as its last is answered. */
async function load(
  url: string,
  total: number,
  concurrency: number,
  next: (client: number) => Call,
): Promise<Batch> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const batch = { latencies: [] as number[], failures: 0 };
  const one = sender(agent, batch);
  let issued = 0;
  const client = async (n: number) => {
    while (issued < total) {
      issued += 1;
      await one(url, next(n));
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, n) => client(n)));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { ...batch, seconds };
}

/**
 * Calls at a fixed total rate, `perSecond`, from `connections` keep-alive connections, each due
 * `connections / perSecond` seconds after its last (the connections' turns interleaved). A
 * connection waits for its answer before its next call, as a browser does: one answered late
 * sends its next at once, without making up for the calls it missed, so a slow server shows as
 * an achieved rate below the target as well as in the latencies (each measured from its send).
 * Stops when `done()` says so.
 */
async function paced(
  url: string,
  connections: number,
  perSecond: number,
  next: (client: number) => Call,
  done: (sent: number) => boolean,
): Promise<Batch> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const batch = { latencies: [] as number[], failures: 0 };
  const one = sender(agent, batch);
  const interval = (connections * 1000) / perSecond;
  let sent = 0;
  const started = performance.now();
  const client = async (n: number) => {
    let due = started + (n * interval) / connections;
    for (;;) {
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (done(sent)) return;
      sent += 1;
      await one(url, next(n));
      due = Math.max(due + interval, performance.now());
    }
  };
  await Promise.all(Array.from({ length: connections }, (_, n) => client(n)));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { ...batch, seconds };
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

/** One row of the table, summed over its rounds. */
class Row {
  latencies: number[] = [];
  failures = 0;
  seconds = 0;
  requests = 0;
  serverCpu = 0;
  workerCpu = 0;
  dbCpu = 0;
  dbServer = 0;
  dbWorker = 0;
  queries = 0;
  commits = 0;
  delivered = 0;
  /** Per round: this row's rate over the cheapest write's. */
  ratios: number[] = [];

  constructor(
    readonly name: string,
    /** The server the row loads (its CPU is the row's server CPU). */
    readonly target: Child,
    /** The requests of the row that count (its latencies); other load may run beside them. */
    readonly run: () => Promise<{ measured: Batch; requests: number }>,
  ) {}

  get perSecond(): number {
    return this.latencies.length / this.seconds;
  }
}

/**
 * Clicks paced at a fixed rate beside track/init paced at half the rate the track/init row
 * reached in the same round, or at `--init-rate` (the worker delivering meanwhile): the latency a
 * visitor sees on a busy server.
 */
class PacedRow {
  clicks = { latencies: [] as number[], failures: 0, seconds: 0 };
  /** Per round: the clicks' p99 (ms), so that one bad round shows as such instead of as the whole row's tail. */
  roundP99: number[] = [];
  inits = { answered: 0, failures: 0, seconds: 0 };
  /** Per round: the rate track/init was paced at. */
  initTargets: number[] = [];
  /** Per round: the event-loop delay (p99, max ms) of the server and of the visitors' process. */
  serverDelay: { p99: number; max: number }[] = [];
  visitorsDelay: { p99: number; max: number }[] = [];

  constructor(
    readonly name: string,
    readonly kind: ClickSpec['kind'],
  ) {}
}

interface Env {
  pool: Pool;
  worker: Child;
}

async function measureRow(env: Env, row: Row): Promise<void> {
  const [s0, w0] = [await statsOf(row.target), await statsOf(env.worker)];
  const b0 = await backendCpu(env.pool);
  const c0 = await databaseCounters(env.pool);
  const d0 = databaseCpuMicros();
  const { measured, requests } = await row.run();
  const d1 = databaseCpuMicros();
  const c1 = await databaseCounters(env.pool);
  const b1 = await backendCpu(env.pool);
  const [s1, w1] = [await statsOf(row.target), await statsOf(env.worker)];
  const split = cpuBetween(b0, b1);
  row.latencies.push(...measured.latencies);
  row.failures += measured.failures;
  row.seconds += measured.seconds;
  row.requests += requests;
  row.serverCpu += s1.cpuMicros - s0.cpuMicros;
  row.workerCpu += w1.cpuMicros - w0.cpuMicros;
  row.dbCpu += d1 - d0;
  row.dbServer += split[APP.server] ?? 0;
  row.dbWorker += split[APP.worker] ?? 0;
  row.queries += s1.queries - s0.queries;
  row.commits += c1.commits - c0.commits;
  row.delivered += c1.delivered - c0.delivered;
}

// ---------------------------------------------------------------------------------------------
// The run.

interface Seeded {
  accountId: string;
  siteId: string;
  websiteId: string;
  channelId: string;
  apiKey: string;
}

async function seed(pool: Pool, secretKey: string, warmLeads: number, links: number): Promise<Seeded> {
  const box = createSecretBox(parseSecretKey(secretKey));
  const { accountId } = await createAccount(pool, { name: 'bench' });
  const { siteId, websiteId } = await createSite(pool, {
    accountId,
    name: 'Bench',
    domains: ['shop.example.com'],
  });
  const one = async (sql: string, params: unknown[]) =>
    (await pool.query<{ id: string }>(sql, params)).rows[0]!.id;
  const botId = await one(
    `INSERT INTO bots (account_id, telegram_bot_id, token_enc, webhook_secret_hash) VALUES ($1, 999001, 'unused', '\\x00') RETURNING id`,
    [accountId],
  );
  const channelId = await one(
    `INSERT INTO channels (site_id, bot_id, telegram_chat_id, title, public_invite_url) VALUES ($1, $2, -1001000000002, 'Main', 'https://t.me/bench') RETURNING id`,
    [siteId, botId],
  );
  await pool.query('UPDATE sites SET default_channel_id = $2 WHERE id = $1', [siteId, channelId]);
  await addPixel(
    { pool, box },
    { platform: 'meta', siteId, pixelId: '1234567890', accessToken: 'meta-test-token' },
  );
  // Warm leads: an attributed join each, with its lead row, as the webhook leaves them.
  await pool.query(
    `WITH src AS MATERIALIZED (SELECT g, gen_random_uuid() AS vid, gen_random_uuid() AS iid, gen_random_uuid() AS lid FROM generate_series(1, $3::int) g),
     v AS (INSERT INTO visits (id, site_id, temp_id, session_id, href, client_ip, user_agent, fbc, fbp)
           SELECT vid, $1, gen_random_uuid(), gen_random_uuid(), 'https://shop.example.com/l?fbclid=IwAR' || g, '198.51.100.' || (g % 250 + 1),
                  'Mozilla/5.0 (iPhone) CapigramBench/1.0', 'fb.1.1763776500000.IwAR' || g, 'fb.1.1763776500000.' || g FROM src),
     i AS (INSERT INTO invitations (id, channel_id, invite_link, visit_id, assigned_at, used_at, used_by)
           SELECT iid, $2, 'https://t.me/+benchused' || g, vid, now(), now(), $4::bigint + g FROM src),
     l AS (INSERT INTO leads (id, site_id, telegram_user_id, first_seen_at, last_seen_at)
           SELECT lid, $1, $4::bigint + g, now(), now() FROM src)
     INSERT INTO memberships (channel_id, telegram_user_id, lead_id, kind, invitation_id, visit_id, attributed, occurred_at)
     SELECT $2, $4::bigint + g, lid, 'join', iid, vid, true, now() FROM src`,
    [siteId, channelId, warmLeads, FIRST_WARM],
  );
  // The pool the clicks take their links from.
  await pool.query(
    `INSERT INTO invitations (channel_id, invite_link, name, expires_at)
     SELECT $1, 'https://t.me/+bench' || md5(random()::text || g), 'cg-bench-' || g, now() + interval '1 day'
     FROM generate_series(1, $2::int) g`,
    [channelId, links],
  );
  await pool.query('ANALYZE');
  const { apiKey } = await createApiKey(pool, { accountId, name: 'bench' });
  return { accountId, siteId, websiteId, channelId, apiKey };
}

/**
 * The statements that took the database's time over the measured rounds, dearest first, with
 * how often each was planned (a named statement is planned once per connection).
 */
async function topStatements(pool: Pool): Promise<string[]> {
  const { rows } = await pool.query<{
    calls: string;
    total_ms: number;
    mean_ms: number;
    plans: string;
    plan_ms: number;
    rows: string;
    query: string;
  }>(
    `SELECT calls, total_exec_time AS total_ms, mean_exec_time AS mean_ms, plans, total_plan_time AS plan_ms, rows,
            regexp_replace(query, '\\s+', ' ', 'g') AS query
     FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
     ORDER BY total_exec_time + total_plan_time DESC LIMIT 25`,
  );
  return [
    '| total ms | calls | mean ms | plans | planning ms | rows | statement |',
    '|---:|---:|---:|---:|---:|---:|---|',
    ...rows.map(
      (r) =>
        `| ${r.total_ms.toFixed(0)} | ${r.calls} | ${r.mean_ms.toFixed(3)} | ${r.plans} | ${r.plan_ms.toFixed(0)} | ${r.rows} | ${r.query.slice(0, 160).replaceAll('|', '\\|')} |`,
    ),
  ];
}

async function waitDrained(pool: Pool, timeoutMs = 180_000): Promise<number> {
  const started = performance.now();
  for (;;) {
    const { pending } = await databaseCounters(pool);
    if (pending === 0) return (performance.now() - started) / 1000;
    if (performance.now() - started > timeoutMs) throw new Error(`${pending} sends still pending`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function run(args: string[] = []): Promise<void> {
  const short = args.includes('--short');
  const perRound = option(args, 'requests', short ? 1000 : 4000);
  const rounds = option(args, 'rounds', 2);
  const concurrency = option(args, 'concurrency', 50);
  const clickClients = 10;
  // The paced rows: clicks per second from the click clients together, and clicks per round.
  const clickRate = option(args, 'click-rate', 100);
  const pacedClicks = Math.max(300, Math.floor(perRound / 2));
  const warmup = Math.min(500, perRound);

  // --statements: where the database's time goes, statement by statement, at the end.
  const statements = args.includes('--statements');
  const db = await openBenchDatabase(
    4,
    statements
      ? {
          shared_preload_libraries: 'pg_stat_statements',
          'pg_stat_statements.track': 'all',
          // Planning too: a statement sent without a name is planned on every call.
          'pg_stat_statements.track_planning': 'on',
        }
      : {},
  );
  const { databaseUrl, pool } = db;
  const secretKey = randomBytes(32).toString('hex');
  const children: Child[] = [];
  try {
    await migrate(pool);
    await createCheapestTable(pool);
    if (statements) await pool.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const warmLeads = 2 * (warmup + perRound * rounds);
    // Every click takes a pooled link: the saturated rows', the paced rows' and the clicks alone.
    const clicks = 2 * (warmup + perRound * rounds) + 2 * pacedClicks * rounds + 1000;
    const s = await seed(pool, secretKey, warmLeads, clicks + 100);
    const spec = { databaseUrl, secretKey, metaUrl: '' };
    const meta = await spawn({ ...spec, role: 'meta' });
    const cheapest = await spawn({ ...spec, role: 'cheapest' });
    const server = await spawn({ ...spec, role: 'capigram' });
    const worker = await spawn({ ...spec, role: 'worker', metaUrl: meta.url });
    const visitors = await spawn({ ...spec, role: 'visitors' });
    children.push(meta, cheapest, server, worker, visitors);
    const env: Env = { pool, worker };

    let nextWarm = FIRST_WARM + 1;
    let nextCold = FIRST_COLD + 1;
    let nextBare = 0;
    const browsers: { tid: string; sid: string }[] = [];
    let nextBrowser = 0;

    const json = (headers: Record<string, string> = {}) => ({
      'content-type': 'application/json',
      authorization: `Bearer ${s.apiKey}`,
      ...headers,
    });
    const purchase = {
      eventType: 'Purchase',
      value: 49.9,
      currency: 'USD',
      pii: { email: 'buyer@example.com' },
    };
    const cheapestCall = (): Call => ({
      method: 'POST',
      path: '/cheapest',
      expect: 201,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ telegramUserId: nextBare++, siteId: s.siteId, ...purchase }),
    });
    const warmCall = (named: boolean) => (): Call => ({
      method: 'POST',
      path: '/api/v1/events/conversion',
      expect: 201,
      headers: json({ 'x-capigram-client-ip': '203.0.113.10' }),
      body: JSON.stringify({
        telegramUserId: nextWarm++,
        ...(named ? { websiteId: s.websiteId } : {}),
        ...purchase,
      }),
    });
    const coldCall =
      (keyed: boolean) =>
      (client: number): Call => ({
        method: 'POST',
        path: '/api/v1/events/conversion',
        expect: 201,
        headers: json({
          'x-capigram-client-ip': `203.0.113.${client + 1}`,
          'x-capigram-client-user-agent': UA,
          ...(keyed ? { 'idempotency-key': `bench-${randomBytes(8).toString('hex')}` } : {}),
        }),
        body: JSON.stringify({
          telegramUserId: nextCold++,
          siteId: s.siteId,
          channelId: s.channelId,
          fbc: `fb.1.${Date.now()}.IwAR2F4${client}`,
          fbp: 'fb.1.1763776500000.1116446470',
          ...purchase,
        }),
      });
    const initCall = (client: number): Call => {
      const browser = { tid: randomUUID(), sid: randomUUID() };
      browsers.push(browser);
      return trackInitCall(s.websiteId, client, browser);
    };
    const clickSpec = (kind: ClickSpec['kind']): ClickSpec => ({
      kind,
      websiteId: s.websiteId,
      channelId: s.channelId,
      browsers,
    });
    const inviteCall = (client: number) => clickCall(clickSpec('invite'), client, nextBrowser++);
    const redirectCall = (client: number) => clickCall(clickSpec('redirect'), client, 0);

    const plain = (target: Child, next: (client: number) => Call) => async () => {
      const measured = await load(target.url, perRound, concurrency, next);
      return { measured, requests: perRound };
    };
    // Clicks while track/init runs beside them; the init requests count in the row's costs.
    const clicksDuringInit = (next: (client: number) => Call) => async () => {
      let clicking = true;
      let initRequests = 0;
      const background = (async () => {
        while (clicking) {
          await load(server.url, 200, concurrency - clickClients, initCall);
          initRequests += 200;
        }
      })();
      const measured = await load(server.url, perRound, clickClients, next);
      clicking = false;
      await background;
      return { measured, requests: perRound + initRequests };
    };
    const pacedRun = async (row: PacedRow, initTarget: number) => {
      await Promise.all([statsOf(server, true), statsOf(visitors, true)]);
      let clicking = true;
      const background = paced(server.url, concurrency - clickClients, initTarget, initCall, () => !clicking);
      // The browsers track/init has seen so far (the newest), each clicking in turn.
      const clicks = await clicksFrom(visitors, {
        url: server.url,
        spec: { ...clickSpec(row.kind), browsers: browsers.slice(-20_000) },
        perSecond: clickRate,
        connections: clickClients,
        count: pacedClicks,
      });
      clicking = false;
      const [s1, v1] = await Promise.all([statsOf(server), statsOf(visitors)]);
      row.serverDelay.push(s1.loopDelay);
      row.visitorsDelay.push(v1.loopDelay);
      const inits = await background;
      row.clicks.latencies.push(...clicks.latencies);
      row.roundP99.push(
        quantile(
          [...clicks.latencies].sort((a, b) => a - b),
          0.99,
        ),
      );
      row.clicks.failures += clicks.failures;
      row.clicks.seconds += clicks.seconds;
      row.inits.answered += inits.latencies.length;
      row.inits.failures += inits.failures;
      row.inits.seconds += inits.seconds;
      row.initTargets.push(initTarget);
    };
    /** Round trips and commits the server spends per click with no other requests (neither depends on load). */
    const alone = async (next: (client: number) => Call) => {
      const n = 500;
      const s0 = await statsOf(server);
      const batch = await load(server.url, n, clickClients, next);
      const s1 = await statsOf(server);
      return {
        trips: (s1.queries - s0.queries) / n,
        commits: (s1.commits - s0.commits) / n,
        failures: batch.failures,
      };
    };
    const pacedRows = [
      new PacedRow(`track/invite, ${clickClients} connections`, 'invite'),
      new PacedRow(`/r/ click, ${clickClients} connections`, 'redirect'),
    ];

    const cheapestRow = new Row(
      'cheapest write: bare hono + one INSERT (uuid, jsonb)',
      cheapest,
      plain(cheapest, cheapestCall),
    );
    const initRow = new Row('track/init, site with a Meta pixel', server, plain(server, initCall));
    const rows = [
      cheapestRow,
      new Row('conversion, warm lead, nothing named', server, plain(server, warmCall(false))),
      new Row('conversion, warm lead, site named', server, plain(server, warmCall(true))),
      new Row('conversion, cold lead, site + channel named', server, plain(server, coldCall(false))),
      new Row(
        'conversion, cold lead, site + channel named, Idempotency-Key',
        server,
        plain(server, coldCall(true)),
      ),
      initRow,
      new Row(
        `track/invite, ${clickClients} clients, beside track/init`,
        server,
        clicksDuringInit(inviteCall),
      ),
      new Row(
        `/r/ click, ${clickClients} clients, beside track/init`,
        server,
        clicksDuringInit(redirectCall),
      ),
    ];

    // Warm-up: every path once, then the tables analyzed as autovacuum would within a minute.
    await load(cheapest.url, warmup, concurrency, cheapestCall);
    await load(server.url, warmup, concurrency, warmCall(false));
    await load(server.url, warmup, concurrency, coldCall(false));
    await load(server.url, warmup, concurrency, initCall);
    // Both kinds of click from as many clients as the server has connections, so that every
    // connection has prepared and planned the clicks' statements before anything is measured.
    await load(server.url, Math.min(warmup, 200), POOL_SIZE, inviteCall);
    await load(server.url, Math.min(warmup, 200), POOL_SIZE, redirectCall);
    await waitDrained(pool);
    await pool.query('ANALYZE');
    if (statements) await pool.query('SELECT pg_stat_statements_reset()');

    const w0 = await statsOf(worker);
    const b0 = await backendCpu(pool);
    const c0 = await databaseCounters(pool);
    const load0 = loadavg()[0]!;
    const started = performance.now();
    // --init-rate: the paced rows alone, track/init beside them at that rate.
    const initRate = option(args, 'init-rate', 0);
    for (let round = 0; round < rounds && initRate > 0; round++)
      for (const row of round % 2 === 0 ? pacedRows : [...pacedRows].reverse()) await pacedRun(row, initRate);
    for (let round = 0; round < rounds && initRate === 0; round++) {
      // The order alternates, so that neither end of a round is always the same row's.
      const order = round % 2 === 0 ? rows : [cheapestRow, ...rows.slice(1).reverse()];
      let cheapestRate = Number.NaN;
      const rates = new Map<Row, number>();
      for (const row of order) {
        const before = { n: row.latencies.length, s: row.seconds };
        await measureRow(env, row);
        rates.set(row, (row.latencies.length - before.n) / (row.seconds - before.s));
      }
      cheapestRate = rates.get(cheapestRow)!;
      for (const [row, rate] of rates) row.ratios.push(rate / cheapestRate);
      for (const row of round % 2 === 0 ? pacedRows : [...pacedRows].reverse())
        await pacedRun(row, rates.get(initRow)! / 2);
    }
    const inviteAlone = await alone(inviteCall);
    const redirectAlone = await alone(redirectCall);
    const drain = await waitDrained(pool);
    const w1 = await statsOf(worker);
    const b1 = await backendCpu(pool);
    const c1 = await databaseCounters(pool);
    const seconds = (performance.now() - started) / 1000;
    const delivered = c1.delivered - c0.delivered;
    const workerDb = cpuBetween(b0, b1)[APP.worker] ?? 0;
    const { rows: failedRows } = await pool.query<{ status: string; n: number }>(
      `SELECT status, count(*)::int AS n FROM sends WHERE status <> 'sent' GROUP BY status`,
    );

    const f0 = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : '–');
    const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '–');
    const line = (r: Row) => {
      const sorted = [...r.latencies].sort((a, b) => a - b);
      const per = (n: number) => n / r.requests;
      return `| ${r.name} | ${f0(r.perSecond)} | ${r.ratios.map(f2).join(' / ')} | ${f2(quantile(sorted, 0.5))} | ${f2(quantile(sorted, 0.99))} | ${f0(per(r.serverCpu))} | ${f0(per(r.workerCpu))} | ${f0(per(r.dbCpu))} | ${f0(per(r.dbServer))} | ${f0(per(r.dbWorker))} | ${f2(per(r.queries))} | ${f2(per(r.commits))} | ${r.delivered} | ${r.failures} |`;
    };
    const pacedLine = (r: PacedRow) => {
      const sorted = [...r.clicks.latencies].sort((a, b) => a - b);
      const delays = (d: { p99: number; max: number }[]) =>
        d.map((x) => `${f0(x.p99)}, ${f0(x.max)}`).join(' / ');
      return `| ${r.name} | ${clickRate} | ${f0(sorted.length / r.clicks.seconds)} | ${f2(quantile(sorted, 0.5))} | ${f2(quantile(sorted, 0.99))} | ${r.roundP99.map(f0).join(' / ')} | ${f2(sorted.at(-1) ?? Number.NaN)} | ${r.initTargets.map(f0).join(' / ')} | ${f0(r.inits.answered / r.inits.seconds)} | ${delays(r.serverDelay)} | ${delays(r.visitorsDelay)} | ${r.clicks.failures + r.inits.failures} |`;
    };
    const aloneText = (name: string, a: { trips: number; commits: number; failures: number }) =>
      `${name} ${f2(a.trips)} round trips and ${f2(a.commits)} commits per click${a.failures > 0 ? ` (${a.failures} failed)` : ''}`;
    const out = [
      `mixed write path: ${perRound} requests per row and round, ${rounds} rounds (order alternating), ${concurrency} keep-alive clients (clicks: ${clickClients}, beside track/init at ${concurrency - clickClients}), the worker delivering to a fake Meta throughout; load average at start ${load0.toFixed(2)}`,
      '',
      '| row | req/s | / cheapest, per round | p50 ms | p99 ms | server CPU µs/req | worker CPU µs/req | database CPU µs/req | of it server conns | of it worker conns | round trips/req | commits/req | sends delivered in row | failed |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...rows.map(line),
      '',
      `delivery over the run (${seconds.toFixed(1)} s, the last backlog drained ${drain.toFixed(2)} s after the last row): ${delivered} sends delivered; per delivered send: worker CPU ${f0((w1.cpuMicros - w0.cpuMicros) / delivered)} µs, its connections' database CPU ${f0(workerDb / delivered)} µs, ${f2((w1.queries - w0.queries) / delivered)} round trips, ${f2((w1.commits - w0.commits) / delivered)} commits`,
      `clicks paced: ${pacedClicks} clicks per row and round at ${clickRate}/s from ${clickClients} connections (each waits for its answer), track/init beside them from ${concurrency - clickClients} connections paced at ${initRate > 0 ? `${initRate}/s` : 'half the rate the track/init row reached in the same round'}, the worker delivering; the clicks from a process of their own`,
      '',
      "| paced row | clicks/s target | clicks/s achieved | p50 ms | p99 ms | p99 ms per round | max ms | track/init beside, target /s per round | track/init achieved /s | server event-loop delay p99, max ms, per round | visitors' event-loop delay p99, max ms | failed |",
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...pacedRows.map(pacedLine),
      '',
      `the server's own cost per click, 500 clicks from ${clickClients} clients with no other requests (the worker delivering; the server's wake-ups of the worker for new visits and its requests for pool refills included): ${aloneText('track/invite', inviteAlone)}; ${aloneText('/r/', redirectAlone)}`,
      '',
      `sends not delivered: ${failedRows.length === 0 ? 'none' : failedRows.map((r) => `${r.n} ${r.status}`).join(', ')}`,
      '',
      `ratios to the cheapest write (mean of rounds): ${rows
        .slice(1)
        .map((r) => `${r.name}: ${f2(r.ratios.reduce((a, b) => a + b, 0) / r.ratios.length)}`)
        .join('; ')}`,
    ];
    if (statements) out.push('', ...(await topStatements(pool)));
    process.stdout.write(`${out.join('\n')}\n`);
  } finally {
    await Promise.all(
      children.map(async (child) => {
        if (child.process.exitCode !== null) return;
        const exited = once(child.process, 'exit');
        child.process.kill();
        await exited;
      }),
    );
    await db.close();
  }
}

const roleSpec = process.env[ROLE_ENV];
if (roleSpec !== undefined) {
  serveRole(JSON.parse(roleSpec) as RoleSpec).catch((error: unknown) => {
    process.stderr.write(`bench mix role failed: ${String(error)}\n`);
    process.exit(1);
  });
}
