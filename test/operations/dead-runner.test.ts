// No job waits for a dead runner: a worker process SIGKILLed while its `telegram_send_welcome`
// job is at Telegram leaves the job locked (graphile-worker alone would keep it for four hours);
// another worker process, already running, sees that the dead runner stopped beating and
// releases the job, and the bot's answer to /start goes out within a minute of the kill.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { addBot } from '../../backend/domain/admin/bots.js';
import { addEntry } from '../../backend/domain/admin/entries.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { enqueueWelcome, SEND_WELCOME_TASK } from '../../backend/domain/entries/welcome.js';
import { beat, releaseDeadWorkers } from '../../backend/worker/heartbeat.js';
import { DEFAULT_BOT, startFakes, type Fakes } from '../fakes/index.js';
import { testDeps, TEST_SECRET_KEY } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { spawnService, type ServiceProcess } from '../harness/process.js';

let db: TestDatabase;
let fakes: Fakes;
const dataDir = mkdtempSync(join(tmpdir(), 'capigram-dead-runner-'));
const running: ServiceProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase(4);
  fakes = await startFakes();
});
afterAll(async () => {
  for (const p of running) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  await fakes.closeAll();
  await db.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function startWorkerProcess(): Promise<ServiceProcess> {
  const p = spawnService('backend/worker-main.ts', {
    ...fakes.env,
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    SECRET_KEY: TEST_SECRET_KEY.toString('hex'),
  });
  running.push(p);
  await p.waitFor(/Capigram worker running/, 30_000);
  return p;
}

const sendsTo = (chatId: number) =>
  fakes.telegram.received.filter(
    (r) => r.path.endsWith('/sendMessage') && (r.body as { chat_id?: number })?.chat_id === chatId,
  );

async function lockedWelcomeJobs(): Promise<{ locked_by: string | null }[]> {
  const { rows } = await db.pool.query<{ locked_by: string | null }>(
    `SELECT j.locked_by FROM graphile_worker._private_jobs j JOIN graphile_worker._private_tasks t ON t.id = j.task_id
     WHERE t.identifier = $1`,
    [SEND_WELCOME_TASK],
  );
  return rows;
}

it('a SIGKILLed worker’s welcome message is sent within a minute by another worker', async () => {
  const deps = testDeps(db.pool, { ...fakes.env });
  const { accountId } = await createAccount(db.pool, { name: 'Runners' });
  const site = await createSite(db.pool, { accountId, name: 'Shop', domains: ['shop.example.com'] });
  const { botId } = await addBot(deps, { accountId, token: DEFAULT_BOT.token });
  const { entryId } = await addEntry(db.pool, { siteId: site.siteId, botId, welcomeText: 'Welcome!' });

  // The first worker alone takes the job; Telegram holds its answer, so the job is at Telegram
  // (locked by that worker) when the worker is killed.
  const first = await startWorkerProcess();
  fakes.telegram.latencyMs = 60_000;
  const chatId = 777_400_001;
  // The user opened the bot (/start): Telegram lets the bot write to them.
  fakes.telegram.startCommand({ user: { id: chatId } });
  await enqueueWelcome(db.pool, { botId, chatId, entryId, visitId: null }, 'dead-runner-1');
  await fakes.telegram.waitFor(() => sendsTo(chatId).length === 1, 20_000);
  first.child.kill('SIGKILL');
  await first.exit();
  const killedAt = Date.now();
  fakes.telegram.latencyMs = 0;
  const [held] = await lockedWelcomeJobs();
  expect(held?.locked_by).not.toBeNull();
  // Another worker: it finds the job locked by a runner that no longer beats.
  const second = await startWorkerProcess();

  await fakes.telegram.waitFor(() => sendsTo(chatId).length === 2, 60_000);
  const recoveredMs = Date.now() - killedAt;
  process.stdout.write(
    `dead runner: the welcome went out ${(recoveredMs / 1000).toFixed(1)} s after the kill\n`,
  );
  expect(recoveredMs).toBeLessThan(60_000);
  // Done: the job is gone (graphile-worker deletes a job that succeeded), and nothing stays locked.
  await expect
    .poll(async () => (await lockedWelcomeJobs()).length, { timeout: 10_000, interval: 200 })
    .toBe(0);
  const { rows } = await db.pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM graphile_worker._private_jobs WHERE locked_by IS NOT NULL AND locked_at < now() - interval '40 seconds'",
  );
  expect(rows[0]!.n).toBe(0);

  second.child.kill('SIGTERM');
  expect(await second.exit()).toBe(0);
}, 150_000);

it('the sweep releases only ids that stopped beating: never a live runner’s job, an unknown id after its grace', async () => {
  const lockAs = async (worker: string, lockedSecondsAgo: number): Promise<string> => {
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT id::text FROM graphile_worker.add_job('sweep_probe', '{}'::json, max_attempts := 1)`,
    );
    await db.pool.query(
      `UPDATE graphile_worker._private_jobs SET locked_by = $2, locked_at = now() - $3::int * interval '1 second' WHERE id = $1::bigint`,
      [rows[0]!.id, worker, lockedSecondsAgo],
    );
    return rows[0]!.id;
  };
  await beat(db.pool, ['live']);
  await db.pool.query(
    `INSERT INTO worker_heartbeats (worker_id, beat_at) VALUES ('silent', now() - interval '40 seconds')`,
  );
  const jobs = {
    live: await lockAs('live', 3600),
    silent: await lockAs('silent', 60),
    silentJustLocked: await lockAs('silent', 5),
    neverBeatRecent: await lockAs('old-release', 60),
    neverBeatLong: await lockAs('old-release-2', 600),
  };
  const released = await releaseDeadWorkers(db.pool);
  expect(released.sort()).toEqual(['old-release-2', 'silent']);
  const { rows } = await db.pool.query<{ id: string; locked_by: string | null }>(
    'SELECT id::text, locked_by FROM graphile_worker._private_jobs WHERE id = ANY($1::bigint[])',
    [Object.values(jobs)],
  );
  const lockedBy = Object.fromEntries(rows.map((r) => [r.id, r.locked_by]));
  expect(lockedBy[jobs.live]).toBe('live');
  expect(lockedBy[jobs.neverBeatRecent]).toBe('old-release');
  // Every job of a dead id goes, the one it locked a moment ago too (its runner is gone all the same).
  expect(lockedBy[jobs.silent]).toBeNull();
  expect(lockedBy[jobs.silentJustLocked]).toBeNull();
  expect(lockedBy[jobs.neverBeatLong]).toBeNull();
  await db.pool.query('DELETE FROM graphile_worker._private_jobs WHERE id = ANY($1::bigint[])', [
    Object.values(jobs),
  ]);
});
