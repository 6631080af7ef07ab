// One Idempotency-Key sent to two processes at once (two apps, each with its own pool, so their
// own shared event transactions), for many leads at the same time: whichever path each copy takes
// (a shared transaction, or alone after one was rolled back), the race resolves into one run and
// a replay (or a 409 to retry), never a 5xx, and PostgreSQL reports no deadlock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../../backend/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { apiClient, attributedJoin, newUser, seedTenant, type Tenant } from './support.js';

const LEADS = 32;
/** `TWO_PROCESS_ROUNDS` raises it for a measurement. */
const ROUNDS = Number(process.env.TWO_PROCESS_ROUNDS ?? 16);

let db: TestDatabase;
const pools: Pool[] = [];
const apps: TestApp[] = [];
let tenant: Tenant;

async function deadlocks(): Promise<number> {
  await db.pool.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await db.pool.query<{ n: string }>(
    'SELECT deadlocks::text AS n FROM pg_stat_database WHERE datname = current_database()',
  );
  return Number(rows[0]!.n);
}

beforeAll(async () => {
  db = await createTestDatabase(4);
  // A deadlock is found after deadlock_timeout: short here, so that one would show at once.
  const { rows } = await db.pool.query<{ d: string }>('SELECT current_database() AS d');
  await db.pool.query(`ALTER DATABASE "${rows[0]!.d}" SET deadlock_timeout = '50ms'`);
  for (let i = 0; i < 2; i++) {
    pools.push(createPool(db.url, 8));
    apps.push(await startTestApp(pools[i]!));
  }
  tenant = await seedTenant(pools[0]!, apps[0]!.deps.box, { platforms: ['meta'] });
});
let closed = false;
async function closeAll() {
  if (closed) return;
  closed = true;
  for (const a of apps) await a.stop();
  for (const p of pools) await p.end().catch(() => undefined);
}
afterAll(async () => {
  await closeAll();
  await db.drop();
});

describe('one Idempotency-Key sent to two processes at once', () => {
  it('never answers 5xx: one copy runs, the other replays it (or gets 409), and no deadlock', async () => {
    const users = Array.from({ length: LEADS }, () => newUser());
    for (const u of users)
      await attributedJoin(db.pool, {
        siteId: tenant.site.siteId,
        channelId: tenant.site.channels.main,
        telegramUserId: u,
      });
    const before = await deadlocks();
    const [a, b] = apps.map((x) => apiClient(x.url));
    const statuses = new Map<number, number>();
    let replays = 0;
    // Each lead its own stream of keyed events, the leads side by side and out of step, so that
    // shared transactions of both processes keep meeting (and some of their events run alone).
    const stream = async (u: number, i: number) => {
      for (let round = 0; round < ROUNDS; round++) {
        const key = `two-${round}-${u}`;
        // A lead's events alternate between two types, so that rounds both create and reuse.
        const body = {
          telegramUserId: u,
          eventType: (round + i) % 2 === 0 ? 'Purchase' : 'Lead',
          value: 10,
          currency: 'USD',
        };
        const pair = await Promise.all(
          [a!, b!].map((api) =>
            api.post('/events/conversion', body, { key: tenant.accountKey, idempotencyKey: key }),
          ),
        );
        for (const r of pair) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        const ok = pair.filter((r) => r.status < 300);
        if (ok.length === 2) {
          expect(ok[0]!.body.conversionId).toBe(ok[1]!.body.conversionId);
          expect(ok.filter((r) => r.headers.get('x-idempotent-replay') === 'true')).toHaveLength(1);
          replays++;
        }
        for (const r of pair.filter((x) => x.status >= 300 && x.status < 500))
          expect(r.body.code).toBe('IDEMPOTENCY_IN_PROGRESS');
      }
    };
    await Promise.all(users.map(stream));
    await closeAll();
    await new Promise((r) => setTimeout(r, 300));
    const found = (await deadlocks()) - before;
    console.info(
      JSON.stringify({
        requests: LEADS * ROUNDS * 2,
        statuses: Object.fromEntries(statuses),
        replays,
        deadlocks: found,
      }),
    );
    expect([...statuses.keys()].filter((s) => s >= 500)).toEqual([]);
    expect(replays).toBeGreaterThan(0);
    expect(found).toBe(0);
  }, 60_000);
});
