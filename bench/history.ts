/**
 * `npm run bench -- history`: what a year of history costs the write paths.
 *
 * Two databases on one PostgreSQL: one empty, one holding a busy site's year (`history-seed.ts`:
 * `--visits` visits, a tenth as many leads with a join each, a fifth as many conversions, as many
 * sends as visits, every raw field filled). Each gets the same benchmark sites (a site with a Meta
 * pixel and its invite pool, a site with warm leads and an account API key) and its own Capigram
 * server process (production's app, rate limits out of reach). The targets then take turns, empty
 * and history alternating within every round, so that whatever else the machine does weighs on
 * both alike and the ratio between them is the figure:
 *
 * - `POST /backend/track/init` at 50 concurrent clients, site with a Meta pixel (visit + PageView send);
 * - `POST /api/v1/events/conversion` at 50 clients, a different warm lead per request, without and
 *   with an Idempotency-Key;
 * - `GET /backend/track/invite`, every click a different visit taking a link from the pool, one
 *   client and 10 clients.
 *
 * Both databases share the server's shared_buffers, as every site of one deployment does: the
 * history's indexes compete for the cache with the empty database's.
 *
 * Options: `--visits=N` (default 10000000), `--requests=N` (per target and database, default
 * 12000), `--rounds=N` (default 4), `--clicks=N` (per database, default 3000), `--concurrency=N`
 * (default 50), `--click-concurrency=N` (default 10).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { migrate } from '../backend/db/migrate.js';
import type { Pool } from '../backend/db/pool.js';
import { FIRST_USER, seed as seedLeads } from './api.js';
import { seedHistory } from './history-seed.js';
import { openBenchDatabase, option, spawnRole, type RoleChild } from './support.js';
import {
  fillPool,
  initCall,
  load,
  measure,
  ROLE_ENV,
  seed as seedSite,
  summarize,
  type Call,
  type Result,
  type Sample,
} from './tracker.js';

const ORIGIN = 'https://shop.example.com';

type Target = 'init' | 'event' | 'keyed' | 'invite1' | 'invite';
const TARGETS: Record<Target, string> = {
  init: 'track/init, site with a Meta pixel',
  event: 'events/conversion, no Idempotency-Key',
  keyed: 'events/conversion, Idempotency-Key',
  invite1: 'track/invite (302), 1 client',
  invite: 'track/invite (302), 10 clients',
};

/** One database with its benchmark sites and its server. */
interface Side {
  name: 'empty' | 'history';
  pool: Pool;
  server: RoleChild;
  websiteId: string;
  channelId: string;
  apiKey: string;
  nextLead: number;
  browsers: { tid: string; sid: string }[];
  nextBrowser: number;
  samples: Record<Target, Sample[]>;
}

async function prepare(
  name: Side['name'],
  pool: Pool,
  databaseUrl: string,
  leads: number,
  links: number,
): Promise<Side> {
  const { websiteId, channelId } = await seedSite(pool, true);
  const { apiKey } = await seedLeads(pool, leads);
  await fillPool(pool, channelId, links);
  await pool.query('VACUUM ANALYZE');
  const server = await spawnRole(new URL('./tracker.ts', import.meta.url).href, ROLE_ENV, 'capigram', [
    databaseUrl,
  ]);
  const samples = { init: [], event: [], keyed: [], invite1: [], invite: [] };
  return {
    name,
    pool,
    server,
    websiteId,
    channelId,
    apiKey,
    nextLead: 0,
    browsers: [],
    nextBrowser: 0,
    samples,
  };
}

/** A new visit of a new browser, kept for the clicks. */
function visitCall(side: Side, client: number): Call {
  const browser = { tid: randomUUID(), sid: randomUUID() };
  side.browsers.push(browser);
  return initCall(side.websiteId, client, browser);
}

function eventCall(side: Side, keyed: boolean): Call {
  side.nextLead += 1;
  return {
    method: 'POST',
    path: '/api/v1/events/conversion',
    expect: 201,
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${side.apiKey}`,
      'x-capigram-client-ip': '203.0.113.10',
      ...(keyed ? { 'idempotency-key': `bench-${randomBytes(8).toString('hex')}` } : {}),
    },
    body: JSON.stringify({
      telegramUserId: FIRST_USER + side.nextLead,
      eventType: 'Purchase',
      value: 49.9,
      currency: 'USD',
      pii: { email: 'buyer@example.com' },
    }),
  };
}

function clickCall(side: Side, client: number): Call {
  const b = side.browsers[side.nextBrowser++ % side.browsers.length]!;
  return {
    method: 'GET',
    path: `/backend/track/invite?website=${side.websiteId}&tid=${b.tid}&sid=${b.sid}`,
    expect: 302,
    headers: { referer: `${ORIGIN}/landing`, 'x-capigram-client-ip': `198.51.100.${client + 1}` },
  };
}

export async function run(args: string[] = []): Promise<void> {
  const visits = option(args, 'visits', 10_000_000);
  const total = option(args, 'requests', 12_000);
  const rounds = option(args, 'rounds', 4);
  const clicks = option(args, 'clicks', 3_000);
  const concurrency = option(args, 'concurrency', 50);
  const clickConcurrency = option(args, 'click-concurrency', 10);
  const share = Math.ceil(total / rounds);
  const clickShare = Math.ceil(clicks / rounds);
  const warmup = Math.min(2_000, share);
  const leads = 3 * warmup + 2 * share * rounds;

  const db = await openBenchDatabase(4);
  const sides: Side[] = [];
  try {
    const full = await db.sibling(4);
    await migrate(db.pool);
    await migrate(full.pool);
    const h = await seedHistory(full.pool, {
      visits,
      log: (line) => process.stderr.write(`${line}\n`),
    });
    const size = await full.pool.query<{ size: string }>(
      'SELECT pg_size_pretty(pg_database_size(current_database())) AS size',
    );
    await full.pool.query('CHECKPOINT');
    sides.push(await prepare('empty', db.pool, db.databaseUrl, leads, clicks + warmup));
    sides.push(await prepare('history', full.pool, full.databaseUrl, leads, clicks + warmup));

    for (const side of sides) {
      await load(side.server.url, warmup, concurrency, (_i, client) => visitCall(side, client));
      await load(side.server.url, warmup, concurrency, () => eventCall(side, false));
      await load(side.server.url, warmup, concurrency, () => eventCall(side, true));
      await load(side.server.url, Math.min(warmup, clicks), clickConcurrency, (_i, client) =>
        clickCall(side, client),
      );
    }
    // Plans the servers made while the benchmark's own tables were empty would scan them as they
    // fill (see api.ts): analyze them as autovacuum soon would in production.
    for (const side of sides) await side.pool.query('ANALYZE');
    for (let r = 0; r < rounds; r++) {
      // Which database goes first alternates too.
      const order = r % 2 === 0 ? sides : [...sides].reverse();
      for (const side of order) {
        const s = side.samples;
        s.init.push(await measure(side.server, share, concurrency, (_i, client) => visitCall(side, client)));
        s.event.push(await measure(side.server, share, concurrency, () => eventCall(side, false)));
        s.keyed.push(await measure(side.server, share, concurrency, () => eventCall(side, true)));
        s.invite1.push(await measure(side.server, clickShare, 1, (_i, client) => clickCall(side, client)));
        s.invite.push(
          await measure(side.server, clickShare, clickConcurrency, (_i, client) => clickCall(side, client)),
        );
      }
    }

    const [empty, history] = sides.map((side) =>
      Object.fromEntries(Object.entries(side.samples).map(([k, v]) => [k, summarize(v)])),
    ) as [Record<Target, Result>, Record<Target, Result>];
    // A PostgreSQL process that ends during a sample (an autovacuum worker) takes its CPU ticks
    // with it, which can leave a sample's reading negative: no reading then.
    const dbCpu = (r: Result) => (r.dbMicrosPerRequest >= 0 ? r.dbMicrosPerRequest.toFixed(0) : 'n/a');
    const row = (target: Target, name: string, r: Result) =>
      `| ${TARGETS[target]}, ${name} | ${r.perSecond.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.cpuMicrosPerRequest.toFixed(0)} | ${dbCpu(r)} | ${r.failures} |`;
    const ratio = (t: Target) => (history[t].perSecond / empty[t].perSecond).toFixed(2);
    const p99 = (t: Target) => (history[t].p99 / empty[t].p99).toFixed(2);
    const lines = [
      `history: ${h.rows.visits} visits, ${h.rows.leads} leads, ${h.rows.conversions} conversions, ${h.rows.sends} sends over a year, seeded in ${h.seconds.toFixed(0)} s; database ${size.rows[0]!.size}`,
      `${share * rounds} requests per target and database (${clickShare * rounds} clicks) in ${rounds} rounds, empty and history alternating, ${concurrency} concurrent keep-alive clients`,
      '',
      '| target | req/s | p50 ms | p99 ms | server CPU µs/req | database CPU µs/req | failed |',
      '|---|---:|---:|---:|---:|---:|---:|',
      ...(Object.keys(TARGETS) as Target[]).flatMap((t) => [
        row(t, 'empty', empty[t]),
        row(t, 'history', history[t]),
      ]),
      '',
      `throughput with history / empty: track/init ${ratio('init')}, events/conversion ${ratio('event')} without key, ${ratio('keyed')} with key (targets >= 0.9)`,
      `invite p99 with history / empty: ${p99('invite1')} one client, ${p99('invite')} with ${clickConcurrency} (target <= 1.2)`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    for (const side of sides) side.server.process.kill();
    await db.close();
  }
}
