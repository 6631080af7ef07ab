/**
 * `npm run bench -- tracker`: what the keyless tracker surface costs.
 *
 * 1. `track/init` throughput and latency at 50 concurrent clients (keep-alive), against a bare
 *    hono app whose handler parses the same JSON body and does one INSERT into `visits`: the
 *    ceiling any visit endpoint on this machine and database could reach. Capigram's handler does
 *    everything production does: validation, site look-up, domain check, and one statement for
 *    the PostgreSQL rate-limit counter, the visit upsert keyed by visitRequestId and the PageView
 *    send, then the delivery wake-up (coalesced; written only when none is waiting).
 * 2. Invite-click latency from the pool: `GET track/invite` for browsers that have a visit, each
 *    answered 302 with a pooled link claimed in one transaction (and a refill queued).
 *
 * Each server runs in its own process, on one PostgreSQL (DATABASE_URL, or an embedded one with
 * default durability settings), so the load generator does not share their event loop.
 *
 * Options: `--requests=N` (init requests per row, default 20000), `--concurrency=N` (default 50),
 * `--rounds=N` (the init rows take turns in N rounds, default 4), `--clicks=N` (default 5000),
 * `--click-concurrency=N` (default 10).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { Hono } from 'hono';
import type pg from 'pg';
import { migrate } from '../backend/db/migrate.js';
import { createPool } from '../backend/db/pool.js';
import { createApp } from '../backend/http/app.js';
import { RATE_LIMIT_ENV } from '../backend/domain/rate-limits.js';
import {
  cheapestWrite,
  createCheapestTable,
  cpuOf,
  databaseCpuMicros,
  openBenchDatabase,
  option,
  roleDeps,
  serveRoleApp,
  spawnRole,
  type RoleChild,
} from './support.js';

export const ROLE_ENV = 'CAPIGRAM_BENCH_TRACKER_ROLE';
const POOL_SIZE = 20;
const ORIGIN = 'https://shop.example.com';
const USER_AGENT = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) CapigramBench/1.0';

type Role = 'bare' | 'cheapest' | 'capigram';

/** The child side: one server per process on the bench database, its URL reported over IPC. */
async function serveRole(role: Role, databaseUrl: string): Promise<void> {
  const pool = createPool(databaseUrl, POOL_SIZE);
  let app: { fetch: (request: Request, env?: unknown) => Response | Promise<Response> };
  if (role === 'cheapest') {
    app = cheapestWrite('/backend/track/init', 200, (sql, params) => pool.query(sql, params));
  } else if (role === 'bare') {
    const bare = new Hono();
    bare.post('/backend/track/init', async (c) => {
      const b = (await c.req.json()) as Record<string, string>;
      const { rows } = await pool.query<{ id: string }>(
        `INSERT INTO visits (site_id, temp_id, session_id, visit_request_id, href, landing_page, referrer, client_ip, user_agent, fbc, fbp)
         VALUES ((SELECT id FROM sites WHERE website_id = $1), $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
        [
          b.websiteId,
          b.tempId,
          b.sessionId,
          b.visitRequestId,
          b.href,
          b.landingPage,
          b.referrer,
          c.req.header('x-capigram-client-ip'),
          b.userAgent,
          b.fbc,
          b.fbp,
        ],
      );
      return c.json({ visitId: rows[0]!.id });
    });
    app = bare;
  } else {
    // The limiter stays in the path (its counter update is part of the cost), with a budget the
    // benchmark's few client addresses cannot exhaust.
    const unlimited = Object.fromEntries(Object.values(RATE_LIMIT_ENV).map((name) => [name, '1000000']));
    const deps = roleDeps(pool, { DATABASE_URL: databaseUrl, ...unlimited });
    app = createApp(deps);
  }
  await serveRoleApp(app);
}

export interface Sample {
  requests: number;
  /** Latencies of the calls that got the expected status, in ms. */
  latencies: number[];
  failures: number;
  seconds: number;
  /** CPU the measured server process spent, in microseconds. */
  cpuMicros: number;
  /** CPU PostgreSQL spent meanwhile, in microseconds. */
  dbMicros: number;
}

export interface Result {
  requests: number;
  failures: number;
  perSecond: number;
  p50: number;
  p99: number;
  cpuMicrosPerRequest: number;
  dbMicrosPerRequest: number;
}

/** Several samples of one target as one row: rates from the summed time, percentiles over all calls. */
export function summarize(samples: Sample[]): Result {
  const latencies = samples.flatMap((s) => s.latencies).sort((x, y) => x - y);
  const sum = (f: (s: Sample) => number) => samples.reduce((acc, s) => acc + f(s), 0);
  const at = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? Number.NaN;
  return {
    requests: sum((s) => s.requests),
    failures: sum((s) => s.failures),
    perSecond: latencies.length / sum((s) => s.seconds),
    p50: at(0.5),
    p99: at(0.99),
    cpuMicrosPerRequest: sum((s) => s.cpuMicros) / sum((s) => s.requests),
    dbMicrosPerRequest: sum((s) => s.dbMicros) / sum((s) => s.requests),
  };
}

/** A measured sample: the load, and the server's CPU spent on it. */
export async function measure(
  child: RoleChild,
  total: number,
  concurrency: number,
  next: (i: number, client: number) => Call,
): Promise<Sample> {
  const before = await cpuOf(child);
  const dbBefore = databaseCpuMicros();
  const sample = await load(child.url, total, concurrency, next);
  const dbMicros = databaseCpuMicros() - dbBefore;
  return { ...sample, cpuMicros: (await cpuOf(child)) - before, dbMicros };
}

/**
 * A `track/init` as a proxy forwards it: a new visit of browser `browser` (new ids unless given),
 * from client `client`'s own address, on a landing page reached from a Meta ad.
 */
export function initCall(
  websiteId: string,
  client: number,
  browser: { tid: string; sid: string } = { tid: randomUUID(), sid: randomUUID() },
): Call {
  return {
    method: 'POST',
    path: '/backend/track/init',
    expect: 200,
    headers: {
      'content-type': 'application/json',
      origin: ORIGIN,
      'x-capigram-client-ip': `198.51.100.${client + 1}`,
    },
    body: JSON.stringify({
      websiteId,
      tempId: browser.tid,
      sessionId: browser.sid,
      visitRequestId: randomUUID(),
      href: `${ORIGIN}/landing?fbclid=IwAR2F4&utm_source=fb`,
      landingPage: '/landing?fbclid=IwAR2F4&utm_source=fb',
      referrer: 'https://l.facebook.com/',
      userAgent: USER_AGENT,
      fbc: `fb.1.${Date.now()}.IwAR2F4`,
      fbp: 'fb.1.1763776500000.1116446470',
      utmSource: 'fb',
    }),
  };
}

export interface Call {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
  expect: number;
}

/** `total` calls over `concurrency` kept-alive connections; `next(i, client)` builds call i. */
export async function load(
  url: string,
  total: number,
  concurrency: number,
  next: (i: number, client: number) => Call,
): Promise<Sample> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies: number[] = [];
  let failures = 0;
  let issued = 0;
  const one = (call: Call) =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      const req = request(
        `${url}${call.path}`,
        { agent, method: call.method, headers: call.headers },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode === call.expect) latencies.push(performance.now() - started);
            else failures += 1;
            resolve();
          });
        },
      );
      req.on('error', () => {
        failures += 1;
        resolve();
      });
      req.end(call.body);
    });
  const worker = async (client: number) => {
    while (issued < total) {
      const i = issued;
      issued += 1;
      await one(next(i, client));
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, (_, client) => worker(client)));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { requests: total, latencies, failures, seconds, cpuMicros: 0, dbMicros: 0 };
}

export interface Seed {
  websiteId: string;
  channelId: string;
}

/** A site with a Meta pixel (so every visit gets a PageView send, and the worker a wake-up) and one channel. */
export async function seed(pool: pg.Pool, pixel: boolean): Promise<Seed> {
  const one = async (sql: string, params: unknown[]) =>
    (await pool.query<{ id: string }>(sql, params)).rows[0]!.id;
  const accountId = await one(`INSERT INTO accounts (name) VALUES ('bench') RETURNING id`, []);
  const websiteId = `ws_bench_${randomBytes(6).toString('hex')}`;
  const siteId = await one(
    `INSERT INTO sites (account_id, website_id, name, domains) VALUES ($1, $2, 'Bench', '{example.com}') RETURNING id`,
    [accountId, websiteId],
  );
  const botId = await one(
    `INSERT INTO bots (account_id, telegram_bot_id, token_enc, webhook_secret_hash) VALUES ($1, 999000, 'unused', '\\x00') RETURNING id`,
    [accountId],
  );
  const channelId = await one(
    `INSERT INTO channels (site_id, bot_id, telegram_chat_id, title, public_invite_url) VALUES ($1, $2, -1001000000001, 'Main', 'https://t.me/bench') RETURNING id`,
    [siteId, botId],
  );
  await pool.query('UPDATE sites SET default_channel_id = $2 WHERE id = $1', [siteId, channelId]);
  if (pixel) {
    await pool.query(
      `INSERT INTO pixels (site_id, platform, public_config, secrets_enc) VALUES ($1, 'meta', '{"pixelId":"1234567890"}', 'unused')`,
      [siteId],
    );
  }
  return { websiteId, channelId };
}

export async function fillPool(pool: pg.Pool, channelId: string, links: number): Promise<void> {
  await pool.query(
    `INSERT INTO invitations (channel_id, invite_link, name, expires_at)
     SELECT $1, 'https://t.me/+bench' || md5(random()::text || g), 'cg-bench-' || g, now() + interval '1 day'
     FROM generate_series(1, $2) g`,
    [channelId, links],
  );
}

export async function run(args: string[] = []): Promise<void> {
  const total = option(args, 'requests', 20_000);
  const concurrency = option(args, 'concurrency', 50);
  const clicks = option(args, 'clicks', 5_000);
  const clickConcurrency = option(args, 'click-concurrency', 10);
  const rounds = option(args, 'rounds', 4);
  const warmup = Math.min(2_000, total);

  const db = await openBenchDatabase(4);
  const { databaseUrl, pool } = db;
  const children: RoleChild[] = [];
  try {
    await migrate(pool);
    await createCheapestTable(pool);
    const { websiteId, channelId } = await seed(pool, true);
    const withoutPixels = await seed(pool, false);
    const cheapest = await spawnRole(import.meta.url, ROLE_ENV, 'cheapest', [databaseUrl]);
    const bare = await spawnRole(import.meta.url, ROLE_ENV, 'bare', [databaseUrl]);
    const capigram = await spawnRole(import.meta.url, ROLE_ENV, 'capigram', [databaseUrl]);
    children.push(cheapest, bare, capigram);

    // Browsers with a visit, for the clicks: every click a different visit, as in production.
    const browsers: { tid: string; sid: string }[] = [];
    const browsersNeeded = warmup + Math.min(1_000, clicks) + clicks;
    // Each client is one browser address, as a proxy would forward it.
    const initOn =
      (site: string) =>
      (_i: number, client: number): Call => {
        const browser = { tid: randomUUID(), sid: randomUUID() };
        if (site === websiteId && browsers.length < browsersNeeded) browsers.push(browser);
        return initCall(site, client, browser);
      };

    await load(cheapest.url, warmup, concurrency, initOn(websiteId));
    await load(bare.url, warmup, concurrency, initOn(websiteId));
    await load(capigram.url, warmup, concurrency, initOn(withoutPixels.websiteId));
    browsers.length = 0;
    await load(capigram.url, warmup, concurrency, initOn(websiteId));
    // The targets take turns, so that a change in the machine's load over the run (other
    // processes, the disk) weighs on each of them alike.
    const samples: { cheapest: Sample[]; ceiling: Sample[]; plain: Sample[]; pixel: Sample[] } = {
      cheapest: [],
      ceiling: [],
      plain: [],
      pixel: [],
    };
    const share = Math.ceil(total / rounds);
    for (let r = 0; r < rounds; r++) {
      samples.cheapest.push(await measure(cheapest, share, concurrency, initOn(websiteId)));
      samples.ceiling.push(await measure(bare, share, concurrency, initOn(websiteId)));
      samples.plain.push(await measure(capigram, share, concurrency, initOn(withoutPixels.websiteId)));
      samples.pixel.push(await measure(capigram, share, concurrency, initOn(websiteId)));
    }
    const cheapestRow = summarize(samples.cheapest);
    const ceiling = summarize(samples.ceiling);
    const trackerPlain = summarize(samples.plain);
    const tracker = summarize(samples.pixel);

    const serial = Math.min(1_000, clicks);
    await fillPool(pool, channelId, clicks + serial + warmup);
    let nextBrowser = 0;
    const clickCall = (_i: number, client: number): Call => {
      const b = browsers[nextBrowser++ % browsers.length]!;
      return {
        method: 'GET',
        path: `/backend/track/invite?website=${websiteId}&tid=${b.tid}&sid=${b.sid}`,
        expect: 302,
        headers: { referer: `${ORIGIN}/landing`, 'x-capigram-client-ip': `198.51.100.${client + 1}` },
      };
    };
    await load(capigram.url, Math.min(warmup, browsers.length), clickConcurrency, clickCall);
    // One click at a time: the latency of a click itself, with no queueing behind other clicks.
    const inviteSerial = summarize([await measure(capigram, serial, 1, clickCall)]);
    const invite = summarize([await measure(capigram, clicks, clickConcurrency, clickCall)]);
    const { rows } = await pool.query<{ n: number; distinct: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT visit_id)::int AS distinct FROM invitations WHERE channel_id = $1 AND visit_id IS NOT NULL`,
      [channelId],
    );

    const row = (name: string, r: Result) =>
      `| ${name} | ${r.perSecond.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.cpuMicrosPerRequest.toFixed(0)} | ${r.dbMicrosPerRequest.toFixed(0)} | ${r.failures} |`;
    const lines = [
      `track/init: ${rounds * Math.ceil(total / rounds)} requests per row in ${rounds} alternating rounds after ${warmup} warm-up, ${concurrency} concurrent keep-alive clients, loopback, one PostgreSQL`,
      '',
      '| target | req/s | p50 ms | p99 ms | server CPU µs/req | database CPU µs/req | failed |',
      '|---|---:|---:|---:|---:|---:|---:|',
      row('cheapest write: bare hono + one INSERT (uuid, jsonb) into a table with only its key', cheapestRow),
      row('bare hono + one INSERT', ceiling),
      row('Capigram track/init, site without pixels', trackerPlain),
      row('Capigram track/init, site with a Meta pixel (PageView send)', tracker),
      '',
      `throughput, Capigram / bare ceiling: ${(tracker.perSecond / ceiling.perSecond).toFixed(2)} with a pixel, ${(trackerPlain.perSecond / ceiling.perSecond).toFixed(2)} without`,
      `throughput, Capigram / cheapest write: ${(tracker.perSecond / cheapestRow.perSecond).toFixed(2)} with a pixel, ${(trackerPlain.perSecond / cheapestRow.perSecond).toFixed(2)} without (target >= 0.5)`,
      '',
      `track/invite from the pool: ${serial} clicks one at a time, then ${clicks} clicks from ${clickConcurrency} concurrent clients, after ${Math.min(warmup, browsers.length)} warm-up; every click a different visit`,
      '',
      '| target | clicks/s | p50 ms | p99 ms | server CPU µs/click | database CPU µs/click | failed |',
      '|---|---:|---:|---:|---:|---:|---:|',
      row('Capigram track/invite (302), 1 client', inviteSerial),
      row(`Capigram track/invite (302), ${clickConcurrency} clients`, invite),
      '',
      `invite p99: ${inviteSerial.p99.toFixed(2)} ms one at a time, ${invite.p99.toFixed(2)} ms with ${clickConcurrency} clients (target <= 20 ms)`,
      `links handed out: ${rows[0]!.n}, to distinct visits: ${rows[0]!.distinct}`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    for (const child of children) child.process.kill();
    await db.close();
  }
}

const role = process.env[ROLE_ENV] as Role | undefined;
if (role !== undefined) {
  serveRole(role, process.argv[2] ?? '').catch((error: unknown) => {
    process.stderr.write(`bench role ${role} failed: ${String(error)}\n`);
    process.exit(1);
  });
}
