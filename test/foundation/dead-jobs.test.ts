// Dead graphile-worker jobs do not pile up: a keyed deliver_due wake-up that was running when the
// next wake-up came (graphile-worker then takes its remaining attempts) and failed is dead at once;
// the scheduled purge deletes dead delivery signals at once and other dead jobs after a week.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DELIVER_TASK, wakeQuery } from '../../backend/domain/outbox/delivery-wake.js';
import { DEAD_JOB_KEEP_DAYS, purgeDeadJobs } from '../../backend/worker/dead-jobs.js';
import { startWorker } from '../../backend/worker/runner.js';
import { CRONTAB, TASKS } from '../../backend/worker/tasks/index.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { testDeps } from '../harness/app.js';
import { waitUntil } from '../delivery/support.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());

const dead = async (task: string) =>
  (
    await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM graphile_worker.jobs WHERE task_identifier = $1 AND attempts >= max_attempts AND locked_at IS NULL`,
      [task],
    )
  ).rows[0]!.n;

describe('dead jobs', () => {
  it('a running wake-up superseded by the next and then failing is dead at once; the purge deletes it', async () => {
    const deps = testDeps(db.pool);
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let runs = 0;
    const worker = await startWorker(deps, {
      crontab: '',
      pollIntervalMs: 50,
      extraTasks: {
        // The first run fails (the database failing under it, say) once the next wake-up is queued.
        [DELIVER_TASK]: async () => {
          if (runs++ === 0) {
            await released;
            throw new Error('the database failed');
          }
        },
      },
    });
    try {
      await db.pool.query(wakeQuery());
      await waitUntil(async () => runs > 0, 5000, 'the first wake-up running');
      await db.pool.query(wakeQuery());
      release();
      await waitUntil(
        async () => (await dead(DELIVER_TASK)) === 1 && runs >= 2,
        5000,
        'the first wake-up dead after one failure',
      );
    } finally {
      await worker.stop();
    }
    expect(await purgeDeadJobs(db.pool, new Date())).toEqual({ signals: 1, others: 0 });
    expect(await dead(DELIVER_TASK)).toBe(0);
  });

  it('other dead jobs are kept a week for the operator, then deleted; live jobs are never touched', async () => {
    const add = async (task: string, attempts: number, ageDays: number) => {
      const { rows } = await db.pool.query<{ id: string }>(
        `SELECT id FROM graphile_worker.add_job($1, '{}'::json, max_attempts := 3, run_at := now() + interval '1 hour')`,
        [task],
      );
      await db.pool.query(
        `UPDATE graphile_worker._private_jobs SET attempts = $2, updated_at = now() - make_interval(days => $3::int) WHERE id = $1`,
        [rows[0]!.id, attempts, ageDays],
      );
    };
    await add('telegram_action_test', 3, DEAD_JOB_KEEP_DAYS + 1);
    await add('telegram_action_test', 3, 1);
    await add('telegram_action_test', 1, DEAD_JOB_KEEP_DAYS + 30);
    await add(DELIVER_TASK, 1, 0);
    expect(await purgeDeadJobs(db.pool, new Date())).toEqual({ signals: 0, others: 1 });
    const { rows } = await db.pool.query(
      `SELECT task_identifier AS task, attempts FROM graphile_worker.jobs ORDER BY task_identifier, attempts`,
    );
    expect(rows).toEqual([
      { task: DELIVER_TASK, attempts: 1 },
      { task: 'telegram_action_test', attempts: 1 },
      { task: 'telegram_action_test', attempts: 3 },
    ]);
  });

  it('is scheduled every ten minutes on the cron', () => {
    expect(CRONTAB).toMatch(new RegExp(`^\\*/10 \\* \\* \\* \\* ${TASKS.purgeDeadJobs}\\b`, 'm'));
  });
});
