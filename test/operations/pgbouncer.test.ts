// The web tier through a real PgBouncer in transaction mode (Debian's 1.18, which keeps no
// prepared statements across transactions), the job worker and migrations on DATABASE_DIRECT_URL,
// as docs/production.md sets them up. The process is built by openRuntime from those two URLs, as
// `npm start` builds it. Tracker visits, business API conversions (each sent twice at once under
// one Idempotency-Key) and webhook joins run together; every conversion answered 2xx is stored
// once and reaches the platform once, every visit and join is stored once.
import { serve, type ServerType } from '@hono/node-server';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { addBot } from '../../backend/domain/admin/bots.js';
import { createApiKey } from '../../backend/domain/admin/api-keys.js';
import { addChannel } from '../../backend/domain/admin/channels.js';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { createPool, type Pool } from '../../backend/db/pool.js';
import { workerDeps } from '../../backend/deps.js';
import { createApp } from '../../backend/http/app.js';
import { openRuntime, type Runtime } from '../../backend/runtime.js';
import { startWorker } from '../../backend/worker/runner.js';
import type { Runner } from 'graphile-worker';
import { DEFAULT_BOT, startFakes, type FakeChat, type Fakes } from '../fakes/index.js';
import { TEST_ADMIN_TOKEN, TEST_SECRET_KEY } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { startPgBouncer, type PgBouncer } from '../harness/pgbouncer.js';
import { scratchDir } from '../harness/scratch.js';
import { apiClient, attributedJoin, newUser } from '../api/support.js';

const CHAT: FakeChat = {
  id: -1001000009001,
  title: 'Main',
  type: 'channel',
  admins: { [DEFAULT_BOT.id]: { can_invite_users: true } },
};
const ORIGIN = 'https://shop.example.com';

let db: TestDatabase;
let direct: Pool;
let bouncer: PgBouncer;
let fakes: Fakes;
let rt: Runtime;
let server: ServerType;
let worker: Runner;
let url: string;

beforeAll(async () => {
  fakes = await startFakes({ telegram: { bots: [DEFAULT_BOT], chats: [CHAT] } });
  db = await createTestDatabase(2);
  // Fewer server connections than the web tier's pool has clients: transactions of one client
  // land on different server connections, which is what breaks session state.
  bouncer = await startPgBouncer(db.url, { poolSize: 3 });
  rt = await openRuntime({
    env: {
      ...fakes.env,
      DATABASE_URL: bouncer.url,
      DATABASE_DIRECT_URL: db.url,
      DATA_DIR: scratchDir('pgbouncer-data'),
      SECRET_KEY: TEST_SECRET_KEY.toString('hex'),
      ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    },
    poolSize: 12,
  });
  const app = createApp(rt.deps);
  server = await new Promise((ok) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => ok(s));
  });
  const addr = server.address();
  url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  rt.deps.config.PUBLIC_URL = url;
  worker = await startWorker(workerDeps(rt.deps), { pollIntervalMs: 100, crontab: '' });
  direct = createPool(db.url, 2);
}, 60_000);

afterAll(async () => {
  await worker?.stop();
  await new Promise<void>((ok) => (server ? server.close(() => ok()) : ok()));
  await rt?.close();
  await direct?.end().catch(() => undefined);
  await bouncer?.close();
  await fakes?.closeAll();
  await db?.drop();
});

/** Runs `tasks` with at most `n` at a time. */
async function limited<T>(n: number, tasks: (() => Promise<T>)[]): Promise<T[]> {
  const out: T[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < tasks.length) {
        const i = next++;
        out[i] = await tasks[i]!();
      }
    }),
  );
  return out;
}

it('tracker visits, keyed conversions and webhook joins through PgBouncer: none lost, none doubled', async () => {
  // The pools are what the settings say: the web tier's through PgBouncer, the worker's direct.
  expect(rt.deps.directPool).toBeDefined();
  const deps = rt.deps;
  const { accountId } = await createAccount(deps.pool, { name: 'Pooled' });
  const site = await createSite(deps.pool, { accountId, name: 'Shop', domains: ['shop.example.com'] });
  const { botId } = await addBot(deps, { accountId, token: DEFAULT_BOT.token });
  const { channelId } = await addChannel(deps, {
    siteId: site.siteId,
    botId,
    telegramChannelId: String(CHAT.id),
    title: CHAT.title,
    isDefault: true,
  });
  await addPixel(deps, {
    platform: 'meta',
    siteId: site.siteId,
    pixelId: '1234567890',
    accessToken: 'meta-test-token',
  });
  const { apiKey } = await createApiKey(deps.pool, { accountId, siteId: site.siteId, name: 'backend' });
  const leads: number[] = [];
  for (let i = 0; i < 40; i++) {
    const user = newUser();
    await attributedJoin(direct, { siteId: site.siteId, channelId, telegramUserId: user });
    leads.push(user);
  }
  const joiners = Array.from({ length: 20 }, () => newUser());

  const api = apiClient(url);
  const started = Date.now();
  const visits = Array.from({ length: 40 }, () => async () => {
    const res = await fetch(`${url}/backend/track/init`, {
      method: 'POST',
      headers: { origin: ORIGIN },
      body: JSON.stringify({
        websiteId: site.websiteId,
        tempId: crypto.randomUUID(),
        sessionId: crypto.randomUUID(),
        href: `${ORIGIN}/landing?fbclid=IwAR2F4`,
      }),
    });
    return { kind: 'visit', status: res.status, id: ((await res.json()) as { visitId?: string }).visitId };
  });
  // Each conversion twice at once under the same key: one conversion, the same answer twice.
  const conversions = leads.flatMap((user) =>
    [0, 1].map(() => async () => {
      const res = await api.post(
        '/events/conversion',
        { telegramUserId: user, eventType: 'Purchase', value: 10, currency: 'EUR' },
        { key: apiKey, idempotencyKey: `pooled-${user}` },
      );
      return { kind: 'conversion', status: res.status, id: res.body.conversionId as string, user };
    }),
  );
  const joins = joiners.map((user) => async () => {
    const res = await fakes.telegram.deliverUpdate(
      DEFAULT_BOT.token,
      fakes.telegram.chatMemberJoined({ chatId: CHAT.id, user: { id: user } }),
    );
    return { kind: 'join', status: res.status, id: String(user) };
  });
  // Interleaved, so that the three kinds of transactions share PgBouncer's server connections.
  const all = [...visits, ...conversions, ...joins].sort(() => Math.random() - 0.5);
  const results = await limited(12, all);
  const elapsedMs = Date.now() - started;
  const bad = results.filter((r) => r.status < 200 || r.status >= 300);
  expect(bad, bouncer.log().slice(-2000)).toEqual([]);

  // Conversions: one per lead, the same id in both answers.
  const byUser = new Map<number, Set<string>>();
  for (const r of results)
    if (r.kind === 'conversion') {
      const u = (r as unknown as { user: number }).user;
      byUser.set(u, (byUser.get(u) ?? new Set()).add(r.id!));
    }
  expect([...byUser.values()].every((ids) => ids.size === 1)).toBe(true);
  const accepted = new Set([...byUser.values()].map((ids) => [...ids][0]!));
  const { rows: stored } = await direct.query<{ id: string; telegram_user_id: number }>(
    `SELECT id, telegram_user_id FROM conversions WHERE site_id = $1 AND source <> 'webhook'`,
    [site.siteId],
  );
  expect(new Set(stored.map((c) => c.id))).toEqual(accepted);
  expect(stored).toHaveLength(leads.length);

  // Visits and joins: each stored once.
  const visitIds = results.filter((r) => r.kind === 'visit').map((r) => r.id);
  const { rows: v } = await direct.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM visits WHERE id = ANY($1::uuid[])`,
    [visitIds],
  );
  expect(v[0]!.n).toBe(visits.length);
  const { rows: j } = await direct.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM memberships WHERE channel_id = $1 AND kind = 'join' AND telegram_user_id = ANY($2::bigint[])`,
    [channelId, joiners],
  );
  expect(j[0]!.n).toBe(joiners.length);

  // Delivered by the worker on the direct connection: every send reaches Meta once by event id.
  const { rows: sends } = await direct.query<{ event_id: string }>(
    `SELECT s.event_id FROM sends s JOIN pixels p ON p.id = s.pixel_id WHERE p.site_id = $1`,
    [site.siteId],
  );
  const expected = new Set(sends.map((s) => s.event_id));
  // A PageView per visit and a Purchase per conversion, at least.
  expect(expected.size).toBeGreaterThanOrEqual(visits.length + leads.length);
  const deadline = Date.now() + 30_000;
  while (
    new Set(fakes.meta.events().map((e) => e.event.event_id)).size < expected.size &&
    Date.now() < deadline
  )
    await new Promise((r) => setTimeout(r, 100));
  const received = fakes.meta.events().map((e) => e.event.event_id!);
  expect(new Set(received)).toEqual(expected);
  expect(fakes.meta.dedupStats().duplicates).toBe(0);
  console.log(
    `PgBouncer (transaction mode, 3 server connections) figures: ${JSON.stringify({
      requests: results.length,
      non2xx: bad.length,
      conversions: accepted.size,
      lost: [...accepted].filter((id) => !stored.some((c) => c.id === id)).length,
      doubled: stored.length - accepted.size,
      sendsDelivered: new Set(received).size,
      elapsedMs,
    })}`,
  );
}, 90_000);
