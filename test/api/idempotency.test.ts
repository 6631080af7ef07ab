// Idempotency-Key on the business API: stored status and exact body, replay header, no second
// execution whatever the new body, per-API-key scope, concurrent duplicates, the 24-hour window,
// the purge after two days (clock controlled), and 5xx answers never stored.
import { beforeAll, describe, expect, it } from 'vitest';
import { createTaskList, TASKS } from '../../backend/worker/tasks/index.js';
import { createPool } from '../../backend/db/pool.js';
import type { TestDatabase } from '../harness/db.js';
import { startTestApp, TEST_SECRET_KEY, type TestApp, type TestClock } from '../harness/app.js';
import { waitUntil } from '../delivery/support.js';
import { spawnService } from '../harness/process.js';
import { scratchDir } from '../harness/scratch.js';
import {
  apiClient,
  type ApiClient,
  type ApiResponse,
  apiWorld,
  count,
  lockLead,
  newUser,
  type Tenant,
  warmLead,
} from './support.js';

const world = apiWorld({ connections: 20, tenant: { platforms: ['meta', 'tiktok'] }, clock: true });
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let clock: TestClock;
let tenant: Tenant;

beforeAll(() => {
  ({ db, t, api, tenant, clock } = world);
});

let keySeq = 0;
const freshKey = () => `order-${Date.now()}-${keySeq++}`;

const warmUser = () => warmLead(db.pool, tenant);
const purchase = (user: number, extra: Record<string, unknown> = {}) => ({
  telegramUserId: user,
  eventType: 'Purchase',
  value: 10,
  currency: 'USD',
  ...extra,
});
const conversionsOf = (user: number) => count(db.pool, 'conversions WHERE telegram_user_id = $1', [user]);

/** Runs `fn` while a transaction of the test holds the user's business-event lock, so events of theirs stop inside their transaction. */
async function holdingLeadLock(user: number, fn: () => Promise<void>): Promise<void> {
  const holder = await db.pool.connect();
  try {
    await holder.query('BEGIN');
    await lockLead(holder, tenant.accountId, user);
    await fn();
  } finally {
    await holder.query('COMMIT');
    holder.release();
  }
}

const waitingOn = (waitEvent: string) =>
  count(db.pool, 'pg_stat_activity WHERE datname = current_database() AND wait_event = $1', [waitEvent]);

/**
 * Runs `send`, then resolves once one more backend of this database waits on a lock of this kind
 * (`advisory`, `transactionid`), with what `send` returned (wrapped, so a promise is not awaited).
 */
async function sentAndWaiting<T>(waitEvent: string, send: () => T): Promise<{ sent: T }> {
  const before = await waitingOn(waitEvent);
  const sent = send();
  await waitUntil(
    async () => (await waitingOn(waitEvent)) > before,
    10_000,
    `a new backend waiting on ${waitEvent}`,
  );
  return { sent };
}

async function rawPost(path: string, body: unknown, headers: Record<string, string>) {
  const res = await fetch(`${t.url}/api/v1${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

describe('replay', () => {
  it('the same key returns the stored status and exact body with X-Idempotent-Replay, and runs nothing', async () => {
    const user = await warmUser();
    const key = freshKey();
    const headers = { authorization: `Bearer ${tenant.accountKey}`, 'idempotency-key': key };
    const first = await rawPost('/events/conversion', purchase(user), headers);
    expect(first.status).toBe(201);
    expect(first.headers.get('x-idempotent-replay')).toBeNull();
    const second = await rawPost('/events/conversion', purchase(user), headers);
    expect(second.status).toBe(201);
    expect(second.headers.get('x-idempotent-replay')).toBe('true');
    expect(second.headers.get('content-type')).toMatch(/^application\/json/);
    expect(second.text).toBe(first.text);
    expect(await conversionsOf(user)).toBe(1);
  });

  it('the answer is stored in the transaction that records the conversion, byte for byte', async () => {
    const user = await warmUser();
    const key = freshKey();
    const first = await rawPost('/events/conversion', purchase(user), {
      authorization: `Bearer ${tenant.accountKey}`,
      'idempotency-key': key,
    });
    expect(first.status).toBe(201);
    const { conversionId } = JSON.parse(first.text) as { conversionId: string };
    // xmin is the id of the transaction that wrote a row: one transaction wrote both, so neither
    // can exist without the other (a crash in between cannot leave the work without its answer).
    const { rows } = await db.pool.query<{
      stored: number;
      body: { contentType: string; text: string };
      same_tx: boolean;
    }>(
      `SELECT k.status_code AS stored, k.response_body AS body, k.xmin::text = c.xmin::text AS same_tx
       FROM idempotency_keys k, conversions c WHERE k.key = $1 AND c.id = $2`,
      [key, conversionId],
    );
    expect(rows).toEqual([
      { stored: 201, body: { contentType: 'application/json', text: first.text }, same_tx: true },
    ]);
  });

  it('a reuse of a sent conversion (200, deduplicated) stores its answer too, and replays it', async () => {
    const user = await warmUser();
    const first = await api.post('/events/conversion', purchase(user), { key: tenant.accountKey });
    expect(first.status).toBe(201);
    await db.pool.query(`UPDATE sends SET status = 'sent', sent_at = now() WHERE conversion_id = $1`, [
      first.body.conversionId,
    ]);
    await db.pool.query(`UPDATE conversions SET capi_status = 'sent' WHERE id = $1`, [
      first.body.conversionId,
    ]);
    const headers = { authorization: `Bearer ${tenant.accountKey}`, 'idempotency-key': freshKey() };
    const reused = await rawPost('/events/conversion', purchase(user), headers);
    expect(reused.status).toBe(200);
    expect(JSON.parse(reused.text)).toMatchObject({
      conversionId: first.body.conversionId,
      deduplicated: true,
      dispatched: false,
    });
    const replay = await rawPost('/events/conversion', purchase(user, { value: 99 }), headers);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('x-idempotent-replay')).toBe('true');
    expect(replay.text).toBe(reused.text);
  });

  it('a different body under the same key gets the original response, even an invalid one', async () => {
    const user = await warmUser();
    const key = freshKey();
    const first = await api.post('/events/conversion', purchase(user, { value: 10 }), {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    const other = await api.post('/events/conversion', purchase(user, { value: 999, eventType: 'Lead' }), {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    const invalid = await api.post(
      '/events/conversion',
      { nonsense: true },
      { key: tenant.accountKey, idempotencyKey: key },
    );
    for (const r of [other, invalid]) {
      expect(r.status).toBe(201);
      expect(r.headers.get('x-idempotent-replay')).toBe('true');
      expect(r.body).toEqual(first.body);
    }
    const { rows } = await db.pool.query('SELECT value FROM conversions WHERE telegram_user_id = $1', [user]);
    expect(rows).toEqual([{ value: 10 }]);
  });

  it('a 4xx is stored and replayed too: a corrected body under the same key still gets the 400', async () => {
    const user = await warmUser();
    const key = freshKey();
    const bad = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Purchase', currency: 'USD' },
      { key: tenant.accountKey, idempotencyKey: key },
    );
    expect(bad.status).toBe(400);
    const fixed = await api.post('/events/conversion', purchase(user), {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    expect(fixed.status).toBe(400);
    expect(fixed.headers.get('x-idempotent-replay')).toBe('true');
    expect(fixed.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(fixed.body).toEqual(bad.body);
    expect(await conversionsOf(user)).toBe(0);
    const { rows } = await db.pool.query(
      'SELECT status_code FROM idempotency_keys WHERE api_key_id = $1 AND key = $2',
      [tenant.accountKeyId, key],
    );
    expect(rows).toEqual([{ status_code: 400 }]);
  });

  it('GET endpoints replay as well (a 404 LEAD_NOT_FOUND here)', async () => {
    const user = newUser();
    const key = freshKey();
    const miss = await api.get(`/leads/${user}?siteId=${tenant.site.siteId}`, {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    expect(miss.status).toBe(404);
    await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        eventType: 'Lead',
        siteId: tenant.site.siteId,
        channelId: tenant.site.channels.main,
      },
      { key: tenant.accountKey },
    );
    const again = await api.get(`/leads/${user}?siteId=${tenant.site.siteId}`, {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    expect(again.status).toBe(404);
    expect(again.headers.get('x-idempotent-replay')).toBe('true');
    expect(
      (await api.get(`/leads/${user}?siteId=${tenant.site.siteId}`, { key: tenant.accountKey })).status,
    ).toBe(200);
  });

  it('two API keys using one idempotency key never collide', async () => {
    const key = freshKey();
    const [u1, u2] = [await warmUser(), await warmUser()];
    const viaAccount = await api.post('/events/conversion', purchase(u1), {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    const viaSite = await api.post('/events/conversion', purchase(u2), {
      key: tenant.site.siteKey,
      idempotencyKey: key,
    });
    expect([viaAccount.status, viaSite.status]).toEqual([201, 201]);
    expect(viaSite.headers.get('x-idempotent-replay')).toBeNull();
    expect(viaSite.body.conversionId).not.toBe(viaAccount.body.conversionId);
    const replayA = await api.post('/events/conversion', purchase(u1), {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    const replayS = await api.post('/events/conversion', purchase(u2), {
      key: tenant.site.siteKey,
      idempotencyKey: key,
    });
    expect(replayA.body.conversionId).toBe(viaAccount.body.conversionId);
    expect(replayS.body.conversionId).toBe(viaSite.body.conversionId);
  });
});

describe('concurrency', () => {
  it('50 concurrent identical requests: one conversion, one send per platform; the rest replay or get 409', async () => {
    const user = await warmUser();
    const key = freshKey();
    const results = await Promise.all(
      Array.from({ length: 50 }, () =>
        api.post('/events/conversion', purchase(user), { key: tenant.accountKey, idempotencyKey: key }),
      ),
    );
    const executed = results.filter((r) => r.status === 201 && r.headers.get('x-idempotent-replay') === null);
    expect(executed).toHaveLength(1);
    for (const r of results) {
      if (r === executed[0]) continue;
      if (r.status === 409) expect(r.body.code).toBe('IDEMPOTENCY_IN_PROGRESS');
      else expect(r).toMatchObject({ status: 201, body: executed[0]!.body });
    }
    expect(await conversionsOf(user)).toBe(1);
    const { rows } = await db.pool.query(
      'SELECT s.platform FROM sends s JOIN conversions c ON c.id = s.conversion_id WHERE c.telegram_user_id = $1 ORDER BY s.platform',
      [user],
    );
    expect(rows.map((r) => r.platform)).toEqual(['meta', 'tiktok']);
  });

  it('a duplicate arriving while the first is inside its transaction waits for it, then replays its answer', async () => {
    const user = await warmUser();
    const key = freshKey();
    let first: ReturnType<typeof api.post>;
    let second: ReturnType<typeof api.post>;
    let secondSettled = false;
    await holdingLeadLock(user, async () => {
      first = (
        await sentAndWaiting('advisory', () =>
          api.post('/events/conversion', purchase(user), { key: tenant.accountKey, idempotencyKey: key }),
        )
      ).sent;
      // On the same server the duplicate waits behind the first one's batch, for longer than a poll
      // for a claimed key would (which would answer 409 after a second).
      second = api.post('/events/conversion', purchase(user, { value: 99 }), {
        key: tenant.accountKey,
        idempotencyKey: key,
      });
      void second.then(
        () => (secondSettled = true),
        () => (secondSettled = true),
      );
      await new Promise((r) => setTimeout(r, 1_200));
      expect(secondSettled).toBe(false);
    });
    const [a, b] = await Promise.all([first!, second!]);
    expect(a.status).toBe(201);
    expect(a.headers.get('x-idempotent-replay')).toBeNull();
    expect(b).toMatchObject({ status: 201, body: a.body });
    expect(b.headers.get('x-idempotent-replay')).toBe('true');
    expect(await conversionsOf(user)).toBe(1);
  });

  it('one key sent to two servers at once, with different users: exactly one runs, the other replays its answer', async () => {
    const [userA, userB] = [await warmUser(), await warmUser()];
    const key = freshKey();
    // Another process: its own pool, so its own batches.
    const otherPool = createPool(db.url, 4);
    const other = await startTestApp(otherPool, { clock });
    try {
      let first: ReturnType<typeof api.post>;
      let second: ReturnType<typeof api.post>;
      await holdingLeadLock(userA, async () => {
        // The first waits inside its transaction, on the lead lock, before it has claimed the key (claims follow the lead lock)...
        first = (
          await sentAndWaiting('advisory', () =>
            api.post('/events/conversion', purchase(userA), { key: tenant.accountKey, idempotencyKey: key }),
          )
        ).sent;
        // ...so the duplicate on the other server claims it and commits first.
        second = apiClient(other.url).post('/events/conversion', purchase(userB, { value: 99 }), {
          key: tenant.accountKey,
          idempotencyKey: key,
        });
        expect((await second).status).toBe(201);
      });
      const [a, b] = await Promise.all([first!, second!]);
      expect(b.headers.get('x-idempotent-replay')).toBeNull();
      expect(a).toMatchObject({ status: 201, body: b.body });
      expect(a.headers.get('x-idempotent-replay')).toBe('true');
      expect((await conversionsOf(userA)) + (await conversionsOf(userB))).toBe(1);
      expect(await conversionsOf(userB)).toBe(1);
    } finally {
      await other.stop();
      await otherPool.end();
    }
  });

  it('a server killed inside the event leaves no claim behind: the retry runs at once', async () => {
    const user = await warmUser();
    const key = freshKey();
    const server = spawnService('backend/main.ts', {
      DATABASE_URL: db.url,
      DATA_DIR: scratchDir('api-crash'),
      SECRET_KEY: TEST_SECRET_KEY.toString('hex'),
      PORT: '0',
      WORKER: 'off',
    });
    try {
      const [, url] = await server.waitFor(/Capigram listening on (\S+)/);
      await holdingLeadLock(user, async () => {
        await sentAndWaiting('advisory', () => {
          void apiClient(url!)
            .post('/events/conversion', purchase(user), { key: tenant.accountKey, idempotencyKey: key })
            .catch(() => undefined);
        });
        server.child.kill('SIGKILL');
        await server.exit();
      });
    } finally {
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
    }
    const retry = await api.post('/events/conversion', purchase(user), {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('x-idempotent-replay')).toBeNull();
    expect(await conversionsOf(user)).toBe(1);
  });

  it('409 IDEMPOTENCY_IN_PROGRESS while the first request with the key is still executing', async () => {
    const user = await warmUser();
    const key = freshKey();
    await db.pool.query('INSERT INTO idempotency_keys (api_key_id, key, created_at) VALUES ($1, $2, $3)', [
      tenant.accountKeyId,
      key,
      t.deps.now(),
    ]);
    const started = Date.now();
    const res = await api.post('/events/conversion', purchase(user), {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('IDEMPOTENCY_IN_PROGRESS');
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(await conversionsOf(user)).toBe(0);
  });

  it('a claim abandoned for over a minute (its process died) is taken over', async () => {
    const user = await warmUser();
    const key = freshKey();
    await db.pool.query('INSERT INTO idempotency_keys (api_key_id, key, created_at) VALUES ($1, $2, $3)', [
      tenant.accountKeyId,
      key,
      new Date(Date.now() - 120_000),
    ]);
    const res = await api.post('/events/conversion', purchase(user), {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    expect(res.status).toBe(201);
    expect(res.headers.get('x-idempotent-replay')).toBeNull();
    expect(await conversionsOf(user)).toBe(1);
  });
});

describe('the key itself', () => {
  it.each([
    ['129 characters', 'k'.repeat(129)],
    ['empty', ''],
    ['a non-ASCII character', 'commande-é'],
    ['a control character', 'a\tb'],
  ])('%s → 400 IDEMPOTENCY_KEY_INVALID, nothing claimed or executed', async (_label, key) => {
    const user = await warmUser();
    const res = await rawPost('/events/conversion', purchase(user), {
      authorization: `Bearer ${tenant.accountKey}`,
      'idempotency-key': key,
    });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.text).code).toBe('IDEMPOTENCY_KEY_INVALID');
    expect(await conversionsOf(user)).toBe(0);
  });

  it('128 printable characters are accepted', async () => {
    const key = `${' ~!'.repeat(42)}ab`;
    expect(key).toHaveLength(128);
    const res = await api.post('/events/conversion', purchase(await warmUser()), {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    expect(res.status).toBe(201);
  });

  it('a missing or bad API key is refused before any key is claimed', async () => {
    const key = freshKey();
    const res = await api.post('/events/conversion', purchase(await warmUser()), { idempotencyKey: key });
    expect(res.status).toBe(401);
    expect(await count(db.pool, 'idempotency_keys WHERE key = $1', [key])).toBe(0);
  });
});

describe('5xx answers are not stored', () => {
  it.each([
    ['503 UNAVAILABLE', '08006'],
    ['500 INTERNAL', 'XX000'],
  ])('%s releases the claim, so the retry executes', async (_label, sqlstate) => {
    const user = await warmUser();
    const key = freshKey();
    await db.pool.query(`CREATE OR REPLACE FUNCTION fail_insert() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'injected failure' USING ERRCODE = '${sqlstate}'; END $$`);
    await db.pool.query(
      'CREATE TRIGGER fail_insert BEFORE INSERT ON conversions FOR EACH ROW EXECUTE FUNCTION fail_insert()',
    );
    let failed: ApiResponse;
    try {
      failed = await api.post('/events/conversion', purchase(user), {
        key: tenant.accountKey,
        idempotencyKey: key,
      });
    } finally {
      await db.pool.query('DROP TRIGGER fail_insert ON conversions');
    }
    expect(failed.status).toBeGreaterThanOrEqual(500);
    expect(await count(db.pool, 'idempotency_keys WHERE key = $1', [key])).toBe(0);
    const retry = await api.post('/events/conversion', purchase(user), {
      key: tenant.accountKey,
      idempotencyKey: key,
    });
    expect(retry.status).toBe(201);
    expect(retry.headers.get('x-idempotent-replay')).toBeNull();
    expect(await conversionsOf(user)).toBe(1);
  });
});

describe('time (clock controlled)', () => {
  it('replays for 24 hours; after that (before the purge) the key runs again and its new answer replaces the old', async () => {
    const user = await warmUser();
    const key = freshKey();
    const start = Date.now();
    clock.set(start);
    try {
      const first = await api.post('/events/conversion', purchase(user), {
        key: tenant.accountKey,
        idempotencyKey: key,
      });
      clock.set(start + 23 * 3_600_000);
      const replay = await api.post('/events/conversion', purchase(user), {
        key: tenant.accountKey,
        idempotencyKey: key,
      });
      expect(replay.headers.get('x-idempotent-replay')).toBe('true');
      expect(replay.body).toEqual(first.body);

      clock.set(start + 25 * 3_600_000);
      const rerun = await api.post('/events/conversion', purchase(user), {
        key: tenant.accountKey,
        idempotencyKey: key,
      });
      expect(rerun.status).toBe(201);
      expect(rerun.headers.get('x-idempotent-replay')).toBeNull();
      expect(rerun.body.conversionId).not.toBe(first.body.conversionId);
      const again = await api.post('/events/conversion', purchase(user), {
        key: tenant.accountKey,
        idempotencyKey: key,
      });
      expect(again.body).toEqual(rerun.body);
      expect(await conversionsOf(user)).toBe(2);
    } finally {
      clock.real();
    }
  });

  it('the purge task removes keys older than two days, not younger ones; a purged key executes again', async () => {
    const user = await warmUser();
    const key = freshKey();
    const start = Date.now();
    clock.set(start);
    const purge = createTaskList(t.deps)[TASKS.purgeIdempotency]!;
    const runPurge = () => purge({}, {} as Parameters<typeof purge>[1]);
    try {
      await api.post('/events/conversion', purchase(user), { key: tenant.accountKey, idempotencyKey: key });
      clock.set(start + 47 * 3_600_000);
      await runPurge();
      expect(await count(db.pool, 'idempotency_keys WHERE key = $1', [key])).toBe(1);
      clock.set(start + 49 * 3_600_000);
      await runPurge();
      expect(await count(db.pool, 'idempotency_keys WHERE key = $1', [key])).toBe(0);
      const rerun = await api.post('/events/conversion', purchase(user), {
        key: tenant.accountKey,
        idempotencyKey: key,
      });
      expect(rerun.status).toBe(201);
      expect(rerun.headers.get('x-idempotent-replay')).toBeNull();
    } finally {
      clock.real();
    }
  });
});
