// The wake-up that follows a producer's commit: one queued deliver_due job, written only when none
// is waiting, and a fresh one when the waiting one is already being run.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DELIVER_TASK, DeliveryWaker, wakeDeliveryNow } from '../../backend/domain/outbox/delivery-wake.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

let db: TestDatabase;
let waker: DeliveryWaker;

beforeAll(async () => {
  db = await createTestDatabase();
  waker = new DeliveryWaker(db.pool);
});
afterAll(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.pool.query('DELETE FROM graphile_worker._private_jobs');
});

interface WakeJob {
  key: string | null;
  locked: boolean;
  revision: number;
  due: boolean;
}

async function wakeJobs(): Promise<WakeJob[]> {
  const { rows } = await db.pool.query<WakeJob>(
    `SELECT j.key, j.locked_at IS NOT NULL AS locked, j.revision, j.run_at <= now() AS due
     FROM graphile_worker._private_jobs j JOIN graphile_worker._private_tasks t ON t.id = j.task_id
     WHERE t.identifier = $1 ORDER BY j.id`,
    [DELIVER_TASK],
  );
  return rows;
}

describe('wakeDelivery', () => {
  it('queues one keyed job, due now', async () => {
    await wakeDeliveryNow(db.pool);
    expect(await wakeJobs()).toEqual([{ key: DELIVER_TASK, locked: false, revision: 0, due: true }]);
  });

  it('writes nothing while a wake-up is waiting: a burst of wake-ups leaves the one job untouched', async () => {
    await wakeDeliveryNow(db.pool);
    for (let i = 0; i < 100; i++) waker.wake();
    await wakeDeliveryNow(db.pool);
    await new Promise((r) => setTimeout(r, 100));
    // revision counts add_job's updates of a keyed job: still 0, so none was written.
    expect(await wakeJobs()).toEqual([{ key: DELIVER_TASK, locked: false, revision: 0, due: true }]);
  });

  it('adds a new job when the waiting one is already running (it may have claimed before our commit)', async () => {
    await wakeDeliveryNow(db.pool);
    await db.pool.query(`UPDATE graphile_worker._private_jobs SET locked_at = now(), locked_by = 'a-worker'`);
    await wakeDeliveryNow(db.pool);
    const jobs = await wakeJobs();
    expect(jobs).toHaveLength(2);
    // graphile-worker clears the running job's key, so the new one holds it.
    expect(jobs.map((j) => [j.key, j.locked])).toEqual([
      [null, true],
      [DELIVER_TASK, false],
    ]);
  });

  it('a wake-up job that used up its attempts (the database failing for hours) does not silence later wake-ups', async () => {
    await wakeDeliveryNow(db.pool);
    await db.pool.query(
      `UPDATE graphile_worker._private_jobs SET attempts = max_attempts, last_error = 'database down'`,
    );
    await wakeDeliveryNow(db.pool);
    const { rows } = await db.pool.query<{ attempts: number; due: boolean }>(
      `SELECT attempts, run_at <= now() AS due FROM graphile_worker.jobs WHERE key = $1`,
      [DELIVER_TASK],
    );
    // add_job's upsert resets the keyed job: it will run again.
    expect(rows).toEqual([{ attempts: 0, due: true }]);
  });

  it('a burst of fire-and-forget wake-ups ends with a job queued', async () => {
    for (let i = 0; i < 50; i++) waker.wake();
    await expect.poll(async () => (await wakeJobs()).length).toBe(1);
  });
});
