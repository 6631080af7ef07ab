// A worker killed with SIGKILL while the receiver has not yet answered a webhook POST loses
// nothing: the restarted worker posts that event again (at least once), then the lead's next one,
// in order.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { addWebhook } from '../../backend/domain/webhooks/admin.js';
import { TEST_SECRET_KEY, testDeps } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { spawnService, type ServiceProcess } from '../harness/process.js';
import { seedTenant, warmLead, type Tenant } from '../api/support.js';
import { eventually } from '../telegram/world.js';
import { startReceiver, type Receiver } from './receiver.js';

let db: TestDatabase;
let rx: Receiver;
let tenant: Tenant;
const dataDir = mkdtempSync(join(tmpdir(), 'capigram-webhook-crash-'));
const running: ServiceProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase(4);
  rx = await startReceiver();
  const deps = testDeps(db.pool, { OUTBOUND_ALLOW_PRIVATE: '1' });
  tenant = await seedTenant(db.pool, deps.box, { platforms: [] });
  await addWebhook(deps, { site: tenant.site.siteId, url: rx.url, events: ['join', 'leave'] });
});
afterAll(async () => {
  for (const p of running) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  await rx.close();
  await db.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function startWorkerProcess(): Promise<ServiceProcess> {
  const p = spawnService('backend/worker-main.ts', {
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    SECRET_KEY: TEST_SECRET_KEY.toString('hex'),
    OUTBOUND_ALLOW_PRIVATE: '1',
  });
  running.push(p);
  await p.waitFor(/Capigram worker running/);
  return p;
}

it("SIGKILL mid-POST, restart: the event is posted again and taken, then the lead's next one", async () => {
  const user = await warmLead(db.pool, tenant);
  await db.pool.query(
    `INSERT INTO memberships (channel_id, telegram_user_id, kind, occurred_at) VALUES ($1, $2, 'leave', now())`,
    [tenant.site.channels.main, user],
  );
  // The receiver holds the first POST open: the worker is killed while waiting for its answer.
  rx.answerWith((_body, i) => (i === 0 ? 'hold' : 200));
  const worker = await startWorkerProcess();
  await eventually(async () => rx.received.length === 1, 15_000, 'the first POST to reach the receiver');
  worker.child.kill('SIGKILL');
  await worker.exit();
  expect(rx.received).toHaveLength(1);

  await startWorkerProcess();
  await eventually(async () => rx.received.length === 3, 20_000, 'both events after the restart');
  const events = rx.received.map((r) => JSON.parse(r.body) as { id: string; type: string });
  expect(events.map((e) => e.type)).toEqual(['join', 'join', 'leave']);
  expect(events[1]!.id).toBe(events[0]!.id);
  const pending = async () =>
    (
      await db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM webhook_events WHERE delivered_at IS NULL',
      )
    ).rows[0]!.n;
  await eventually(async () => (await pending()) === 0, 10_000, 'both recorded as delivered');
}, 60_000);
