import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { loadConfig } from '../backend/config.js';
import { createSecretBox, parseSecretKey } from '../backend/crypto/secret-box.js';
import { startEmbedded } from '../backend/db/embedded.js';
import { createPool, type Pool } from '../backend/db/pool.js';
import type { Deps } from '../backend/deps.js';
import { createLogger } from '../backend/log.js';
import { createMetrics } from '../backend/metrics.js';
import { createProcessState } from '../backend/process-state.js';

/** What the benchmarks share: options, a throw-away database, and measured server processes. */

/** `--name=N` among the arguments, a positive integer, or the fallback. */
export function option(args: string[], name: string, fallback: number): number {
  const raw = args.find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1];
  const value = raw === undefined ? Number.NaN : Number(raw);
  return Number.isInteger(value) && value > 0 ? value : fallback;
}

export interface BenchDatabase {
  databaseUrl: string;
  pool: Pool;
  /** Another fresh database on the same server, dropped by `close` too (the history suite's second one). */
  sibling(poolSize: number): Promise<{ databaseUrl: string; pool: Pool }>;
  /** Ends the pools, drops the databases, and stops the embedded server if one was started. */
  close(): Promise<void>;
}

/**
 * A fresh database for one benchmark run: on the server in DATABASE_URL, or on an embedded
 * PostgreSQL in a temporary directory (default durability, as in production), started with
 * `settings` (the mix suite's `--statements` loads pg_stat_statements).
 */
export async function openBenchDatabase(
  poolSize: number,
  settings: Record<string, string> = {},
): Promise<BenchDatabase> {
  let adminUrl = process.env.DATABASE_URL;
  let dataDir: string | null = null;
  const embedded =
    adminUrl === undefined || adminUrl === ''
      ? await startEmbedded({
          dataDir: (dataDir = mkdtempSync(join(tmpdir(), 'capigram-bench-pg-'))),
          settings,
        })
      : null;
  if (embedded) adminUrl = embedded.url;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  const made: { database: string; pool: Pool }[] = [];
  const create = async (size: number) => {
    const database = `capigram_bench_${randomBytes(4).toString('hex')}`;
    await admin.query(`CREATE DATABASE ${database}`);
    const url = new URL(adminUrl!);
    url.pathname = `/${database}`;
    const pool = createPool(url.toString(), size);
    made.push({ database, pool });
    return { databaseUrl: url.toString(), pool };
  };
  const { databaseUrl, pool } = await create(poolSize);
  return {
    databaseUrl,
    pool,
    sibling: create,
    async close() {
      for (const { database, pool } of made) {
        await pool.end();
        await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
      }
      await admin.end();
      await embedded?.stop();
      if (dataDir !== null) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A server under measurement, in its own process so that its CPU can be read apart from the load's. */
export interface RoleChild {
  process: ChildProcess;
  url: string;
}

/** Forks the benchmark module itself with `roleEnv=role`; the child answers `{ready: url}` once it listens. */
export async function spawnRole(
  moduleUrl: string,
  roleEnv: string,
  role: string,
  args: string[] = [],
): Promise<RoleChild> {
  // CAPIGRAM_BENCH_CPU_PROF=<dir>: every role process writes a V8 CPU profile there when it ends.
  const profileDir = process.env.CAPIGRAM_BENCH_CPU_PROF;
  const child = fork(fileURLToPath(moduleUrl), args, {
    env: { ...process.env, [roleEnv]: role },
    execArgv: ['--import', 'tsx', ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [])],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const [message] = (await once(child, 'message')) as [{ ready: string }];
  return { process: child, url: message.ready };
}

/**
 * A role process's dependencies, built as production builds them: configuration from `env`
 * (silent logs and a temporary DATA_DIR unless `env` says otherwise), fresh metrics, and a
 * throw-away secret key unless one is given (a role that reads what the parent encrypted).
 */
export function roleDeps(pool: Pool, env: Record<string, string>, secretKey?: string): Deps {
  const config = loadConfig({ LOG_LEVEL: 'silent', DATA_DIR: tmpdir(), ...env });
  const metrics = createMetrics();
  const log = createLogger(config.LOG_LEVEL);
  return {
    config,
    pool,
    log,
    metrics,
    box: createSecretBox(secretKey === undefined ? randomBytes(32) : parseSecretKey(secretKey)),
    adminToken: randomBytes(16).toString('hex'),
    now: () => new Date(),
    local: createProcessState(pool, log, {
      onEventBatch: (events, outcome) => metrics.eventBatches.observe({ outcome }, events),
      onVisitBatch: (visits, outcome) => metrics.visitBatches.observe({ outcome }, visits),
    }),
  };
}

/** In a role process: serves `app` on a free loopback port, answers CPU readings, and reports its URL (see `spawnRole`). */
export async function serveRoleApp(app: {
  fetch: (request: Request, env?: unknown) => Response | Promise<Response>;
}): Promise<void> {
  answerCpuRequests();
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
  await once(server, 'listening');
  process.send?.({ ready: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

/** In a role process: answer the parent's CPU readings (see `cpuOf`). */
export function answerCpuRequests(): void {
  // The parent ends role processes with SIGTERM; exiting normally lets --cpu-prof write its profile.
  process.once('SIGTERM', () => process.exit(0));
  process.on('message', (message: { cpu?: boolean }) => {
    if (message.cpu !== true) return;
    const usage = process.cpuUsage();
    process.send?.({ cpuMicros: usage.user + usage.system });
  });
}

/** CPU time the role process has spent so far, in microseconds. */
export async function cpuOf(child: RoleChild): Promise<number> {
  child.process.send({ cpu: true });
  for (;;) {
    const [message] = (await once(child.process, 'message')) as [Partial<{ cpuMicros: number }>];
    if (message.cpuMicros !== undefined) return message.cpuMicros;
  }
}

/**
 * CPU time spent so far by every PostgreSQL process on this machine, in microseconds (Linux
 * only: NaN elsewhere). Read before and after a batch, it prices the database's share of a
 * request, which a server's own CPU reading leaves out. /proc counts in clock ticks (10 ms), so
 * it is meant for batches of seconds, not single requests; a backend that exits mid-batch takes
 * its ticks with it (the benchmarks' pools keep theirs open).
 */
export function databaseCpuMicros(): number {
  let ticks = 0;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return Number.NaN;
  }
  for (const pid of entries) {
    if (!/^\d+$/.test(pid)) continue;
    const stat = procStat(pid);
    if (stat?.comm === 'postgres') ticks += stat.ticks;
  }
  return (ticks * 1_000_000) / CLOCK_TICKS_PER_SECOND;
}

/** One process's name and CPU ticks so far (user and system), or undefined when it is gone. */
function procStat(pid: number | string): { comm: string; ticks: number } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid …": comm may hold spaces, so split after its closing parenthesis.
  const close = stat.lastIndexOf(')');
  const fields = stat.slice(close + 2).split(' ');
  // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after "(comm) ".
  return { comm: stat.slice(stat.indexOf('(') + 1, close), ticks: Number(fields[11]) + Number(fields[12]) };
}

/**
 * Where the database's CPU goes, phase by phase: every `everyMs` the sampler lists PostgreSQL's
 * processes (`pg_stat_activity`, which names their kind) and adds each one's CPU since the last
 * look to the current phase, under its `backend_type`, or for a client connection its
 * `application_name` (`requests` when it has none). A process first seen after the sampler
 * started counts from its birth, so short-lived ones (autovacuum workers) lose at most their last
 * interval. Linux only (NaN-free: elsewhere nothing is counted).
 */
export interface CpuSampler {
  /** From now on, CPU counts to `phase`. */
  phase(name: string): void;
  /** Stops; CPU seconds per phase and kind, and each phase's wall seconds. */
  stop(): Promise<{ cpu: Record<string, Record<string, number>>; seconds: Record<string, number> }>;
}

export async function sampleDatabaseCpu(pool: Pool, everyMs = 500): Promise<CpuSampler> {
  const last = new Map<number, number>();
  const cpu: Record<string, Record<string, number>> = {};
  const seconds: Record<string, number> = {};
  let current = 'start';
  let since = performance.now();
  const list = async () =>
    (
      await pool.query<{ pid: number; kind: string }>(
        `SELECT pid, CASE WHEN backend_type = 'client backend'
                          THEN coalesce(nullif(application_name, ''), 'requests') ELSE backend_type END AS kind
           FROM pg_stat_activity WHERE pid <> pg_backend_pid()`,
      )
    ).rows;
  for (const r of await list()) {
    const t = procStat(r.pid)?.ticks;
    if (t !== undefined) last.set(r.pid, t);
  }
  const look = async () => {
    for (const r of await list()) {
      const t = procStat(r.pid)?.ticks;
      if (t === undefined) continue;
      const spent = t - (last.get(r.pid) ?? 0);
      last.set(r.pid, t);
      const into = (cpu[current] ??= {});
      into[r.kind] = (into[r.kind] ?? 0) + spent / CLOCK_TICKS_PER_SECOND;
    }
  };
  let running = true;
  const loop = (async () => {
    while (running) {
      await new Promise((r) => setTimeout(r, everyMs));
      await look().catch(() => undefined);
    }
  })();
  const close = () => {
    seconds[current] = (seconds[current] ?? 0) + (performance.now() - since) / 1000;
  };
  return {
    phase(name) {
      close();
      current = name;
      since = performance.now();
    },
    async stop() {
      running = false;
      await loop;
      await look().catch(() => undefined);
      close();
      return { cpu, seconds };
    },
  };
}

/**
 * The whole machine's CPU seconds so far, from the first line of /proc/stat: busy (every state but
 * idle and iowait) and stolen by the hypervisor, which shows a phase the host slowed (Linux; NaN
 * elsewhere).
 */
export function machineCpu(): { busy: number; steal: number } {
  try {
    const line = readFileSync('/proc/stat', 'latin1').split('\n')[0]!;
    // "cpu user nice system idle iowait irq softirq steal …", in clock ticks.
    const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = line
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    return {
      busy: (user + nice + system + irq + softirq) / CLOCK_TICKS_PER_SECOND,
      steal: steal / CLOCK_TICKS_PER_SECOND,
    };
  } catch {
    return { busy: Number.NaN, steal: Number.NaN };
  }
}

/** USER_HZ: 100 on every Linux this runs on (the kernel's ABI fixes it for /proc). */
const CLOCK_TICKS_PER_SECOND = 100;

/** What one batch of load measured: the latency of each successful request, the failures, the time. */
export interface Batch {
  latencies: number[];
  failures: number;
  seconds: number;
}

/**
 * One row of a benchmark table, gathered over interleaved rounds: every batch's latencies and
 * time, with the CPU the measured server process (and, with `database`, every PostgreSQL
 * process) spent on it.
 */
export class RoundRow {
  private latencies: number[] = [];
  private sorted: number[] | null = null;
  private seconds = 0;
  private cpuMicros = 0;
  private dbMicros = 0;
  failures = 0;
  requests = 0;

  constructor(
    private readonly child: RoleChild,
    private readonly load: (total: number, concurrency: number) => Promise<Batch>,
    private readonly database = false,
  ) {}

  async batch(total: number, concurrency: number): Promise<void> {
    const before = await cpuOf(this.child);
    const dbBefore = this.database ? databaseCpuMicros() : 0;
    const b = await this.load(total, concurrency);
    if (this.database) this.dbMicros += databaseCpuMicros() - dbBefore;
    this.cpuMicros += (await cpuOf(this.child)) - before;
    this.latencies.push(...b.latencies);
    this.sorted = null;
    this.failures += b.failures;
    this.seconds += b.seconds;
    this.requests += total;
  }

  get perSecond(): number {
    return this.latencies.length / this.seconds;
  }

  /** The latency at quantile `q` (0.5, 0.99), in milliseconds. */
  latency(q: number): number {
    this.sorted ??= [...this.latencies].sort((a, b) => a - b);
    return this.sorted[Math.min(this.sorted.length - 1, Math.floor(q * this.sorted.length))] ?? Number.NaN;
  }

  get cpuPerRequest(): number {
    return this.cpuMicros / this.requests;
  }

  get databasePerRequest(): number {
    return this.dbMicros / this.requests;
  }
}

/**
 * The cheapest durable write an endpoint can make here: parse the JSON body, INSERT a UUID and the
 * body as jsonb into a table that has only its primary key. Everything an endpoint does beyond
 * this is its own cost; PostgreSQL's own pgbench doing the same INSERT shows what the database has
 * beyond it.
 */
export const CHEAPEST_TABLE = 'bench_cheapest_write';

export async function createCheapestTable(pool: Pool): Promise<void> {
  await pool.query(`CREATE TABLE IF NOT EXISTS ${CHEAPEST_TABLE} (id uuid PRIMARY KEY, body jsonb NOT NULL)`);
}

export function cheapestWrite(
  path: string,
  status: 200 | 201,
  query: (sql: string, params: unknown[]) => Promise<unknown>,
): Hono {
  const app = new Hono();
  app.post(path, async (c) => {
    const body: unknown = await c.req.json();
    const id = randomUUID();
    await query(`INSERT INTO ${CHEAPEST_TABLE} (id, body) VALUES ($1, $2)`, [id, JSON.stringify(body)]);
    return c.json({ id }, status);
  });
  return app;
}
