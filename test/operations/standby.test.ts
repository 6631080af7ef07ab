// A PostgreSQL primary with a streaming standby (PostgreSQL 15, `pg_basebackup -R`), the service
// reaching the primary through a repointable address (a TCP forwarder, what a managed database's
// DNS name or pg_auto_failover's address is). One pair serves three checks, in order:
// - reports read from the standby when REPORTS_DATABASE_URL names it;
// - a `pg_dump -Fc` of the populated database restored with `pg_restore` into a fresh database
//   serves the same leads and the same funnel as the original;
// - a failover: the primary crashes (immediate stop) under a stream of business API conversions,
//   the standby is promoted and the address repointed; every conversion answered 2xx is on the new
//   primary once and reaches the platform, none is doubled, and the times until the API and the
//   deliveries are back are printed (docs/production.md quotes them).
import { serve, type ServerType } from '@hono/node-server';
import { execFileSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox } from '../../backend/crypto/secret-box.js';
import { createPool, type Pool } from '../../backend/db/pool.js';
import { createApp } from '../../backend/http/app.js';
import { openRuntime, type Runtime } from '../../backend/runtime.js';
import { startFakes, type Fakes } from '../fakes/index.js';
import { TEST_ADMIN_TOKEN, TEST_SECRET_KEY } from '../harness/app.js';
import { startForwarder, type Forwarder } from '../harness/forwarder.js';
import { startStandbyPair, type StandbyPair } from '../harness/pg-standby.js';
import { spawnService, type ServiceProcess } from '../harness/process.js';
import { scratchDir } from '../harness/scratch.js';
import { apiClient, attributedJoin, newUser, seedTenant, type Tenant } from '../api/support.js';

const DB = 'capigram';
let pair: StandbyPair;
let address: Forwarder;
let fakes: Fakes;
let primary: Pool;
let standby: Pool;
const box = createSecretBox(TEST_SECRET_KEY);

/** The URL of `db` on the server behind the repointable address. */
function viaAddress(db = DB): string {
  return `postgres://postgres@127.0.0.1:${address.port}/${db}`;
}

function env(extra: Record<string, string>): Record<string, string> {
  return {
    ...fakes.env,
    DATA_DIR: scratchDir('standby-data'),
    SECRET_KEY: TEST_SECRET_KEY.toString('hex'),
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...extra,
  };
}

/** A runtime built from `env` as `npm start` builds it, serving HTTP on a loopback port. */
async function serveRuntime(
  e: Record<string, string>,
): Promise<{ rt: Runtime; url: string; close(): Promise<void> }> {
  const rt = await openRuntime({ env: env(e), poolSize: 6 });
  const app = createApp(rt.deps);
  const server: ServerType = await new Promise((ok) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => ok(s));
  });
  const addr = server.address();
  const url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  return {
    rt,
    url,
    async close() {
      await new Promise<void>((ok) => {
        server.close(() => ok());
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
      await rt.close();
    },
  };
}

async function until(probe: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await probe())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until the standby has replayed everything the primary has written so far. */
async function caughtUp(): Promise<void> {
  const { rows } = await primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
  await until(
    async () =>
      (
        await standby.query<{ ok: boolean }>('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [
          rows[0]!.lsn,
        ])
      ).rows[0]!.ok,
    10_000,
    'the standby to catch up',
  );
}

let tenant: Tenant;
const leads: number[] = [];
const today = new Date().toISOString().slice(0, 10);

beforeAll(async () => {
  pair = await startStandbyPair('standby');
  await pair.primary.tool('createdb', [DB]);
  address = await startForwarder({ port: pair.primary.port });
  fakes = await startFakes();
  primary = createPool(pair.primary.url(DB), 2);
  standby = createPool(pair.standby.url(DB), 2);
}, 60_000);

afterAll(async () => {
  await primary?.end().catch(() => undefined);
  await standby?.end().catch(() => undefined);
  await address?.close();
  await fakes?.closeAll();
  await pair?.close();
});

describe('a primary with a streaming standby', () => {
  it('reports read from REPORTS_DATABASE_URL: the standby, not the primary', async () => {
    const web = await serveRuntime({
      DATABASE_URL: viaAddress(),
      REPORTS_DATABASE_URL: pair.standby.url(DB),
    });
    try {
      expect(web.rt.deps.reportsPool).toBeDefined();
      tenant = await seedTenant(primary, box, { platforms: ['meta'] });
      const api = apiClient(web.url);
      for (let i = 0; i < 6; i++) {
        const user = newUser();
        await attributedJoin(primary, {
          siteId: tenant.site.siteId,
          channelId: tenant.site.channels.main,
          telegramUserId: user,
        });
        leads.push(user);
        const res = await api.post(
          '/events/conversion',
          { telegramUserId: user, eventType: 'Purchase', value: 20 + i, currency: 'EUR' },
          { key: tenant.site.siteKey, idempotencyKey: `replica-${user}` },
        );
        expect(res.status).toBe(201);
      }
      const funnel = () =>
        api.get(`/reports/funnel?siteId=${tenant.site.siteId}&from=${today}&to=${today}&groupBy=day`, {
          key: tenant.site.siteKey,
        });
      await caughtUp();
      const before = await funnel();
      expect(before.status).toBe(200);
      expect(before.body.totals.attributedJoins).toBe(6);

      // With the standby's replay paused, a join written to the primary is not in the report yet:
      // the report was read from the standby. Once replay resumes, it is.
      await standby.query('SELECT pg_wal_replay_pause()');
      await attributedJoin(primary, {
        siteId: tenant.site.siteId,
        channelId: tenant.site.channels.main,
        telegramUserId: newUser(),
      });
      expect((await funnel()).body.totals.attributedJoins).toBe(6);
      await standby.query('SELECT pg_wal_replay_resume()');
      await caughtUp();
      expect((await funnel()).body.totals.attributedJoins).toBe(7);
      // The API's writes went to the primary all along (the standby refuses writes).
      expect((await standby.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r')).rows[0]!.r).toBe(true);
    } finally {
      await web.close();
    }
  }, 60_000);

  it('a pg_dump -Fc restored with pg_restore into a fresh database serves the same leads and funnel', async () => {
    // Where the server's user may write (the client programs run as that user).
    const dump = `${pair.dir}/capigram.dump`;
    await pair.primary.tool('pg_dump', ['-Fc', '-f', dump, DB]);
    await pair.primary.tool('createdb', ['capigram_restored']);
    await pair.primary.tool('pg_restore', ['--no-owner', '--exit-on-error', '-d', 'capigram_restored', dump]);

    const original = await serveRuntime({ DATABASE_URL: viaAddress() });
    const restored = await serveRuntime({ DATABASE_URL: viaAddress('capigram_restored') });
    try {
      const read = async (url: string) => {
        const api = apiClient(url);
        const o = { key: tenant.site.siteKey };
        const leadsRead = [];
        for (const user of leads) leadsRead.push(await api.get(`/leads/${user}`, o));
        const funnel = await api.get(
          `/reports/funnel?siteId=${tenant.site.siteId}&from=${today}&to=${today}&groupBy=day`,
          o,
        );
        return { leads: leadsRead.map((r) => [r.status, r.body]), funnel: [funnel.status, funnel.body] };
      };
      const before = await read(original.url);
      const after = await read(restored.url);
      expect(before.leads.every(([status]) => status === 200)).toBe(true);
      expect((before.funnel[1] as { totals: { attributedJoins: number } }).totals.attributedJoins).toBe(7);
      expect(after).toEqual(before);
      // The restored database takes writes (its sequences and keys came along): a new conversion.
      const res = await apiClient(restored.url).post(
        '/events/conversion',
        { telegramUserId: leads[0], eventType: 'Lead' },
        { key: tenant.site.siteKey, idempotencyKey: `restored-${leads[0]}` },
      );
      expect(res.status).toBe(201);
    } finally {
      await original.close();
      await restored.close();
    }
  }, 60_000);

  it("TLS to the database from the URL's sslmode and sslrootcert, as node-postgres reads them", async () => {
    const at = (query: string) => `postgres://postgres@localhost:${pair.primary.port}/${DB}?${query}`;
    const encrypted = async (url: string) => {
      const rt = await openRuntime({ env: env({ DATABASE_URL: url }), poolSize: 1 });
      try {
        const { rows } = await rt.deps.pool.query<{ ssl: boolean }>(
          'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()',
        );
        return rows[0]!.ssl;
      } finally {
        await rt.close();
      }
    };
    // verify-full with the server's CA: encrypted, the certificate checked.
    expect(await encrypted(at(`sslmode=verify-full&sslrootcert=${pair.caFile}`))).toBe(true);
    // The same with a CA that did not sign it: refused at start, never a plain connection.
    const otherCa = `${pair.dir}/other-ca.pem`;
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=Another CA',
        '-keyout',
        `${pair.dir}/other-ca.key`,
        '-out',
        otherCa,
      ],
      { stdio: 'ignore' },
    );
    await expect(encrypted(at(`sslmode=verify-full&sslrootcert=${otherCa}`))).rejects.toThrow(/certificate/);
    // require checks the certificate too in node-postgres (unlike libpq): Node's CAs do not know ours.
    await expect(encrypted(at('sslmode=require'))).rejects.toThrow(/certificate/);
    expect(await encrypted(at('sslmode=no-verify'))).toBe(true);
    expect(await encrypted(at('sslmode=disable'))).toBe(false);
  }, 60_000);

  it('a failover under load: nothing answered 2xx lost or doubled, API and deliveries back', async () => {
    // Synchronous replication: a commit is answered once the standby has it, so a crash of the
    // primary cannot take back what was answered (docs/production.md says why this matters).
    await primary.query(`ALTER SYSTEM SET synchronous_standby_names = '*'`);
    await primary.query('SELECT pg_reload_conf()');
    await until(
      async () =>
        (await primary.query(`SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync'`)).rowCount === 1,
      10_000,
      'the standby to be synchronous',
    );
    const users: number[] = [];
    for (let i = 0; i < 100; i++) {
      const user = newUser();
      await attributedJoin(primary, {
        siteId: tenant.site.siteId,
        channelId: tenant.site.channels.main,
        telegramUserId: user,
      });
      users.push(user);
    }
    fakes.resetAll();
    // `npm start` as an operator runs it: the web tier and the inline worker, on the address.
    const app: ServiceProcess = spawnService('backend/main.ts', {
      ...env({
        DATABASE_URL: viaAddress(),
        HOST: '127.0.0.1',
        PORT: '0',
        LOG_LEVEL: 'warn',
        WORKER: 'inline',
      }),
    });
    try {
      const [, url] = await app.waitFor(/Capigram listening on (http:\/\/\S+)/, 45_000);
      const api = apiClient(url!);
      const accepted = new Map<number, string>();
      const refused: unknown[] = [];
      let crashedAt = 0;
      let apiBackAt = 0;
      let next = 0;
      const client = async () => {
        while (next < users.length) {
          const user = users[next++]!;
          for (;;) {
            const sentAt = performance.now();
            const res = await api
              .post(
                '/events/conversion',
                { telegramUserId: user, eventType: 'Lead' },
                { key: tenant.site.siteKey, idempotencyKey: `failover-${user}` },
              )
              .catch(() => null);
            if (res && res.status >= 200 && res.status < 300) {
              accepted.set(user, res.body.conversionId as string);
              // Back: the first answer to a request sent after the primary was gone.
              if (crashedAt > 0 && sentAt >= crashedAt && apiBackAt === 0) apiBackAt = performance.now();
              break;
            }
            if (res && res.status !== 503) refused.push([res.status, res.body]);
            await new Promise((r) => setTimeout(r, 100));
          }
          await new Promise((r) => setTimeout(r, 20));
        }
      };
      const posting = Promise.all([client(), client(), client(), client()]);

      // Crash the primary a third of the way through the stream (with deliveries under way), so
      // that two thirds are posted against the failover.
      await until(async () => accepted.size >= users.length / 3, 30_000, 'a third of the conversions');
      await pair.primary.stop('immediate');
      crashedAt = performance.now();
      const deliveredAtCrash = new Set(fakes.meta.events().map((e) => e.event.event_id)).size;
      // What a failover manager does: promote the standby, move the address.
      await pair.standby.promote();
      address.repoint(pair.standby.port);
      const promotedAt = performance.now();
      let deliveriesBackAt = 0;
      await until(
        async () => new Set(fakes.meta.events().map((e) => e.event.event_id)).size > deliveredAtCrash,
        60_000,
        'a delivery after the failover',
      );
      deliveriesBackAt = performance.now();
      await posting;

      expect(refused).toEqual([]);
      expect(accepted.size).toBe(users.length);
      const promoted = createPool(pair.standby.url(DB), 2);
      try {
        const { rows } = await promoted.query<{ id: string; telegram_user_id: number }>(
          `SELECT c.id, c.telegram_user_id FROM conversions c WHERE c.site_id = $1 AND c.telegram_user_id = ANY($2::bigint[]) AND c.event_type = 'Lead'`,
          [tenant.site.siteId, users],
        );
        const lost = [...accepted.values()].filter((id) => !rows.some((r) => r.id === id)).length;
        const doubled = rows.length - new Set(rows.map((r) => r.telegram_user_id)).size;
        // Every accepted conversion reaches the platform by its event id, each once.
        const { rows: sends } = await promoted.query<{ event_id: string }>(
          `SELECT event_id FROM sends WHERE conversion_id = ANY($1::uuid[])`,
          [[...accepted.values()]],
        );
        const expected = new Set(sends.map((s) => s.event_id));
        await until(
          async () => {
            const got = new Set(fakes.meta.events().map((e) => e.event.event_id));
            return [...expected].every((id) => got.has(id));
          },
          60_000,
          'every accepted conversion to reach the platform',
        );
        const drainedAt = performance.now();
        const { rows: siteSends } = await promoted.query<{ event_id: string }>(
          `SELECT s.event_id FROM sends s JOIN pixels p ON p.id = s.pixel_id WHERE p.site_id = $1`,
          [tenant.site.siteId],
        );
        const siteEvents = new Set(siteSends.map((s) => s.event_id));
        const got = new Set(fakes.meta.events().map((e) => e.event.event_id));
        const figures = {
          conversions: users.length,
          answered2xx: accepted.size,
          lost,
          doubled,
          // Events under an id none of the site's sends has: a conversion counted twice.
          strayEvents: [...got].filter((id) => id === undefined || !siteEvents.has(id)).length,
          apiBackMs: Math.round(apiBackAt - crashedAt),
          promotionMs: Math.round(promotedAt - crashedAt),
          deliveriesBackMs: Math.round(deliveriesBackAt - crashedAt),
          drainedMs: Math.round(drainedAt - crashedAt),
        };
        console.log(`Failover figures: ${JSON.stringify(figures)}`);
        expect(lost).toBe(0);
        expect(doubled).toBe(0);
        expect(rows).toHaveLength(users.length);
        expect(expected.size).toBe(users.length);
        expect(figures.strayEvents).toBe(0);
        expect(apiBackAt).toBeGreaterThan(crashedAt);
      } finally {
        await promoted.end();
      }
    } finally {
      app.child.kill('SIGTERM');
      const timer = setTimeout(() => app.child.kill('SIGKILL'), 10_000);
      await app.exit();
      clearTimeout(timer);
    }
  }, 120_000);
});
