// A worker killed with SIGKILL in the middle of a platform request loses nothing: its claimed
// sends come back when their lease ends, and the restarted worker delivers everything. Events
// the platform had already accepted before the kill are sent again with the same event id, so the
// platform deduplicates them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { testDeps, TEST_SECRET_KEY } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { spawnService, type ServiceProcess } from '../harness/process.js';
import { startFakes, type Fakes } from '../fakes/index.js';
import { allSettled, createConversion, createSiteWith, createVisit, sendsOf, UA } from './support.js';

let db: TestDatabase;
let fakes: Fakes;
const dataDir = mkdtempSync(join(tmpdir(), 'capigram-delivery-crash-'));
const running: ServiceProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase(20);
  // Every answer takes 150 ms, so that a request is in flight when the worker is killed.
  fakes = await startFakes({ meta: { latencyMs: 150 } });
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
  await p.waitFor(/Capigram worker running/);
  return p;
}

it('SIGKILL mid-request, restart: every conversion delivered, each event id at least once, none lost', async () => {
  const deps = testDeps(db.pool, { ...fakes.env });
  const { siteId } = await createSiteWith(deps, ['meta']);
  const visitId = await createVisit(db.pool, siteId, {
    href: 'https://shop.example.com/',
    clientIp: '203.0.113.7',
    userAgent: UA,
  });

  const first = await startWorkerProcess();
  const ids: string[] = [];
  // The conversions trickle in over a couple of seconds, so that the worker sends them in many
  // requests: written all at once (a worker slow to start on a busy machine), they would all go
  // in its first request, and there would be no request left to kill it in.
  const writing = Promise.all(
    [0, 1].map(async () => {
      for (let i = 0; i < 150; i++) {
        ids.push((await createConversion(db.pool, siteId, { visitId })).conversionId);
        await new Promise((r) => setTimeout(r, 10));
      }
    }),
  );

  // Kill while a request is in flight: it has reached the platform, its answer has not come back.
  await fakes.meta.waitFor((log) => log.length >= 3, 15_000);
  first.child.kill('SIGKILL');
  await first.exit();
  const orphaned = await sendsOf(db.pool, `status = 'pending' AND attempts > 0`);
  expect(orphaned.length).toBeGreaterThan(0);

  await writing;
  const restartedAt = performance.now();
  const second = await startWorkerProcess();
  // The orphaned sends are due again when their lease (40 s) ends.
  await allSettled(db.pool, 75_000);
  const sends = await sendsOf(db.pool, 'conversion_id = ANY($1::uuid[])', [ids]);
  expect(sends).toHaveLength(300);
  expect(sends.filter((s) => s.status !== 'sent')).toEqual([]);
  const stats = fakes.meta.dedupStats();
  expect(stats.distinct).toBe(300);
  expect(new Set(fakes.meta.events().map((e) => e.event.event_id))).toEqual(
    new Set(ids.map((id) => `cnv_${id}`)),
  );
  // The sends orphaned by the kill were sent again after the restart, under the same event ids
  // (the platform may have received them already, in the request the kill interrupted).
  const orphanIds = new Set(orphaned.map((s) => s.event_id));
  const resent = new Set(
    fakes.meta
      .events()
      .filter((e) => e.receivedAt > restartedAt && orphanIds.has(e.event.event_id!))
      .map((e) => e.event.event_id),
  );
  expect(resent).toEqual(orphanIds);

  second.child.kill('SIGTERM');
  expect(await second.exit()).toBe(0);
}, 120_000);
