// A graphile-worker runner stopped by a PostgreSQL restart, on purpose: jobs (a task of the
// test's that takes 400 ms) are running when PostgreSQL stops, so they end while it is away,
// which is what makes graphile-worker shut its runner down (backend/worker/runner.ts). The
// supervisor then restarts it in place (`npm start`) or reports it ended (`npm run worker`,
// which exits 1 on that); either way the jobs the dead runner held are released, not left
// locked for four hours, and /readyz of the process says delivery is stalled meanwhile.
//
// And the delivery job itself across such a restart: the platform's answer to a request in
// flight is written once the database is back, so the events are not sent a second time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkDelivery } from '../../backend/delivery/stall.js';
import { createPool, type Pool } from '../../backend/db/pool.js';
import { superviseWorker, type SupervisedWorker } from '../../backend/worker/supervisor.js';
import { deliveryTasks } from '../../backend/worker/tasks/deliver.js';
import { testDeps } from '../harness/app.js';
import { startFakes } from '../fakes/index.js';
import { startOwnPostgres, type OwnPostgres } from '../harness/own-postgres.js';
import {
  allSettled,
  createConversion,
  createSiteWith,
  createVisit,
  TEST_DELIVERY,
  UA,
  waitUntil,
} from './support.js';

let pg: OwnPostgres;
let pool: Pool;
let supervised: SupervisedWorker | null = null;
let ran = 0;

beforeAll(async () => {
  pg = await startOwnPostgres('runner-supervision');
  pool = createPool(pg.url, 10);
});
afterAll(async () => {
  // Bounded, so that PostgreSQL is stopped (and no server left behind) even if a failed test left
  // a runner that cannot stop.
  await Promise.race([supervised?.stop(), new Promise((r) => setTimeout(r, 10_000))]);
  await pg?.close();
  await pool?.end().catch(() => undefined);
});

const SLOW = {
  slow_test_task: async () => {
    await new Promise((r) => setTimeout(r, 400));
    ran++;
  },
};

async function addJobs(n: number): Promise<void> {
  for (let i = 0; i < n; i++)
    await pool.query(`SELECT graphile_worker.add_job('slow_test_task', '{}'::json)`);
}

async function jobs(): Promise<{ total: number; locked: number }> {
  const { rows } = await pool.query<{ total: number; locked: number }>(
    `SELECT count(*)::int AS total, count(*) FILTER (WHERE locked_at IS NOT NULL)::int AS locked FROM graphile_worker.jobs WHERE task_identifier = 'slow_test_task'`,
  );
  return rows[0]!;
}

/** Starts jobs, stops PostgreSQL while they run, and starts it again 1 s later. */
async function restartUnderJobs(): Promise<void> {
  await addJobs(6);
  await waitUntil(async () => (await jobs()).locked > 0, 10_000, 'jobs to be running');
  await pg.stop();
  await new Promise((r) => setTimeout(r, 1000));
  await pg.start();
}

describe('a runner stopped by a PostgreSQL restart', () => {
  it('inline (`npm start`): restarted in place; its jobs released and run; /readyz stalled until then', async () => {
    const deps = testDeps(pool);
    ran = 0;
    supervised = await superviseWorker(deps, {
      onUnexpectedStop: 'restart',
      worker: { crontab: '', pollIntervalMs: 100, concurrency: 4, extraTasks: SLOW },
      restartDelayMs: { min: 200, max: 1000 },
    });
    const withWorker = { ...deps, worker: supervised };
    expect(supervised.running()).toBe(true);
    expect((await checkDelivery(withWorker)).delivery).toBe('ok');

    await addJobs(6);
    await waitUntil(async () => (await jobs()).locked > 0, 10_000, 'jobs to be running');
    await pg.stop();
    // The jobs end while PostgreSQL is away: graphile-worker stops the runner.
    await waitUntil(async () => !supervised!.running(), 5_000, 'the runner to stop');
    await pg.start();
    // Back: the process reports the stall until the runner is restarted (it may be already).
    const check = await checkDelivery(withWorker);
    if (!supervised.running()) expect(check).toMatchObject({ delivery: 'stalled', workerRunning: false });
    await waitUntil(async () => supervised!.running(), 10_000, 'the runner to be restarted');
    expect((await checkDelivery(withWorker)).delivery).toBe('ok');

    // Jobs the dead runner held are released and run again, and new jobs run.
    await addJobs(4);
    await waitUntil(async () => (await jobs()).total === 0, 15_000, 'every job to be done');
    expect(ran).toBeGreaterThanOrEqual(10);
    await supervised.stop();
    supervised = null;
  }, 60_000);

  it('`npm run worker`: `ended` says why (the process then exits 1); its jobs are released for the next process', async () => {
    const deps = testDeps(pool);
    supervised = await superviseWorker(deps, {
      onUnexpectedStop: 'exit',
      worker: { crontab: '', pollIntervalMs: 100, concurrency: 4, extraTasks: SLOW },
    });
    const ended = supervised.ended;
    await restartUnderJobs();
    expect(await ended).toMatch(/completeJobs|failJobs|worker/i);
    expect(supervised.running()).toBe(false);
    // Released before `ended` resolved (PostgreSQL answered within the 10 s it waits for).
    expect((await jobs()).locked).toBe(0);
    await supervised.stop();
    supervised = null;
  }, 60_000);
});

describe('the delivery job across a PostgreSQL restart', () => {
  it('writes what the platform answered once the database is back: nothing is sent twice', async () => {
    const fakes = await startFakes({ meta: { latencyMs: 300 } });
    const deps = testDeps(pool, { ...fakes.env });
    // As `npm start` runs it: supervised (another job may still end while the database is away).
    const runner = await superviseWorker(deps, {
      onUnexpectedStop: 'restart',
      // A lease longer than the outage: the sends stay this job's until it can write their outcome.
      worker: {
        crontab: '',
        pollIntervalMs: 100,
        extraTasks: deliveryTasks(deps, { ...TEST_DELIVERY, requestTimeoutMs: 2000, leaseMs: 10_000 }),
      },
      restartDelayMs: { min: 200, max: 1000 },
    });
    try {
      const { siteId } = await createSiteWith(deps, ['meta']);
      const visitId = await createVisit(pool, siteId, {
        href: 'https://shop.example.com/',
        clientIp: '203.0.113.7',
        userAgent: UA,
      });
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push((await createConversion(pool, siteId, { visitId })).conversionId);
      // The request is at the platform (its answer takes 300 ms) when PostgreSQL stops.
      await fakes.meta.waitFor((log) => log.length >= 1, 10_000);
      await pg.stop();
      await new Promise((r) => setTimeout(r, 1000));
      await pg.start();
      const sends = (await allSettled(pool, 20_000)).filter((s) => ids.includes(s.conversion_id!));
      expect(sends.map((s) => s.status)).toEqual(ids.map(() => 'sent'));
      expect(new Set(fakes.meta.events().map((e) => e.event.event_id))).toEqual(
        new Set(ids.map((id) => `cnv_${id}`)),
      );
      // Each event reached the platform once: the answer was not lost to the restart.
      expect(fakes.meta.dedupStats().duplicates).toBe(0);
    } finally {
      await runner.stop();
      await fakes.closeAll();
    }
  }, 60_000);
});
