/**
 * `npm run bench -- delivery`: how fast a conversion reaches the ad platform, and how many
 * events per second the delivery pipeline sustains.
 *
 * 1. Latency at light load: conversions recorded one at a time (about 25 a second) while the
 *    worker runs with production settings; for each, the time from its COMMIT (when the API would
 *    answer 2xx) to the fake Meta receiving the request that carries it. p50 and p99.
 * 2. Throughput: N conversions are committed in one transaction while an idle worker waits, and
 *    the clock runs from the wake-up that follows the commit until every event has been accepted
 *    by the fake Meta and no send or delivery job is left. Three runs on the same database and
 *    worker settings:
 *    - graphile-worker running N empty jobs: the ceiling of any one-job-per-event design here;
 *    - Capigram's delivery with batching (up to 1,000 events a request for Meta);
 *    - the same pipeline with batches of one: one request per event.
 *
 * The worker runs in its own process (production defaults: concurrency 8, 1.5 s timeout, poll
 * interval 1 s, so the wake-up job starts on graphile-worker's LISTEN/NOTIFY); the fake Meta and the
 * producer share this process, so commit and receipt times come from one clock. PostgreSQL is
 * DATABASE_URL, or an embedded one with default durability settings.
 *
 * 3. Sustained: 8 producers commit conversions one per transaction as fast as they can for
 *    `--seconds` while the worker delivers; events delivered per second over that window, and how
 *    long after the last commit the platform had them all (how far delivery trailed production).
 *
 * Options: `--events=N` (per throughput run, default 5000), `--single-events=N` (the one event per
 * request run, default events/5), `--samples=N` (latency, default 300), `--seconds=N` (default 10).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { createSecretBox, parseSecretKey } from '../backend/crypto/secret-box.js';
import { migrate } from '../backend/db/migrate.js';
import { createPool, withTx, type Pool } from '../backend/db/pool.js';
import type { DeliveryOptions } from '../backend/delivery/options.js';
import type { Deps } from '../backend/deps.js';
import { addPixel } from '../backend/domain/admin/pixels.js';
import { recordConversion } from '../backend/domain/outbox/conversion-record.js';
import { DELIVER_TASK, DeliveryWaker } from '../backend/domain/outbox/delivery-wake.js';
import { startWorker } from '../backend/worker/runner.js';
import { deliveryTasks } from '../backend/worker/tasks/deliver.js';
import { startMeta, type MetaFake } from '../test/fakes/meta.js';
import { openBenchDatabase, option, roleDeps } from './support.js';

const ROLE_ENV = 'CAPIGRAM_BENCH_DELIVERY_ROLE';
const NOOP_TASK = 'bench_noop';
const POOL_SIZE = 20;
const UA = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) CapigramBench/1.0';

/** What a worker child runs: the real delivery tasks (with option overrides), or empty jobs. */
interface RoleSpec {
  kind: 'deliver' | 'noop';
  options?: Partial<DeliveryOptions>;
  databaseUrl: string;
  metaUrl: string;
  secretKey: string;
}

async function serveRole(spec: RoleSpec): Promise<void> {
  const deps = roleDeps(
    createPool(spec.databaseUrl, POOL_SIZE),
    { DATABASE_URL: spec.databaseUrl, META_GRAPH_URL: spec.metaUrl, LOG_LEVEL: 'warn' },
    spec.secretKey,
  );
  const extraTasks =
    spec.kind === 'noop' ? { [NOOP_TASK]: async () => undefined } : deliveryTasks(deps, spec.options);
  const runner = await startWorker(deps, { extraTasks, crontab: '' });
  process.on('message', () => {
    // graphile-worker completes a job without awaiting it: let the pool drain before exiting, or
    // the last job would stay locked.
    void runner
      .stop()
      .then(() => deps.pool.end())
      .then(() => process.exit(0));
  });
  process.send?.({ ready: true });
}

async function spawnWorker(spec: RoleSpec): Promise<ChildProcess> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, [ROLE_ENV]: JSON.stringify(spec) },
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await once(child, 'message');
  // Let every worker of the pool finish its first (empty) poll and wait on NOTIFY.
  await new Promise((r) => setTimeout(r, 300));
  return child;
}

async function stopWorker(child: ChildProcess): Promise<void> {
  const exited = once(child, 'exit');
  child.send('stop');
  await exited;
}

interface Site {
  siteId: string;
  visitId: string;
  pixelId: string;
}

/** A site with one Meta pixel and the landing visit every conversion is attributed to. */
async function seedSite(pool: Pool, box: Deps['box']): Promise<Site> {
  const one = async (sql: string, params: unknown[]) =>
    (await pool.query<{ id: string }>(sql, params)).rows[0]!.id;
  const accountId = await one(`INSERT INTO accounts (name) VALUES ('bench') RETURNING id`, []);
  const siteId = await one(
    `INSERT INTO sites (account_id, website_id, name, domains) VALUES ($1, $2, 'Bench', '{shop.example.com}') RETURNING id`,
    [accountId, `ws_bench_${randomBytes(6).toString('hex')}`],
  );
  const pixelId = (
    await addPixel(
      { pool, box },
      { platform: 'meta', siteId, pixelId: '1234567890', accessToken: 'meta-test-token' },
    )
  ).pixelId;
  const visitId = await one(
    `INSERT INTO visits (site_id, temp_id, session_id, href, client_ip, user_agent, fbc, fbp)
     VALUES ($1, gen_random_uuid(), gen_random_uuid(), 'https://shop.example.com/landing?fbclid=IwAR2F4', '203.0.113.7', $2,
             'fb.1.1763776512345.IwAR2F4', 'fb.1.1763776500000.1116446470') RETURNING id`,
    [siteId, UA],
  );
  return { siteId, visitId, pixelId };
}

let telegramUser = 900_000_000;

async function recordSubscribe(tx: pg.PoolClient, site: Site): Promise<string> {
  const now = new Date();
  const c = await recordConversion(
    tx,
    {
      siteId: site.siteId,
      channelId: null,
      telegramUserId: telegramUser++,
      visitId: site.visitId,
      eventType: 'Subscribe',
      eventTime: now,
      attributedAt: now,
      receivedAt: now,
      source: 'webhook',
    },
    true,
  );
  return `cnv_${c.conversionId}`;
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

async function waitFor(
  probe: () => Promise<boolean> | boolean,
  what: string,
  timeoutMs = 120_000,
): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await probe()) return performance.now();
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function jobsLeft(pool: Pool, task: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM graphile_worker.jobs WHERE task_identifier = $1',
    [task],
  );
  return rows[0]!.n;
}

// The producer's wake-ups, spaced as a server process spaces them (one waker per pool).
const wakers = new WeakMap<Pool, DeliveryWaker>();
function wakeDelivery(pool: Pool): void {
  let waker = wakers.get(pool);
  if (waker === undefined) wakers.set(pool, (waker = new DeliveryWaker(pool)));
  waker.wake();
}

/**
 * Waits until no send is pending and no delivery job is left. Every run ends with it: a worker
 * stopped while a job runs may leave that job locked (graphile-worker 0.17 does not await a job's
 * completion on shutdown unless completions are batched), and the next run would wait for it.
 */
function drained(pool: Pool): Promise<number> {
  return waitFor(async () => {
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM sends WHERE status = 'pending'`,
    );
    return rows[0]!.n === 0 && (await jobsLeft(pool, DELIVER_TASK)) === 0;
  }, 'the delivery jobs');
}

/** A producer's transaction, and the wake-up that follows its commit (as the API and the webhook do). */
async function commitSubscribe(pool: Pool, site: Site): Promise<string> {
  const eventId = await withTx(pool, (tx) => recordSubscribe(tx, site));
  wakeDelivery(pool);
  return eventId;
}

/** Latency from each conversion's commit to the fake Meta's receipt of the request carrying it. */
async function latencyRun(
  pool: Pool,
  meta: MetaFake,
  site: Site,
  samples: number,
): Promise<{ p50: number; p99: number; max: number; requests: number }> {
  meta.reset();
  const committedAt = new Map<string, number>();
  const warmup = 20;
  for (let i = 0; i < samples + warmup; i++) {
    const eventId = await withTx(pool, (tx) => recordSubscribe(tx, site));
    // The clock starts at the commit: the wake-up that follows is part of the latency.
    if (i >= warmup) committedAt.set(eventId, performance.now());
    wakeDelivery(pool);
    // About 25 a second, spread irregularly (exponential gaps) as independent arrivals are.
    await new Promise((r) => setTimeout(r, -Math.log(1 - Math.random()) * 40));
  }
  await waitFor(() => meta.events().length >= samples + warmup, 'the latency run to be delivered');
  await drained(pool);
  const latencies: number[] = [];
  for (const e of meta.events()) {
    const t0 = committedAt.get(e.event.event_id!);
    if (t0 !== undefined) {
      latencies.push(e.receivedAt - t0);
      committedAt.delete(e.event.event_id!);
    }
  }
  latencies.sort((a, b) => a - b);
  return {
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    max: latencies.at(-1) ?? Number.NaN,
    requests: meta.received.length,
  };
}

interface Throughput {
  perSecond: number;
  /** Seconds from the commit until the platform had every event (deliveries) or the last job ran. */
  deliveredSeconds: number;
  drainedSeconds: number;
  requests: number;
}

async function emptyJobsRun(pool: Pool, events: number): Promise<Throughput> {
  await pool.query(
    `SELECT graphile_worker.add_job($1, json_build_object('n', g)) FROM generate_series(1, $2) g`,
    [NOOP_TASK, events],
  );
  const t0 = performance.now();
  const t1 = await waitFor(async () => (await jobsLeft(pool, NOOP_TASK)) === 0, 'the empty jobs');
  const s = (t1 - t0) / 1000;
  return { perSecond: events / s, deliveredSeconds: s, drainedSeconds: s, requests: 0 };
}

async function deliveryRun(pool: Pool, meta: MetaFake, site: Site, events: number): Promise<Throughput> {
  meta.reset();
  await withTx(pool, async (tx) => {
    for (let i = 0; i < events; i++) await recordSubscribe(tx, site);
  });
  const t0 = performance.now();
  wakeDelivery(pool);
  const delivered = await waitFor(
    () => meta.dedupStats().distinct >= events,
    'every event to reach the platform',
  );
  const empty = await drained(pool);
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM sends WHERE pixel_id = $1 AND status <> 'sent'`,
    [site.pixelId],
  );
  if (rows[0]!.n !== 0) throw new Error(`${rows[0]!.n} sends not delivered`);
  return {
    perSecond: events / ((empty - t0) / 1000),
    deliveredSeconds: (delivered - t0) / 1000,
    drainedSeconds: (empty - t0) / 1000,
    requests: meta.received.length,
  };
}

interface Sustained {
  seconds: number;
  committed: number;
  deliveredInWindow: number;
  /** Seconds after the last commit until the platform had every event. */
  tailSeconds: number;
  requests: number;
}

/** Producers commit conversions one per transaction, as fast as they can, while the worker delivers. */
async function sustainedRun(
  pool: Pool,
  meta: MetaFake,
  site: Site,
  producers: number,
  seconds: number,
): Promise<Sustained> {
  meta.reset();
  let committed = 0;
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: producers }, async () => {
      while (performance.now() < end) {
        await commitSubscribe(pool, site);
        committed += 1;
      }
    }),
  );
  const t1 = performance.now();
  const deliveredInWindow = meta.dedupStats().distinct;
  const done = await waitFor(
    () => meta.dedupStats().distinct >= committed,
    'the sustained run to be delivered',
  );
  await drained(pool);
  return {
    seconds: (t1 - t0) / 1000,
    committed,
    deliveredInWindow,
    tailSeconds: (done - t1) / 1000,
    requests: meta.received.length,
  };
}

export async function run(args: string[] = []): Promise<void> {
  const events = option(args, 'events', 5_000);
  const singleEvents = option(args, 'single-events', Math.max(500, Math.floor(events / 5)));
  const samples = option(args, 'samples', 300);
  const seconds = option(args, 'seconds', 10);
  const producers = 8;

  const db = await openBenchDatabase(producers + 2);
  const { databaseUrl, pool } = db;
  const meta = await startMeta();
  const secretKey = randomBytes(32).toString('hex');
  const box = createSecretBox(parseSecretKey(secretKey));
  const base = { databaseUrl, metaUrl: meta.url, secretKey };
  const children = new Set<ChildProcess>();
  const withWorker = async <T>(spec: Omit<RoleSpec, keyof typeof base>, fn: () => Promise<T>): Promise<T> => {
    const child = await spawnWorker({ ...base, ...spec });
    children.add(child);
    try {
      return await fn();
    } finally {
      await stopWorker(child);
      children.delete(child);
    }
  };
  try {
    await migrate(pool);
    const load = loadavg()[0]!;

    const latency = await withWorker({ kind: 'deliver' }, async () =>
      latencyRun(pool, meta, await seedSite(pool, box), samples),
    );
    const ceiling = await withWorker({ kind: 'noop' }, () => emptyJobsRun(pool, events));
    const batched = await withWorker({ kind: 'deliver' }, async () =>
      deliveryRun(pool, meta, await seedSite(pool, box), events),
    );
    const single = await withWorker({ kind: 'deliver', options: { maxBatch: 1 } }, async () =>
      deliveryRun(pool, meta, await seedSite(pool, box), singleEvents),
    );
    const sustained = await withWorker({ kind: 'deliver' }, async () =>
      sustainedRun(pool, meta, await seedSite(pool, box), producers, seconds),
    );

    const row = (name: string, t: Throughput) =>
      `| ${name} | ${t.perSecond.toFixed(0)} | ${t.deliveredSeconds.toFixed(2)} | ${t.drainedSeconds.toFixed(2)} | ${t.requests || '–'} |`;
    const lines = [
      `delivery latency at light load (${samples} conversions, ~25/s, after 20 warm-up): commit → fake Meta receipt`,
      '',
      '| p50 ms | p99 ms | max ms | requests |',
      '|---:|---:|---:|---:|',
      `| ${latency.p50.toFixed(1)} | ${latency.p99.toFixed(1)} | ${latency.max.toFixed(1)} | ${latency.requests} |`,
      '',
      `targets: p50 <= 25 ms, p99 <= 100 ms`,
      '',
      `throughput: ${events} events committed at once (${singleEvents} for one event per request), worker concurrency 8 (load average at start ${load.toFixed(2)})`,
      '',
      '| run | events/s (until the queue is empty) | all delivered after s | queue empty after s | requests |',
      '|---|---:|---:|---:|---:|',
      row('graphile-worker, empty jobs (ceiling)', ceiling),
      row('Capigram delivery, batched', batched),
      row('Capigram delivery, one event per request', single),
      '',
      `batched / ceiling: ${(batched.perSecond / ceiling.perSecond).toFixed(2)} (target >= 0.5); batched / one-per-request: ${(batched.perSecond / single.perSecond).toFixed(1)}x (target >= 5x)`,
      '',
      `sustained: ${producers} producers committing one conversion per transaction for ${sustained.seconds.toFixed(1)} s while the worker delivers:`,
      `${sustained.committed} committed (${(sustained.committed / sustained.seconds).toFixed(0)}/s), ${sustained.deliveredInWindow} delivered in that time ` +
        `(${(sustained.deliveredInWindow / sustained.seconds).toFixed(0)}/s), the rest ${sustained.tailSeconds.toFixed(2)} s after the last commit, ` +
        `in ${sustained.requests} requests (${(sustained.committed / sustained.requests).toFixed(1)} events per request)`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    for (const child of children) child.kill();
    await meta.close();
    await db.close();
  }
}

const role = process.env[ROLE_ENV];
if (role !== undefined) {
  serveRole(JSON.parse(role) as RoleSpec).catch((error: unknown) => {
    process.stderr.write(`bench delivery worker failed: ${String(error)}\n`);
    process.exit(1);
  });
}
