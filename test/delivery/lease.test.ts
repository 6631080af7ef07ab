// A claim's lease while its sends are still being delivered. Isolating bad events takes several
// requests; before each one that could outlast the lease, the run extends it. Sends whose lease
// another worker took meanwhile (the first one's ran out) are dropped from the run, never sent a
// second time by it.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { deliveryOptions } from '../../backend/delivery/options.js';
import { deliverDue } from '../../backend/delivery/pipeline.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import {
  createConversion,
  createSiteWith,
  createVisit,
  deliveryHarness,
  sendsOf,
  TEST_DELIVERY,
  UA,
  type DeliveryHarness,
} from './support.js';

let db: TestDatabase;
let h: DeliveryHarness;

beforeAll(async () => {
  db = await createTestDatabase();
  h = await deliveryHarness(db.pool);
});
beforeEach(() => h.fakes.meta.reset());
afterAll(async () => {
  await h.close();
  await db.drop();
});

// With a 400 ms request timeout and the run's 500 ms margin, a 1 s lease must be extended before
// any request that starts more than 100 ms after the claim.
const OPTIONS = deliveryOptions({ ...TEST_DELIVERY, leaseMs: 1000 });

/** Two Meta conversions on a fresh site, one with an fbc Meta refuses: their batch is rejected whole, then split. */
async function goodAndBad(): Promise<{ good: string; bad: string }> {
  const { siteId } = await createSiteWith(h.deps, ['meta']);
  const visit = (fbc?: string) =>
    createVisit(db.pool, siteId, {
      href: 'https://shop.example.com/',
      clientIp: '203.0.113.7',
      userAgent: UA,
      fbc,
    });
  const good = (await createConversion(db.pool, siteId, { visitId: await visit() })).conversionId;
  const bad = (await createConversion(db.pool, siteId, { visitId: await visit('not-an-fbc') })).conversionId;
  return { good, bad };
}

const leaseOf = async (conversionIds: string[]): Promise<number[]> =>
  (
    await db.pool.query<{ lease: Date }>(
      `SELECT next_attempt_at AS lease FROM sends WHERE conversion_id = ANY($1::uuid[]) AND status = 'pending' ORDER BY id`,
      [conversionIds],
    )
  ).rows.map((r) => r.lease.getTime());

describe('the delivery lease', () => {
  it('is extended while a whole-batch rejection is isolated, and the isolation finishes', async () => {
    const { good, bad } = await goodAndBad();
    h.fakes.meta.latencyMs = 300;
    const run = deliverDue(h.deps, OPTIONS);

    await h.fakes.meta.waitFor((log) => log.length === 1);
    const first = await leaseOf([good, bad]);
    await h.fakes.meta.waitFor((log) => log.length === 2);
    const second = await leaseOf([good, bad]);
    await run;

    // Still reserved for this run, now until later than the claim first said.
    expect(first).toHaveLength(2);
    expect(second).toHaveLength(2);
    for (const [i, lease] of second.entries()) expect(lease).toBeGreaterThan(first[i]!);
    const status = Object.fromEntries(
      (await sendsOf(db.pool, 'conversion_id = ANY($1::uuid[])', [[good, bad]])).map((s) => [
        s.conversion_id,
        s.status,
      ]),
    );
    expect(status).toEqual({ [good]: 'sent', [bad]: 'failed' });
    expect(h.fakes.meta.received).toHaveLength(3);
    expect(h.fakes.meta.events().map((e) => e.event.event_id)).toEqual([`cnv_${good}`]);
  });

  it('drops the sends another worker took over: nothing more is sent or written by this run', async () => {
    const { good, bad } = await goodAndBad();
    h.fakes.meta.latencyMs = 300;
    const run = deliverDue(h.deps, OPTIONS);

    // While the first request is out, the lease "runs out" and another worker claims both sends.
    await h.fakes.meta.waitFor((log) => log.length === 1);
    const { rows } = await db.pool.query<{ lease: Date }>(
      `UPDATE sends SET next_attempt_at = now() + interval '10 minutes' WHERE conversion_id = ANY($1::uuid[]) RETURNING next_attempt_at AS lease`,
      [[good, bad]],
    );
    const theirs = rows.map((r) => r.lease.getTime());
    await run;

    // The whole-batch rejection wrote nothing, and the halves were never sent by this run: each
    // send still shows the one attempt its claim counted, and the other worker's lease.
    expect(h.fakes.meta.received).toHaveLength(1);
    const sends = await sendsOf(db.pool, 'conversion_id = ANY($1::uuid[])', [[good, bad]]);
    expect(sends.map((s) => [s.status, s.attempts, s.last_error])).toEqual([
      ['pending', 1, null],
      ['pending', 1, null],
    ]);
    expect((await leaseOf([good, bad])).sort()).toEqual(theirs.sort());
  });
});
