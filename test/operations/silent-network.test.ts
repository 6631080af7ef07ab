// The database's network goes silent (no reset: a forwarder between Capigram and PostgreSQL stops
// forwarding without closing a socket) under load, for 20 s, then comes back. `npm start` (web
// tier and inline worker, one real process) must:
// - answer the business API with 503 during the cut, never hang (every request answered within
//   the pool's bounds) and never 500;
// - come back by itself: 2xx answers and delivery resume once the network does;
// - lose nothing and double nothing: every conversion answered 2xx reaches Meta under its event id
//   exactly once (counted at the fake platform by event id), the in-flight ones included.
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createSecretBox } from '../../backend/crypto/secret-box.js';
import { startFakes, type Fakes } from '../fakes/index.js';
import { TEST_SECRET_KEY } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { spawnService, type ServiceProcess } from '../harness/process.js';
import { scratchDir } from '../harness/scratch.js';
import { startForwarder, type Forwarder } from '../harness/forwarder.js';
import { attributedJoin, newUser, seedTenant } from '../api/support.js';

let db: TestDatabase;
let fakes: Fakes;
let forwarder: Forwarder;
let app: ServiceProcess | undefined;

/** Short bounds, so that the test is short: a statement 3 s (the client gives up 5 s later), a connection 2 s. */
const TIMEOUTS = { DATABASE_STATEMENT_TIMEOUT_MS: '3000', DATABASE_CONNECT_TIMEOUT_MS: '2000' };
const CUT_MS = 20_000;
/** No answer within this long counts as a hang. */
const HANG_MS = 30_000;

beforeAll(async () => {
  db = await createTestDatabase(4);
  const target = new URL(db.url);
  forwarder = await startForwarder({ host: target.hostname, port: Number(target.port) });
  // Every answer takes 300 ms, so that requests are at the platform when the network goes.
  fakes = await startFakes({ meta: { latencyMs: 300 } });
});
afterAll(async () => {
  if (app && app.child.exitCode === null) {
    app.child.kill('SIGKILL');
    await app.exit();
  }
  await forwarder.close();
  await fakes.closeAll();
  await db.drop();
});

interface Answer {
  status: number;
  ms: number;
  at: number;
}

it('a silent network: 503 (no hang) during the cut, 2xx after; delivery resumes; nothing lost or doubled', async () => {
  const viaForwarder = new URL(db.url);
  viaForwarder.port = String(forwarder.port);
  const tenant = await seedTenant(db.pool, createSecretBox(TEST_SECRET_KEY), { platforms: ['meta'] });
  const users: number[] = [];
  for (let i = 0; i < 150; i++) {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    users.push(user);
  }
  app = spawnService('backend/main.ts', {
    ...fakes.env,
    ...TIMEOUTS,
    DATABASE_URL: viaForwarder.toString(),
    DATA_DIR: scratchDir('silent-network-data'),
    SECRET_KEY: TEST_SECRET_KEY.toString('hex'),
    HOST: '127.0.0.1',
    PORT: '0',
    WORKER: 'inline',
  });
  const [, url] = await app.waitFor(/Capigram listening on (http:\/\/\S+)/, 45_000);

  // Clients post conversions and retry one answered 503 (or not at all) under the same
  // Idempotency-Key until it is accepted, as the API's clients are told to.
  const answers: Answer[] = [];
  const accepted = new Set<string>();
  const unexpected: unknown[] = [];
  let next = 0;
  const client = async () => {
    while (next < users.length) {
      const user = users[next++]!;
      for (;;) {
        const started = performance.now();
        const res = await fetch(`${url}/api/v1/events/conversion`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${tenant.site.siteKey}`,
            'content-type': 'application/json',
            'idempotency-key': `silent-${user}`,
          },
          body: JSON.stringify({ telegramUserId: user, eventType: 'Lead' }),
          signal: AbortSignal.timeout(HANG_MS),
        }).catch((err: unknown) => ({ status: 0, err, json: async () => ({}) }));
        const body = (await res.json().catch(() => ({}))) as { conversionId?: string };
        answers.push({ status: res.status, ms: performance.now() - started, at: performance.now() });
        if (res.status >= 200 && res.status < 300) {
          accepted.add(body.conversionId!);
          break;
        }
        if (res.status !== 503) unexpected.push({ status: res.status, body });
        await new Promise((r) => setTimeout(r, 200));
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const posting = Promise.all([client(), client()]);

  // Cut once deliveries are under way: requests are at the platform.
  await fakes.meta.waitFor((log) => log.length >= 3, 30_000);
  const cutAt = performance.now();
  forwarder.cut();
  await new Promise((r) => setTimeout(r, CUT_MS));
  const backAt = performance.now();
  forwarder.restore();
  await posting;

  const during = answers.filter((a) => a.at > cutAt + 1000 && a.at - a.ms < backAt);
  const firstOkAfter = answers.find((a) => a.at > backAt && a.status >= 200 && a.status < 300);
  expect(unexpected).toEqual([]);
  // During the cut: answered, 503, within the bounds (no request waited for the network).
  expect(during.length).toBeGreaterThan(0);
  expect(during.filter((a) => a.status === 503).length).toBeGreaterThan(0);
  expect(Math.max(...answers.map((a) => a.ms))).toBeLessThan(HANG_MS);
  expect(accepted.size).toBe(users.length);

  // Every accepted conversion reaches Meta, each event id exactly once.
  const { rows } = await db.pool.query<{ event_id: string }>(
    `SELECT event_id FROM sends WHERE conversion_id = ANY($1::uuid[])`,
    [[...accepted]],
  );
  const expected = new Set(rows.map((r) => r.event_id));
  expect(expected.size).toBe(users.length);
  const received = () => new Set(fakes.meta.events().map((e) => e.event.event_id!));
  const deadline = performance.now() + 90_000;
  while ([...expected].some((id) => !received().has(id))) {
    if (performance.now() > deadline) throw new Error('delivery did not resume within 90 s of the network');
    await new Promise((r) => setTimeout(r, 200));
  }
  const drainedMs = performance.now() - backAt;
  // No conversion recorded beside the accepted ones (a retry never made a second one).
  const { rows: all } = await db.pool.query<{ id: string }>('SELECT id FROM conversions WHERE site_id = $1', [
    tenant.site.siteId,
  ]);
  expect(new Set(all.map((c) => c.id))).toEqual(accepted);
  expect(received()).toEqual(expected);
  const stats = fakes.meta.dedupStats();
  const figures = {
    cutMs: Math.round(backAt - cutAt),
    answersDuringCut: during.length,
    status503DuringCut: during.filter((a) => a.status === 503).length,
    slowestAnswerMs: Math.round(Math.max(...answers.map((a) => a.ms))),
    firstApi2xxAfterMs: firstOkAfter ? Math.round(firstOkAfter.at - backAt) : null,
    deliveryDrainedAfterMs: Math.round(drainedMs),
    accepted: accepted.size,
    sentTwice: stats.duplicates,
  };
  process.stdout.write(`silent network figures: ${JSON.stringify(figures)}\n`);
  expect(stats.duplicates).toBe(0);
  // The process recovered by itself: it never exited.
  expect(app.child.exitCode).toBeNull();
}, 240_000);
