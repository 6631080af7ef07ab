// Delivery never repeats a request the platform accepted because writing its outcome failed: a
// deadlock (PostgreSQL's 40P01) is written again at once, and any other failure is tried again
// while the lease lasts, so the sends are not claimed and posted a second time when it ends. The
// failures are PostgreSQL's own, raised by a trigger on the sends the outcome write updates.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { createConversion, createSiteWith, deliveryHarness, sendsOf, TEST_DELIVERY, UA, waitUntil, type DeliveryHarness } from './support.js';

let db: TestDatabase;
let h: DeliveryHarness;

beforeAll(async () => {
  db = await createTestDatabase();
  h = await deliveryHarness(db.pool);
  // The first `$limit` outcome writes that mark a send sent fail with `$code`. A sequence, since
  // it is not rolled back with the failing transaction.
  await db.pool.query(`
    CREATE SEQUENCE test_outcome_failures;
    CREATE TABLE test_outcome_failure (fail_first int NOT NULL, code text NOT NULL);
    INSERT INTO test_outcome_failure VALUES (0, '40P01');
    CREATE FUNCTION test_fail_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE f test_outcome_failure;
    BEGIN
      SELECT * INTO f FROM test_outcome_failure;
      IF nextval('test_outcome_failures') <= f.fail_first THEN
        RAISE EXCEPTION 'injected outcome failure' USING ERRCODE = f.code;
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER test_fail_outcome BEFORE UPDATE ON sends FOR EACH ROW
      WHEN (OLD.status = 'pending' AND NEW.status = 'sent') EXECUTE FUNCTION test_fail_outcome();`);
});
beforeEach(() => h.fakes.meta.reset());
afterAll(async () => {
  await h.close();
  await db.drop();
});

async function failFirst(n: number, code: string): Promise<void> {
  await db.pool.query(`SELECT setval('test_outcome_failures', 1, false)`);
  await db.pool.query('UPDATE test_outcome_failure SET fail_first = $1, code = $2', [n, code]);
}

async function deliveredOnce(code: string, failures: number): Promise<void> {
  const { siteId } = await createSiteWith(h.deps, ['meta']);
  await failFirst(failures, code);
  const { conversionId } = await createConversion(db.pool, siteId, { eventSourceUrl: 'https://shop.example.com/', userAgent: UA });
  const [send] = await sendsOf(db.pool, 'conversion_id = $1', [conversionId]);
  await waitUntil(async () => (await sendsOf(db.pool, 'id = $1', [send!.id]))[0]!.status === 'sent', 10_000, 'the send recorded as sent');
  // Past the lease (and a sweep): a send whose outcome was lost would have gone out again by now.
  await new Promise((r) => setTimeout(r, TEST_DELIVERY.leaseMs! + 500));
  const accepted = h.fakes.meta.events().filter((e) => e.event.event_id === send!.event_id);
  expect(accepted).toHaveLength(1);
  expect((await sendsOf(db.pool, 'id = $1', [send!.id]))[0]).toMatchObject({ status: 'sent', attempts: 1 });
  const { rows } = await db.pool.query<{ n: string }>(`SELECT last_value::text AS n FROM test_outcome_failures`);
  expect(Number(rows[0]!.n)).toBeGreaterThan(failures); // the failures did happen
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
