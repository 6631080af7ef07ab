/**
 * `npm run bench -- api`: what `POST /api/v1/events/conversion` costs.
 *
 * Three rows at 50 concurrent keep-alive clients, one PostgreSQL:
 * 1. the ceiling: a bare hono app whose handler parses the JSON body and does one INSERT into
 *    `conversions`, nothing else;
 * 2. Capigram without `Idempotency-Key`: key check, validation, the lead's acquisition and history
 *    on the site, the per-lead lock and recent-match look-up, the lead upsert, the conversion and
 *    one send per pixel, all in one transaction, then the delivery wake-up (events that arrive
 *    while others are in flight share look-ups and transactions: db/transaction-batch.ts);
 * 3. the same with a fresh `Idempotency-Key` per request (claimed with its stored answer in the
 *    event's transaction).
 *
 * Every request is for a warm lead (a join attributed to a visit, seeded beforehand) with an
 * account-scoped key and no site named, as a payment provider's webhook handler sends it: the site,
 * channel and visit come from the acquisition. A different lead each time, so every request creates
 * a conversion rather than reusing a recent match. The site has one Meta pixel; no worker runs, so
 * the queued sends stay queued. Each server runs in its own process so that the load generator
 * does not share its event loop. The rows run interleaved in rounds, so that a machine busy with
 * something else slows all three alike and the ratio stays meaningful.
 *
 * Options: `--requests=N` (per row, default 10000), `--concurrency=N` (default 50), `--rounds=N`
 * (default 5).
 */
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import { Hono } from 'hono';
import type pg from 'pg';
import { migrate } from '../backend/db/migrate.js';
import { createPool } from '../backend/db/pool.js';
import { createAccount } from '../backend/domain/admin/accounts.js';
import { createApiKey } from '../backend/domain/admin/api-keys.js';
import { createSite } from '../backend/domain/admin/sites.js';
import { createApp } from '../backend/http/app.js';
import {
  cheapestWrite,
  createCheapestTable,
  openBenchDatabase,
  option,
  roleDeps,
  RoundRow,
  serveRoleApp,
  spawnRole,
  type Batch,
  type RoleChild,
} from './support.js';

const ROLE_ENV = 'CAPIGRAM_BENCH_API_ROLE';
const POOL_SIZE = 20;
export const FIRST_USER = 900_000_000;

type Role = 'bare' | 'cheapest' | 'capigram';

/** The child side: one server per process on the bench database, its URL reported over IPC. */
async function serveRole(role: Role, databaseUrl: string): Promise<void> {
  const pool = createPool(databaseUrl, POOL_SIZE);
  let app: { fetch: (request: Request, env?: unknown) => Response | Promise<Response> };
  if (role === 'cheapest') {
    app = cheapestWrite('/api/v1/events/conversion', 201, (sql, params) => pool.query(sql, params));
  } else if (role === 'bare') {
    const bare = new Hono();
    bare.post('/api/v1/events/conversion', async (c) => {
      const b = (await c.req.json()) as {
        telegramUserId: number;
        eventType: string;
        value: number;
        currency: string;
        siteId: string;
      };
      const { rows } = await pool.query<{ id: string }>(
        `INSERT INTO conversions (site_id, telegram_user_id, event_type, value, currency, event_time, attributed_at, source)
         VALUES ($1, $2, $3, $4, $5, now(), now(), 'api') RETURNING id`,
        [b.siteId, b.telegramUserId, b.eventType, b.value, b.currency],
      );
      return c.json({ conversionId: rows[0]!.id }, 201);
    });
    app = bare;
  } else {
    const deps = roleDeps(pool, { DATABASE_URL: databaseUrl });
    app = createApp(deps);
  }
  await serveRoleApp(app);
}

interface Call {
  headers: Record<string, string>;
  body: string;
}

/** `total` POSTs over `concurrency` kept-alive connections; `next(i)` builds call i; 201 is success. */
async function load(
  url: string,
  total: number,
  concurrency: number,
  next: (i: number) => Call,
): Promise<Batch> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies: number[] = [];
  let failures = 0;
  let issued = 0;
  const one = (call: Call) =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      const req = request(
        `${url}/api/v1/events/conversion`,
        { agent, method: 'POST', headers: call.headers },
        (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode === 201) latencies.push(performance.now() - started);
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
  const client = async () => {
    while (issued < total) {
      const i = issued;
      issued += 1;
      await one(next(i));
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, client));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return { latencies, failures, seconds };
}

/** One row of the table: its batches from every round, with the server's and the database's CPU. */
class Row extends RoundRow {
  constructor(
    readonly name: string,
    child: RoleChild,
    next: () => Call,
  ) {
    super(child, (total, concurrency) => load(child.url, total, concurrency, next), true);
  }

  line(): string {
    return `| ${this.name} | ${this.perSecond.toFixed(0)} | ${this.latency(0.5).toFixed(2)} | ${this.latency(0.99).toFixed(2)} | ${this.cpuPerRequest.toFixed(0)} | ${this.databasePerRequest.toFixed(0)} | ${this.failures} |`;
  }
}

/**
 * A site with one channel and a Meta pixel, an account API key, and `leads` warm leads: each an
 * attributed join with its lead row, as the webhook leaves them.
 */
export async function seed(pool: pg.Pool, leads: number): Promise<{ siteId: string; apiKey: string }> {
  const { accountId } = await createAccount(pool, { name: 'bench' });
  const { siteId } = await createSite(pool, { accountId, name: 'Bench', domains: ['shop.example.com'] });
  const one = async (sql: string, params: unknown[]) =>
    (await pool.query<{ id: string }>(sql, params)).rows[0]!.id;
  const botId = await one(
    `INSERT INTO bots (account_id, telegram_bot_id, token_enc, webhook_secret_hash) VALUES ($1, 999001, 'unused', '\\x00') RETURNING id`,
    [accountId],
  );
  const channelId = await one(
    `INSERT INTO channels (site_id, bot_id, telegram_chat_id, title) VALUES ($1, $2, -1001000000002, 'Main') RETURNING id`,
    [siteId, botId],
  );
  await pool.query(
    `INSERT INTO pixels (site_id, platform, public_config, secrets_enc) VALUES ($1, 'meta', '{"pixelId":"1234567890"}', 'unused')`,
    [siteId],
  );
  await pool.query(
    `WITH src AS MATERIALIZED (SELECT g, gen_random_uuid() AS vid, gen_random_uuid() AS iid, gen_random_uuid() AS lid FROM generate_series(1, $3::int) g),
     v AS (INSERT INTO visits (id, site_id, temp_id, session_id, href, client_ip, user_agent, fbc, fbp)
           SELECT vid, $1, gen_random_uuid(), gen_random_uuid(), 'https://shop.example.com/l?fbclid=IwAR' || g, '198.51.100.' || (g % 250 + 1),
                  'Mozilla/5.0 (iPhone) CapigramBench/1.0', 'fb.1.1763776500000.IwAR' || g, 'fb.1.1763776500000.' || g FROM src),
     i AS (INSERT INTO invitations (id, channel_id, invite_link, visit_id, assigned_at, used_at, used_by)
           SELECT iid, $2, 'https://t.me/+bench' || g, vid, now(), now(), $4::bigint + g FROM src),
     l AS (INSERT INTO leads (id, site_id, telegram_user_id, first_seen_at, last_seen_at)
           SELECT lid, $1, $4::bigint + g, now(), now() FROM src)
     INSERT INTO memberships (channel_id, telegram_user_id, lead_id, kind, invitation_id, visit_id, attributed, occurred_at)
     SELECT $2, $4::bigint + g, lid, 'join', iid, vid, true, now() FROM src`,
    [siteId, channelId, leads, FIRST_USER],
  );
  await pool.query('ANALYZE');
  const { apiKey } = await createApiKey(pool, { accountId, name: 'bench' });
  return { siteId, apiKey };
}

export async function run(args: string[] = []): Promise<void> {
  const total = option(args, 'requests', 10_000);
  const concurrency = option(args, 'concurrency', 50);
  const rounds = option(args, 'rounds', 5);
  const perRound = Math.ceil(total / rounds);
  const warmup = Math.min(1_000, total);

  const db = await openBenchDatabase(4);
  const { databaseUrl, pool } = db;
  const children: RoleChild[] = [];
  try {
    await migrate(pool);
    await createCheapestTable(pool);
    const leads = warmup + 2 * perRound * rounds;
    const { siteId, apiKey } = await seed(pool, leads);
    const cheapest = await spawnRole(import.meta.url, ROLE_ENV, 'cheapest', [databaseUrl]);
    const bare = await spawnRole(import.meta.url, ROLE_ENV, 'bare', [databaseUrl]);
    const capigram = await spawnRole(import.meta.url, ROLE_ENV, 'capigram', [databaseUrl]);
    children.push(cheapest, bare, capigram);

    let nextLead = 0;
    let nextBare = 0;
    const call = (
      telegramUserId: number,
      extra: Record<string, unknown>,
      headers: Record<string, string> = {},
    ): Call => ({
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${apiKey}`,
        'x-capigram-client-ip': '203.0.113.10',
        ...headers,
      },
      body: JSON.stringify({
        telegramUserId,
        eventType: 'Purchase',
        value: 49.9,
        currency: 'USD',
        pii: { email: 'buyer@example.com' },
        ...extra,
      }),
    });
    // The bare handler needs the site for its INSERT; Capigram finds it from the lead's acquisition.
    const bareEvent = () => call(FIRST_USER - 1 - nextBare++, { siteId });
    const event = () => call(FIRST_USER + 1 + nextLead++, {});
    const keyed = () =>
      call(FIRST_USER + 1 + nextLead++, {}, { 'idempotency-key': `bench-${randomBytes(8).toString('hex')}` });

    const rows = [
      new Row(
        'cheapest write: bare hono + one INSERT (uuid, jsonb) into a table with only its key',
        cheapest,
        bareEvent,
      ),
      new Row('bare hono + one INSERT', bare, bareEvent),
      new Row('Capigram, no Idempotency-Key', capigram, event),
      new Row('Capigram, Idempotency-Key', capigram, keyed),
    ];
    await load(cheapest.url, warmup, concurrency, bareEvent);
    await load(bare.url, warmup, concurrency, bareEvent);
    await load(capigram.url, warmup, concurrency, event);
    // The seed analyzed the tables before any conversion existed: plans kept from then (the
    // foreign-key check of every send against `conversions` among them) would scan the table as
    // the run fills it, until autovacuum's next ANALYZE, a minute or so into the run. Production
    // runs with tables analyzed as they are; so does the benchmark, from here on.
    await pool.query('ANALYZE');
    for (let round = 0; round < rounds; round++)
      for (const row of rows) await row.batch(perRound, concurrency);
    const [cheapestRow, ceiling, plain, idempotent] = rows as [Row, Row, Row, Row];
    const created = await pool.query<{ conversions: number; sends: number }>(
      `SELECT count(*)::int AS conversions, (SELECT count(*)::int FROM sends WHERE conversion_id IS NOT NULL) AS sends
       FROM conversions WHERE source = 'api' AND visit_id IS NOT NULL`,
    );

    const lines = [
      `POST /api/v1/events/conversion: ${perRound * rounds} requests per row in ${rounds} interleaved rounds after ${warmup} warm-up, ${concurrency} concurrent keep-alive clients, a different warm lead per request, loopback, one PostgreSQL`,
      '',
      '| target | req/s | p50 ms | p99 ms | server CPU µs/req | database CPU µs/req | failed |',
      '|---|---:|---:|---:|---:|---:|---:|',
      ...rows.map((r) => r.line()),
      '',
      `throughput / bare ceiling: ${(plain.perSecond / ceiling.perSecond).toFixed(2)} without key, ${(idempotent.perSecond / ceiling.perSecond).toFixed(2)} with key`,
      `throughput / cheapest write: ${(plain.perSecond / cheapestRow.perSecond).toFixed(2)} without key, ${(idempotent.perSecond / cheapestRow.perSecond).toFixed(2)} with key (targets >= 0.4 and >= 0.35)`,
      `warm conversions created: ${created.rows[0]!.conversions} (expected ${warmup + 2 * perRound * rounds}), their sends queued: ${created.rows[0]!.sends}`,
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    for (const child of children) child.process.kill();
    await db.close();
  }
}

const role = process.env[ROLE_ENV] as Role | undefined;
if (role !== undefined) {
  serveRole(role, process.argv[2]!).catch((err: unknown) => {
    process.stderr.write(`bench api ${role} server failed: ${String(err)}\n`);
    process.exit(1);
  });
}
