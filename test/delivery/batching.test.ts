// Batching (many pending sends, few requests; a lone event goes at once), isolation of the bad
// events of a batch the platform rejects as a whole, and delivery through a platform that fails
// 30% of the time.
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import {
  allSettled,
  createConversion,
  createSiteWith,
  createVisit,
  deliveryHarness,
  sendsOf,
  UA,
  waitUntil,
  type DeliveryHarness,
} from './support.js';

let db: TestDatabase;
let h: DeliveryHarness;

beforeAll(async () => {
  db = await createTestDatabase(20);
  h = await deliveryHarness(db.pool);
});
afterAll(async () => {
  await h.close();
  await db.drop();
});
beforeEach(async () => {
  await h.stopWorker();
  h.fakes.resetAll();
});

/** A Meta site and a visit whose attribution every conversion shares (a Subscribe each). */
async function metaSite(): Promise<{ siteId: string; visitId: string }> {
  const { siteId } = await createSiteWith(h.deps, ['meta']);
  const visitId = await createVisit(db.pool, siteId, {
    href: 'https://shop.example.com/',
    clientIp: '203.0.113.7',
    userAgent: UA,
  });
  return { siteId, visitId };
}

/** deliver_due jobs run so far by this file's workers (the runner counts them in a metric). */
async function deliverJobRuns(): Promise<number> {
  const { values } = await h.deps.metrics.jobs.get();
  return values.filter((v) => v.labels.task === 'deliver_due').reduce((n, v) => n + v.value, 0);
}

function metaEventIds(): string[] {
  return h.fakes.meta.events().map((e) => e.event.event_id!);
}

describe('batching', () => {
  it('300 pending conversions go out in a few requests, each event once', async () => {
    const { siteId, visitId } = await metaSite();
    const ids: string[] = [];
    for (let i = 0; i < 300; i++)
      ids.push((await createConversion(db.pool, siteId, { visitId })).conversionId);
    await h.startWorker({}, 4);
    const sends = await allSettled(db.pool);
    expect(sends.every((s) => s.status === 'sent')).toBe(true);
    // 300 wake-ups folded into one queued job, which claims them all (a sweep running beside it
    // may queue a second job that claims whatever the first had not locked yet).
    expect(h.fakes.meta.received.length).toBeLessThanOrEqual(2);
    expect(metaEventIds().sort()).toEqual(ids.map((id) => `cnv_${id}`).sort());
  });

  it('a backlog larger than a batch is drained by one job, batch after batch', async () => {
    const { siteId, visitId } = await metaSite();
    for (let i = 0; i < 35; i++) await createConversion(db.pool, siteId, { visitId });
    const before = await deliverJobRuns();
    await h.startWorker({ maxBatch: 10 }, 1);
    await allSettled(db.pool);
    await waitUntil(
      async () => (await db.pool.query(`SELECT 1 FROM graphile_worker.jobs`)).rowCount === 0,
      5000,
      'an empty queue',
    );
    expect(h.fakes.meta.received.map((r) => (r.body as { data: unknown[] }).data.length)).toEqual([
      10, 10, 10, 5,
    ]);
    // 35 sends, 35 wake-ups: one job delivered them all (plus, at most, a sweep's job that found nothing left).
    expect((await deliverJobRuns()) - before).toBeGreaterThanOrEqual(1);
    expect((await deliverJobRuns()) - before).toBeLessThanOrEqual(2);
  });

  it('a lone event is sent as soon as it is committed, without waiting for company', async () => {
    const { siteId, visitId } = await metaSite();
    await h.startWorker();
    const latencies: number[] = [];
    for (let i = 0; i < 5; i++) {
      await createConversion(db.pool, siteId, { visitId });
      const committed = performance.now();
      const log = await h.fakes.meta.waitFor((l) => l.length === i + 1);
      latencies.push(log[i]!.receivedAt - committed);
    }
    // No fixed wait: the job starts on graphile-worker's NOTIFY, not on its 100 ms poll here, and
    // goes out alone. (The best of five, so that a busy test machine does not make it flaky.)
    expect(Math.min(...latencies)).toBeLessThan(100);
    expect(h.fakes.meta.received.map((r) => (r.body as { data: unknown[] }).data.length)).toEqual([
      1, 1, 1, 1, 1,
    ]);
  });
});

describe('a whole-batch rejection (Meta: one invalid event rejects the request)', () => {
  it('isolates the bad events: exactly they fail, with the message, and the rest are delivered', async () => {
    const { siteId, visitId } = await metaSite();
    const badVisit = await createVisit(db.pool, siteId, {
      href: 'https://shop.example.com/',
      clientIp: '203.0.113.9',
      userAgent: UA,
      fbc: 'not-an-fbc',
    });
    const good: string[] = [];
    const bad: string[] = [];
    for (let i = 0; i < 32; i++) {
      const isBad = i === 5 || i === 26;
      const { conversionId } = await createConversion(db.pool, siteId, {
        visitId: isBad ? badVisit : visitId,
      });
      (isBad ? bad : good).push(conversionId);
    }
    await h.startWorker({}, 1);
    const sends = (await allSettled(db.pool)).filter(
      (s) => good.includes(s.conversion_id!) || bad.includes(s.conversion_id!),
    );
    expect(sends).toHaveLength(32);
    const failed = sends.filter((s) => s.status === 'failed');
    expect(failed.map((s) => s.conversion_id).sort()).toEqual(bad.sort());
    for (const f of failed) {
      expect(f.last_error).toMatch(
        /^Invalid parameter: data\[0\]\.user_data\.fbc must look like fb\.1\.<creation time in ms>\.<fbclid> \(code 100\)/,
      );
    }
    expect(
      sends
        .filter((s) => s.status === 'sent')
        .map((s) => s.conversion_id)
        .sort(),
    ).toEqual(good.sort());
    expect(metaEventIds().sort()).toEqual(good.map((id) => `cnv_${id}`).sort());
    // Bisecting 32 events around two bad ones: far fewer requests than one per event.
    expect(h.fakes.meta.received.length).toBeGreaterThan(1);
    expect(h.fakes.meta.received.length).toBeLessThanOrEqual(21);
  });
});

describe('fault tolerance', () => {
  it('Meta failing 30% of requests (500, 429, timeouts): 1,000 conversions, 1,000 distinct event ids delivered, none failed', async () => {
    h.fakes.meta.failRate(
      0.3,
      [{ type: 'status', status: 500 }, { type: 'rateLimit', retryAfterSec: 1 }, { type: 'timeout' }],
      7,
    );
    const { siteId, visitId } = await metaSite();
    await h.startWorker({}, 4);
    const ids: string[] = [];
    // Arrivals spread over time (four concurrent writers) while the worker delivers, as in
    // production: many batches of varied sizes, each exposed to the failures.
    await Promise.all(
      [0, 1, 2, 3].map(async () => {
        for (let i = 0; i < 250; i++)
          ids.push((await createConversion(db.pool, siteId, { visitId })).conversionId);
      }),
    );
    await allSettled(db.pool, 40_000);
    const sends = await sendsOf(db.pool, 'conversion_id = ANY($1::uuid[])', [ids]);
    expect(sends).toHaveLength(1000);
    expect(sends.filter((s) => s.status !== 'sent')).toEqual([]);
    const stats = h.fakes.meta.dedupStats();
    expect(stats.distinct).toBe(1000);
    expect(new Set(metaEventIds())).toEqual(new Set(ids.map((id) => `cnv_${id}`)));
    const injected = h.fakes.meta.received.filter((r) => r.injected).map((r) => r.injected);
    expect(new Set(injected)).toEqual(new Set(['status', 'rateLimit', 'timeout']));
    const conversions = await db.pool.query(
      `SELECT capi_status, count(*)::int AS n FROM conversions WHERE site_id = $1 GROUP BY 1`,
      [siteId],
    );
    expect(conversions.rows).toEqual([{ capi_status: 'sent', n: 1000 }]);
    expect(sends.filter((s) => s.attempts > 1).length).toBeGreaterThan(0);
  }, 60_000);
});
