// Delivery never repeats a request the platform accepted because writing its outcome failed: a
// deadlock (PostgreSQL's 40P01) is written again at once, and any other failure is tried again
// while the lease lasts, so the sends are not claimed and posted a second time when it ends. The
// failures are PostgreSQL's own, raised by a trigger on the sends the outcome write updates.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { failureTrigger, type FailureTrigger } from '../harness/fail-trigger.js';
import {
  createConversion,
  createSiteWith,
  deliveryHarness,
  sendsOf,
  TEST_DELIVERY,
  UA,
  waitUntil,
  type DeliveryHarness,
} from './support.js';

let db: TestDatabase;
let h: DeliveryHarness;
let injected: FailureTrigger;

beforeAll(async () => {
  db = await createTestDatabase();
  h = await deliveryHarness(db.pool);
  // Only outcome writes that mark a send sent fail.
  injected = await failureTrigger(db.pool, {
    name: 'test_fail_outcome',
    on: 'BEFORE UPDATE ON sends',
    when: "OLD.status = 'pending' AND NEW.status = 'sent'",
  });
});
beforeEach(() => h.fakes.meta.reset());
afterAll(async () => {
  await h.close();
  await db.drop();
});

const failFirst = (n: number, code: string) => injected.failFirst(n, code);

async function deliveredOnce(code: string, failures: number): Promise<void> {
  const { siteId } = await createSiteWith(h.deps, ['meta']);
  await failFirst(failures, code);
  const { conversionId } = await createConversion(db.pool, siteId, {
    eventSourceUrl: 'https://shop.example.com/',
    userAgent: UA,
  });
  const [send] = await sendsOf(db.pool, 'conversion_id = $1', [conversionId]);
  await waitUntil(
    async () => (await sendsOf(db.pool, 'id = $1', [send!.id]))[0]!.status === 'sent',
    10_000,
    'the send recorded as sent',
  );
  // Past the lease (and a sweep): a send whose outcome was lost would have gone out again by now.
  await new Promise((r) => setTimeout(r, TEST_DELIVERY.leaseMs! + 500));
  const accepted = h.fakes.meta.events().filter((e) => e.event.event_id === send!.event_id);
  expect(accepted).toHaveLength(1);
  expect((await sendsOf(db.pool, 'id = $1', [send!.id]))[0]).toMatchObject({ status: 'sent', attempts: 1 });
  expect(await injected.fired()).toBeGreaterThan(failures); // the failures did happen
}

describe('outcomes the platform accepted', () => {
  it('a deadlock while writing them: written again, the platform gets the event once', async () => {
    await h.startWorker({}, 2);
    try {
      await deliveredOnce('40P01', 2);
    } finally {
      await h.stopWorker();
    }
  });

  it('another database failure while writing them: tried again within the lease, the platform gets the event once', async () => {
    await h.startWorker({}, 2);
    try {
      await deliveredOnce('XX000', 4);
    } finally {
      await h.stopWorker();
    }
  });
});
