// Business events and delivery on the same conversions at once: shared event transactions (many
// leads' events in one) update pending conversions while the real worker writes the outcomes of
// their sends, with platforms failing four requests in five so that the conversions stay pending
// and their sends keep coming back. PostgreSQL must report no deadlock (pg_stat_database counts
// them per database), no event may get a 5xx, every conversion reaches each platform exactly once
// per event id, and no dead deliver_due job may be left behind.
// `LOCK_ORDER_LOAD_SECONDS=10 npx vitest run test/delivery/lock-order.test.ts` measures longer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../../backend/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { apiClient, attributedJoin, count, newUser, seedTenant, type Tenant } from '../api/support.js';
import { deliveryHarness, waitUntil, type DeliveryHarness } from './support.js';

/** Seconds of load; `LOCK_ORDER_LOAD_SECONDS` raises it for a measurement. */
const LOAD_MS = Number(process.env.LOCK_ORDER_LOAD_SECONDS ?? 4) * 1000;
const LEADS = 48;
const EVENT_TYPES = ['Purchase', 'Lead', 'Contact', 'CompleteRegistration', 'Subscribe'];

let db: TestDatabase;
let apiPool: Pool;
let workerPool: Pool;
let h: DeliveryHarness;
let t: TestApp;
let tenant: Tenant;

async function deadlocks(): Promise<number> {
  // Statistics are flushed by each backend on its own schedule (and at its exit): read a fresh snapshot.
  const { rows } = await db.pool.query<{ n: string }>(
    'SELECT deadlocks::text AS n FROM pg_stat_database WHERE datname = current_database()',
  );
  return Number(rows[0]!.n);
}

beforeAll(async () => {
  db = await createTestDatabase(4);
  // A deadlock is found after deadlock_timeout: short here, so that one costs the test little time
  // (the connections below are opened after this and take it).
  const { rows } = await db.pool.query<{ d: string }>('SELECT current_database() AS d');
  await db.pool.query(`ALTER DATABASE "${rows[0]!.d}" SET deadlock_timeout = '50ms'`);
  apiPool = createPool(db.url, 12);
  workerPool = createPool(db.url, 12);
  h = await deliveryHarness(workerPool);
  t = await startTestApp(apiPool, { env: { ...h.fakes.env } });
  tenant = await seedTenant(apiPool, t.deps.box, { platforms: ['meta', 'tiktok'] });
});
let stopped = false;
afterAll(async () => {
  if (!stopped) {
    await t?.stop();
    await h?.stopWorker();
    await apiPool?.end().catch(() => undefined);
    await workerPool?.end().catch(() => undefined);
  }
  await h?.fakes.closeAll();
  await db?.drop();
});

describe('lock order between business events and delivery', () => {
  it('shared event transactions and outcome writes on the same conversions: no deadlock, no 5xx, each event id accepted once', async () => {
    const api = apiClient(t.url);
    const users = Array.from({ length: LEADS }, () => newUser());
    for (const u of users)
      await attributedJoin(apiPool, {
        siteId: tenant.site.siteId,
        channelId: tenant.site.channels.main,
        telegramUserId: u,
      });
    const before = await deadlocks();

    for (const fake of [h.fakes.meta, h.fakes.tiktok]) {
      fake.latencyMs = 5;
      fake.failRate(0.8, [{ type: 'status', status: 500 }]);
    }
    // Retries 50 ms apart at first, then up to 400 ms: the conversions stay pending through the load.
    // The request timeout and lease are roomy, unlike the other delivery tests': on a machine at a
    // load average of 10 and more a 5 ms answer can reach the worker after 400 ms, or its outcome
    // be written after a 3 s lease ended, and the retry that follows sends again under the same
    // event id, which a platform deduplicates but this test would count as accepted twice. Neither
    // is what this test is about (the crash and lease tests cover them); lock order is.
    await h.startWorker(
      { backoffScale: 0.05, maxDelayMs: 8000, maxAttempts: 1000, requestTimeoutMs: 5000, leaseMs: 30_000 },
      4,
    );

    const statuses = new Map<number, number>();
    const conversions = new Set<string>();
    let locking = 0;
    const end = Date.now() + LOAD_MS;
    // At least two event types' rounds, however slow the machine, so that the load reaches the
    // second type (new conversions while the first type's are still being delivered).
    for (let round = 0; Date.now() < end || round < 8; round++) {
      // Every lead at once (so that their events share transactions). Four rounds of one event type:
      // the first creates each lead's conversion, the next three match it while it is pending, so
      // the shared transaction locks those conversions while delivery writes them.
      const eventType = EVENT_TYPES[Math.floor(round / 4) % EVENT_TYPES.length]!;
      const answers = await Promise.all(
        users.map((u) =>
          api.post(
            '/events/conversion',
            { telegramUserId: u, eventType, value: round + 1, currency: 'USD' },
            { key: tenant.accountKey },
          ),
        ),
      );
      for (const a of answers) {
        statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
        if (a.status < 300) conversions.add(a.body.conversionId as string);
        // Matched a pending conversion, so it locked it (then updated it, or found a send on its way).
        if (a.body.updatedExisting === true || /being sent right now/.test(String(a.body.warning))) locking++;
      }
    }

    // The platforms recover: everything left goes out.
    for (const fake of [h.fakes.meta, h.fakes.tiktok]) fake.failRate(0, []);
    await waitUntil(
      async () => (await count(apiPool, `sends WHERE status = 'pending'`)) === 0,
      20_000,
      'every send delivered',
    );
    await h.stopWorker();
    // Exiting backends flush their statistics: close every connection that ran the load.
    await t.stop();
    await apiPool.end();
    await workerPool.end();
    stopped = true;
    await new Promise((r) => setTimeout(r, 300));
    await db.pool.query('SELECT pg_stat_clear_snapshot()');
    const after = await deadlocks();

    const dead = await count(db.pool, `graphile_worker.jobs WHERE attempts >= max_attempts`);
    // The figures a measurement run reports.
    console.info(
      JSON.stringify({
        loadMs: LOAD_MS,
        deadlocks: after - before,
        locking,
        conversions: conversions.size,
        statuses: Object.fromEntries(statuses),
        meta: h.fakes.meta.dedupStats(),
        tiktok: h.fakes.tiktok.dedupStats(),
        deadJobs: dead,
      }),
    );
    expect([...statuses.keys()].filter((s) => s >= 500)).toEqual([]);
    // The load did what it is for: events updated pending conversions, in shared transactions.
    expect(locking).toBeGreaterThan(LEADS);
    expect(after - before).toBe(0);
    for (const fake of [h.fakes.meta, h.fakes.tiktok])
      expect(fake.dedupStats()).toMatchObject({ duplicates: 0 });
    expect(h.fakes.meta.dedupStats().distinct).toBe(conversions.size);
    expect(h.fakes.tiktok.dedupStats().distinct).toBe(conversions.size);
    expect(conversions.size).toBeGreaterThan(LEADS);
    expect(dead).toBe(0);
  }, 60_000);
});
