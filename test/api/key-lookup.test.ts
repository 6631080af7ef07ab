// The event endpoints' API key look-ups go together while others are out (backend/http/api/key-lookup.ts):
// one statement may then carry the keys of several accounts, revoked and forged keys among them,
// and each request must still get exactly its own key's answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../backend/domain/admin/api-keys.js';
import { MAX_LOOKUPS_IN_FLIGHT } from '../../backend/domain/api-key-lookup.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import {
  apiClient,
  attributedJoin,
  count,
  newUser,
  queuedBehind,
  seedTenant,
  type ApiClient,
  type ApiResponse,
  type Tenant,
} from './support.js';

let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let a: Tenant;
let b: Tenant;

beforeAll(async () => {
  db = await createTestDatabase(20);
  t = await startTestApp(db.pool);
  api = apiClient(t.url);
  a = await seedTenant(db.pool, t.deps.box);
  b = await seedTenant(db.pool, t.deps.box);
});
afterAll(async () => {
  await t.stop();
  await db.drop();
});

async function warmUser(tenant: Tenant): Promise<number> {
  const user = newUser();
  await attributedJoin(db.pool, {
    siteId: tenant.site.siteId,
    channelId: tenant.site.channels.main,
    telegramUserId: user,
  });
  return user;
}
const purchase = (user: number) => ({
  telegramUserId: user,
  eventType: 'Purchase',
  value: 10,
  currency: 'USD',
});
const post = (key: string, body: unknown, idempotencyKey?: string) =>
  api.post('/events/conversion', body, { key, ...(idempotencyKey === undefined ? {} : { idempotencyKey }) });

const lockWaiters = () =>
  count(
    db.pool,
    "pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'relation'",
  );

/**
 * Every look-up slot of the server stuck on a lock the test holds on `api_keys`, while `send`
 * queues requests behind them; then the lock goes, and the queued look-ups leave as one statement.
 */
async function lookedUpTogether<T>(send: () => T): Promise<{ sent: T; blockers: ApiResponse[] }> {
  const users = await Promise.all(Array.from({ length: MAX_LOOKUPS_IN_FLIGHT }, () => warmUser(a)));
  return queuedBehind(db.pool, {
    hold: (holder) => holder.query('LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE'),
    waiters: lockWaiters,
    blockers: users.map((user) => () => post(a.accountKey, purchase(user))),
    send,
  });
}

describe('look-ups that go together', () => {
  it("each request gets its own key's answer: tenants stay apart, revoked, forged and unknown keys are refused", async () => {
    const [userA, userB] = [await warmUser(a), await warmUser(b)];
    const revoked = await seedTenant(db.pool, t.deps.box);
    await revokeApiKey(db.pool, revoked.accountKeyId);
    const forged = `${a.accountKey.slice(0, -4)}${a.accountKey.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    const unknown = 'cgk_zzzzzzzzzzzz_not-a-key-of-anyone-at-all-0000000000';
    const { sent } = await lookedUpTogether(() =>
      Promise.all([
        post(a.accountKey, purchase(userA)),
        post(b.accountKey, purchase(userB)),
        post(revoked.accountKey, purchase(userA)),
        post(forged, purchase(userA)),
        post(unknown, purchase(userA)),
        // B's key for A's user: B has no trace of them, so it is a cold lead for B, never A's data.
        post(b.accountKey, purchase(userA)),
        post(a.site.siteKey, purchase(newUser())),
      ]),
    );
    const [ownA, ownB, byRevoked, byForged, byUnknown, crossed, coldOnSite] = await sent;
    expect(ownA).toMatchObject({ status: 201, body: { coldLead: false } });
    expect(ownB).toMatchObject({ status: 201, body: { coldLead: false } });
    for (const refused of [byRevoked, byForged, byUnknown])
      expect(refused).toMatchObject({ status: 401, body: { code: 'UNAUTHORIZED' } });
    expect(crossed).toMatchObject({ status: 400, body: { code: 'SITE_REQUIRED' } });
    // A site key names its site: the unknown user is a cold lead there, which needs a channel.
    expect(coldOnSite).toMatchObject({ status: 400, body: { code: 'CHANNEL_REQUIRED' } });
    const sites = await db.pool.query<{ telegram_user_id: number; site_id: string }>(
      'SELECT telegram_user_id, site_id FROM conversions WHERE telegram_user_id = ANY($1::bigint[])',
      [[userA, userB]],
    );
    expect(sites.rows.map((r) => [r.telegram_user_id, r.site_id]).sort()).toEqual(
      [
        [userA, a.site.siteId],
        [userB, b.site.siteId],
      ].sort(),
    );
  });

  it('an Idempotency-Key is replayed only for the API key that stored it', async () => {
    const userA = await warmUser(a);
    const key = `lookup-${Date.now()}`;
    const stored = await post(a.accountKey, purchase(userA), key);
    expect(stored.status).toBe(201);
    const userB = await warmUser(b);
    const { sent } = await lookedUpTogether(() =>
      Promise.all([post(a.accountKey, purchase(userA), key), post(b.accountKey, purchase(userB), key)]),
    );
    const [replayed, ownRun] = await sent;
    expect(replayed).toMatchObject({ status: 201, body: stored.body });
    expect(replayed!.headers.get('x-idempotent-replay')).toBe('true');
    expect(ownRun!.status).toBe(201);
    expect(ownRun!.headers.get('x-idempotent-replay')).toBeNull();
    expect(ownRun!.body.conversionId).not.toBe(stored.body.conversionId);
  });
});
