// A worker killed with SIGKILL while the operator's backend has not yet answered a forward loses
// nothing: the restarted worker sends that update again (at least once), then the next one of the
// same user, in order.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { addBot } from '../../backend/domain/admin/bots.js';
import { startTestApp, TEST_SECRET_KEY, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { spawnService, type ServiceProcess } from '../harness/process.js';
import { DEFAULT_BOT, startFakes, type Fakes } from '../fakes/index.js';
import { startOperatorBackend, type OperatorBackend } from './operator-backend.js';
import { eventually } from './world.js';

let db: TestDatabase;
let fakes: Fakes;
let app: TestApp;
let op: OperatorBackend;
const dataDir = mkdtempSync(join(tmpdir(), 'capigram-forward-restart-'));
const running: ServiceProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  fakes = await startFakes({ telegram: { bots: [DEFAULT_BOT] } });
  app = await startTestApp(db.pool, { worker: false, env: { ...fakes.env } });
  op = await startOperatorBackend();
});
afterAll(async () => {
  for (const p of running) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  await app.stop();
  await op.close();
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
  await p.waitFor(/Capigram worker running/);
  return p;
}

const message = (updateId: number, text: string) => ({
  update_id: updateId,
  message: {
    message_id: updateId,
    from: { id: 555_001, is_bot: false, first_name: 'U' },
    chat: { id: 555_001, type: 'private' },
    date: Math.floor(Date.now() / 1000),
    text,
  },
});

it('SIGKILL mid-forward, restart: the update is sent again and taken, then the next one of the user', async () => {
  const { accountId } = await createAccount(db.pool, { name: 'Forwarding' });
  await addBot(app.deps, {
    accountId,
    token: DEFAULT_BOT.token,
    forwardUrl: op.url,
    forwardSecret: 'restart-secret',
  });
  const first = message(991_000_001, 'one');
  const second = message(991_000_002, 'two');
  // The backend holds the first forward open: the worker is killed while waiting for its answer.
  op.answerWith((body) =>
    (JSON.parse(body) as { update_id: number }).update_id === first.update_id && op.received.length === 0
      ? 'hold'
      : 200,
  );
  const worker = await startWorkerProcess();
  for (const u of [first, second])
    expect((await fakes.telegram.deliverUpdate(DEFAULT_BOT.token, u as never)).status).toBe(200);
  await eventually(async () => op.received.length === 1, 15_000, 'the first forward to reach the backend');
  worker.child.kill('SIGKILL');
  await worker.exit();
  expect(op.received).toHaveLength(1);

  await startWorkerProcess();
  await eventually(
    async () => op.taken().length === 2,
    20_000,
    'both forwards to be taken after the restart',
  );
  expect(op.received.map((r) => [(JSON.parse(r.body) as { update_id: number }).update_id, r.status])).toEqual(
    [
      [first.update_id, 0],
      [first.update_id, 200],
      [second.update_id, 200],
    ],
  );
  expect(op.received.every((r) => r.secret === 'restart-secret')).toBe(true);
  // The worker records a forward as delivered after the backend's 200 reached it: a moment later
  // than the backend counts it taken.
  const undelivered = async () =>
    (
      await db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM telegram_forwards WHERE delivered_at IS NULL',
      )
    ).rows[0]!.n;
  await eventually(async () => (await undelivered()) === 0, 10_000, 'both forwards recorded as delivered');
  expect(await undelivered()).toBe(0);
}, 60_000);
