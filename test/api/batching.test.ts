// Business events that arrive together share a transaction (backend/db/transaction-batch.ts, backend/domain/conversions/event-batches.ts):
// each still gets the answer it would get alone, an event refused by its rules or by PostgreSQL costs
// the others nothing, and nothing is written twice or half.
import { beforeAll, describe, expect, it } from 'vitest';
import {
  MAX_BATCHES_IN_FLIGHT,
  MAX_BATCH_EVENTS,
  QUEUE_WAIT_MS,
} from '../../backend/db/transaction-batch.js';
import type { TestDatabase } from '../harness/db.js';
import { TEST_SECRET_KEY, type TestApp } from '../harness/app.js';
import { spawnService } from '../harness/process.js';
import { scratchDir } from '../harness/scratch.js';
import { waitUntil } from '../delivery/support.js';
import {
  apiClient,
  type ApiClient,
  type ApiResponse,
  apiWorld,
  attributedJoin,
  count,
  lockLead,
  newUser,
  queuedBehind,
  type Tenant,
} from './support.js';

const world = apiWorld({ connections: 30, tenant: { platforms: ['meta', 'tiktok'] } });
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;

beforeAll(() => {
  ({ db, t, api, tenant } = world);
});

async function warmUser(): Promise<{ user: number; visitId: string }> {
  const user = newUser();
  const { visitId } = await attributedJoin(db.pool, {
    siteId: tenant.site.siteId,
    channelId: tenant.site.channels.main,
    telegramUserId: user,
  });
  return { user, visitId };
}
const purchase = (user: number, extra: Record<string, unknown> = {}) => ({
  telegramUserId: user,
  eventType: 'Purchase',
  value: 10,
  currency: 'USD',
  ...extra,
});
const post = (body: unknown, idempotencyKey?: string) =>
  api.post('/events/conversion', body, {
    key: tenant.accountKey,
    ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
  });

const advisoryWaiters = () =>
  count(db.pool, "pg_stat_activity WHERE datname = current_database() AND wait_event = 'advisory'");

/**
 * Every batch slot of the server stuck on a lead lock the test holds, while `send` queues events
 * behind them; then the slots are freed, and the queued events leave together. Resolves with what
 * `send` returned and the answers of the events that held the slots.
 */
async function queuedTogether<T>(
  send: () => T,
  holdMs?: number,
  /** How many events `send` sends: held until all of them wait in the batcher (rather than `holdMs`). */
  events?: number,
): Promise<{ sent: T; blockers: ApiResponse[] }> {
  const blockerUsers = await Promise.all(Array.from({ length: MAX_BATCHES_IN_FLIGHT }, () => warmUser()));
  return queuedBehind(db.pool, {
    hold: async (holder) => {
      for (const { user } of blockerUsers) await lockLead(holder, tenant.accountId, user);
    },
    waiters: advisoryWaiters,
    blockers: blockerUsers.map(
      ({ user }) =>
        () =>
          post(purchase(user)),
    ),
    send,
    ...(holdMs === undefined ? {} : { holdMs }),
    ...(events === undefined ? {} : { until: () => t.deps.local.eventBatches.waiting >= events }),
  });
}

/** The transaction that wrote each user's conversion (conversions of one batch share it). */
async function writersOf(users: number[]): Promise<Map<number, string>> {
  const { rows } = await db.pool.query<{ telegram_user_id: number; xid: string }>(
    'SELECT telegram_user_id, xmin::text AS xid FROM conversions WHERE telegram_user_id = ANY($1::bigint[])',
    [users],
  );
  return new Map(rows.map((r) => [r.telegram_user_id, r.xid]));
}

describe('events that arrive together', () => {
  it('share one transaction, and each gets its own acquisition, conversion and sends', async () => {
    const leads = await Promise.all(Array.from({ length: 12 }, () => warmUser()));
    const { sent, blockers } = await queuedTogether(
      () => Promise.all(leads.map(({ user }) => post(purchase(user)))),
      undefined,
      leads.length,
    );
    const answers = await sent;
    for (const b of blockers) expect(b.status).toBe(201);
    for (const a of answers) {
      expect(a.status).toBe(201);
      expect(a.body).toMatchObject({
        capiStatus: 'pending',
        coldLead: false,
        dispatched: true,
        deduplicated: false,
      });
      expect((a.body.sends as unknown[]).length).toBe(2);
    }
    // Each answer is its own user's conversion, carrying that user's acquisition visit.
    const { rows } = await db.pool.query<{
      id: string;
      telegram_user_id: number;
      visit_id: string;
      sends: number;
    }>(
      `SELECT c.id, c.telegram_user_id, c.visit_id, (SELECT count(*)::int FROM sends s WHERE s.conversion_id = c.id) AS sends
       FROM conversions c WHERE c.telegram_user_id = ANY($1::bigint[])`,
      [leads.map((l) => l.user)],
    );
    expect(rows).toHaveLength(leads.length);
    leads.forEach(({ user, visitId }, i) => {
      const row = rows.find((r) => r.telegram_user_id === user)!;
      expect(row).toMatchObject({ id: answers[i]!.body.conversionId, visit_id: visitId, sends: 2 });
    });
    // They went together: all twelve committed in one transaction.
    const writers = await writersOf(leads.map((l) => l.user));
    expect(new Set(writers.values()).size).toBe(1);
  });

  it(`never more than ${MAX_BATCH_EVENTS} to a transaction`, async () => {
    const leads = await Promise.all(Array.from({ length: MAX_BATCH_EVENTS + 5 }, () => warmUser()));
    const { sent } = await queuedTogether(
      () => Promise.all(leads.map(({ user }) => post(purchase(user)))),
      undefined,
      leads.length,
    );
    for (const a of await sent) expect(a.status).toBe(201);
    const perTransaction = new Map<string, number>();
    for (const xid of (await writersOf(leads.map((l) => l.user))).values())
      perTransaction.set(xid, (perTransaction.get(xid) ?? 0) + 1);
    expect(Math.max(...perTransaction.values())).toBe(MAX_BATCH_EVENTS);
    expect([...perTransaction.values()].reduce((a, b) => a + b, 0)).toBe(leads.length);
  });

  it('two events of one user never share a transaction: the second sees the first and reuses its conversion', async () => {
    const { user } = await warmUser();
    const { sent } = await queuedTogether(() =>
      Promise.all([post(purchase(user)), post(purchase(user, { value: 25 }))]),
    );
    const [a, b] = await sent;
    expect([a!.status, b!.status].sort()).toEqual([200, 201]);
    const reused = a!.status === 200 ? a! : b!;
    expect(reused.body).toMatchObject({ deduplicated: true, updatedExisting: true });
    expect(await count(db.pool, 'conversions WHERE telegram_user_id = $1', [user])).toBe(1);
  });

  it('an event its rules refuse gets its own error; the events beside it are written as usual', async () => {
    const leads = await Promise.all(Array.from({ length: 5 }, () => warmUser()));
    const cold = newUser(); // no acquisition and no site named: SITE_REQUIRED
    const { sent } = await queuedTogether(() =>
      Promise.all([...leads.map(({ user }) => post(purchase(user))), post(purchase(cold))]),
    );
    const answers = await sent;
    for (const a of answers.slice(0, -1)) expect(a.status).toBe(201);
    expect(answers.at(-1)).toMatchObject({ status: 400, body: { code: 'SITE_REQUIRED' } });
    expect(
      await count(db.pool, 'conversions WHERE telegram_user_id = ANY($1::bigint[])', [
        leads.map((l) => l.user),
      ]),
    ).toBe(leads.length);
    expect(await count(db.pool, 'leads WHERE telegram_user_id = $1', [cold])).toBe(0);
  });

  it('a site the key may not name is refused inside the shared transaction, which the others commit in', async () => {
    const leads = await Promise.all(Array.from({ length: 5 }, () => warmUser()));
    const stranger = newUser();
    const key = `refused-site-${stranger}`;
    const { sent } = await queuedTogether(() =>
      Promise.all([
        ...leads.map(({ user }) => post(purchase(user))),
        post(purchase(stranger, { websiteId: 'ws_no_such_site_anywhere' }), key),
      ]),
    );
    const answers = await sent;
    for (const a of answers.slice(0, -1)) expect(a.status).toBe(201);
    expect(answers.at(-1)).toMatchObject({ status: 404, body: { code: 'UNKNOWN_WEBSITE' } });
    // The refusal did not send the others to run alone: they committed in one transaction.
    expect(new Set((await writersOf(leads.map((l) => l.user))).values()).size).toBe(1);
    // Nothing of the refused event was kept but its answer, stored under its key as any 4xx is.
    expect(await count(db.pool, 'idempotency_keys WHERE key = $1 AND status_code = 404', [key])).toBe(1);
    expect(await count(db.pool, 'leads WHERE telegram_user_id = $1', [stranger])).toBe(0);
  });

  it('a write PostgreSQL refuses fails that event alone, with nothing of it written', async () => {
    const leads = await Promise.all(Array.from({ length: 5 }, () => warmUser()));
    const doomed = await warmUser();
    await db.pool.query(`CREATE FUNCTION refuse_doomed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.telegram_user_id = ${doomed.user} THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$`);
    await db.pool.query(
      'CREATE TRIGGER refuse_doomed BEFORE INSERT ON conversions FOR EACH ROW EXECUTE FUNCTION refuse_doomed()',
    );
    try {
      const { sent } = await queuedTogether(() =>
        Promise.all([...leads.map(({ user }) => post(purchase(user))), post(purchase(doomed.user))]),
      );
      const answers = await sent;
      for (const a of answers.slice(0, -1)) expect(a.status).toBe(201);
      expect(answers.at(-1)!.status).toBeGreaterThanOrEqual(500);
      expect(
        await count(db.pool, 'conversions WHERE telegram_user_id = ANY($1::bigint[])', [
          leads.map((l) => l.user),
        ]),
      ).toBe(leads.length);
      expect(await count(db.pool, 'conversions WHERE telegram_user_id = $1', [doomed.user])).toBe(0);
      expect(await count(db.pool, 'leads WHERE telegram_user_id = $1', [doomed.user])).toBe(0);
    } finally {
      await db.pool.query('DROP TRIGGER refuse_doomed ON conversions; DROP FUNCTION refuse_doomed()');
    }
  });

  it('with Idempotency-Keys: each answer is stored with its own event, and a replay returns it', async () => {
    const leads = await Promise.all(Array.from({ length: 6 }, () => warmUser()));
    const keys = leads.map((_, i) => `batch-${Date.now()}-${i}`);
    // Half keyed, half not, in one batch.
    const { sent } = await queuedTogether(() =>
      Promise.all(leads.map(({ user }, i) => post(purchase(user), i % 2 === 0 ? keys[i] : undefined))),
    );
    const answers = await sent;
    for (const a of answers) expect(a.status).toBe(201);
    const writers = await writersOf(leads.map((l) => l.user));
    expect(new Set(writers.values()).size).toBe(1);
    for (const [i, { user }] of leads.entries()) {
      if (i % 2 !== 0) continue;
      const replay = await post(purchase(user, { value: 99 }), keys[i]);
      expect(replay.status).toBe(201);
      expect(replay.headers.get('x-idempotent-replay')).toBe('true');
      expect(replay.body).toEqual(answers[i]!.body);
    }
    expect(
      await count(db.pool, 'conversions WHERE telegram_user_id = ANY($1::bigint[])', [
        leads.map((l) => l.user),
      ]),
    ).toBe(leads.length);
  });

  it("with Idempotency-Keys: each key's row is written once, claim and answer in one insert, shared or alone", async () => {
    // Every UPDATE of a key's row is noted: a claim written first and answered later would show here.
    await db.pool.query(`
      CREATE TABLE key_updates (key text);
      CREATE FUNCTION note_key_update() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO key_updates VALUES (NEW.key); RETURN NEW; END $$;
      CREATE TRIGGER note_key_update BEFORE UPDATE ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION note_key_update();`);
    try {
      const leads = await Promise.all(Array.from({ length: 5 }, () => warmUser()));
      const keys = leads.map((_, i) => `once-${Date.now()}-${i}`);
      const { sent } = await queuedTogether(() =>
        Promise.all(leads.slice(1).map(({ user }, i) => post(purchase(user), keys[i + 1]))),
      );
      const shared = await sent;
      const alone = await post(purchase(leads[0]!.user), keys[0]);
      for (const a of [alone, ...shared]) expect(a.status).toBe(201);
      const { rows } = await db.pool.query<{ key: string; response_body: unknown }>(
        'SELECT key, response_body FROM idempotency_keys WHERE key = ANY($1::text[]) ORDER BY key',
        [keys],
      );
      expect(rows.map((r) => r.key)).toEqual([...keys].sort());
      for (const r of rows) expect(r.response_body).not.toBeNull();
      expect(await count(db.pool, 'key_updates')).toBe(0);
    } finally {
      await db.pool.query(
        'DROP TRIGGER note_key_update ON idempotency_keys; DROP FUNCTION note_key_update(); DROP TABLE key_updates',
      );
    }
  });

  it('one Idempotency-Key sent twice at once runs once, whatever the bodies', async () => {
    const [a, b] = await Promise.all([warmUser(), warmUser()]);
    const key = `batch-twice-${Date.now()}`;
    const { sent } = await queuedTogether(() =>
      Promise.all([post(purchase(a.user), key), post(purchase(b.user), key)]),
    );
    const both = await sent;
    const first = both.find((r) => r.headers.get('x-idempotent-replay') === null)!;
    const second = both.find((r) => r !== first)!;
    expect(first.status).toBe(201);
    expect(second).toMatchObject({ status: 201, body: first.body });
    expect(second.headers.get('x-idempotent-replay')).toBe('true');
    expect(
      await count(db.pool, 'conversions WHERE telegram_user_id = ANY($1::bigint[])', [[a.user, b.user]]),
    ).toBe(1);
  });

  it('a server killed while a shared transaction waits on its writes: retries elsewhere neither lose nor double anything', async () => {
    const all = await Promise.all(Array.from({ length: MAX_BATCHES_IN_FLIGHT + 8 }, () => warmUser()));
    const blockers = all.slice(0, MAX_BATCHES_IN_FLIGHT).map((b) => b.user);
    const leads = all.slice(MAX_BATCHES_IN_FLIGHT);
    const keys = leads.map((_, i) => (i % 2 === 0 ? `crash-${Date.now()}-${i}` : undefined));
    const [slots, first, table] = [await db.pool.connect(), await db.pool.connect(), await db.pool.connect()];
    const server = spawnService('backend/main.ts', {
      DATABASE_URL: db.url,
      DATA_DIR: scratchDir('api-batch-crash'),
      SECRET_KEY: TEST_SECRET_KEY.toString('hex'),
      PORT: '0',
      WORKER: 'off',
    });
    try {
      const [, url] = await server.waitFor(/Capigram listening on (\S+)/);
      const remote = apiClient(url!);
      const send = (user: number, key?: string) =>
        void remote
          .post('/events/conversion', purchase(user), {
            key: tenant.accountKey,
            ...(key === undefined ? {} : { idempotencyKey: key }),
          })
          .catch(() => undefined);
      const relationWaiters = () =>
        count(db.pool, "pg_stat_activity WHERE datname = current_database() AND wait_event = 'relation'");
      // Both batch slots of the server wait on lead locks the test holds; the events queue behind them.
      await slots.query('BEGIN');
      for (const user of blockers) await lockLead(slots, tenant.accountId, user);
      await first.query('BEGIN');
      await lockLead(first, tenant.accountId, leads[0]!.user);
      const before = await advisoryWaiters();
      for (const [i, user] of blockers.entries()) {
        send(user);
        await waitUntil(async () => (await advisoryWaiters()) >= before + i + 1, 10_000, 'a slot taken');
      }
      leads.forEach(({ user }, i) => send(user, keys[i]));
      await new Promise((r) => setTimeout(r, 300));
      // The slots free up; the queued events leave as one transaction, which stops at the first's lock.
      await slots.query('COMMIT');
      await waitUntil(
        async () =>
          (await count(db.pool, 'conversions WHERE telegram_user_id = ANY($1::bigint[])', [blockers])) ===
          blockers.length,
        10_000,
        'the slot holders done',
      );
      await waitUntil(
        async () => (await advisoryWaiters()) === before + 1,
        10_000,
        'the shared transaction at the lock',
      );
      // It reads and decides, then stops at its writes; the server dies there.
      await table.query('BEGIN');
      await table.query('LOCK TABLE conversions IN SHARE MODE');
      await first.query('COMMIT');
      await waitUntil(
        async () => (await relationWaiters()) >= 1,
        10_000,
        'the shared transaction at its writes',
      );
      server.child.kill('SIGKILL');
      await server.exit();
      await table.query('COMMIT');
      // The orphaned transaction finishes (PostgreSQL may still commit it: its client is gone, not its work).
      await waitUntil(
        async () => (await relationWaiters()) === 0 && (await advisoryWaiters()) === before,
        10_000,
        'the orphan settled',
      );
    } finally {
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
      for (const c of [slots, first, table]) {
        await c.query('ROLLBACK').catch(() => undefined);
        c.release();
      }
    }
    const users = leads.map((l) => l.user);
    const left = await count(db.pool, 'conversions WHERE telegram_user_id = ANY($1::bigint[])', [users]);
    // All of the shared transaction or none of it.
    expect([0, leads.length]).toContain(left);
    // The clients retry on another server, with the same keys.
    const retries = await Promise.all(leads.map(({ user }, i) => post(purchase(user), keys[i])));
    for (const r of retries) expect([200, 201]).toContain(r.status);
    const { rows } = await db.pool.query<{ telegram_user_id: number; conversions: number; sends: number }>(
      `SELECT c.telegram_user_id, count(DISTINCT c.id)::int AS conversions, count(s.id)::int AS sends
       FROM conversions c LEFT JOIN sends s ON s.conversion_id = c.id
       WHERE c.telegram_user_id = ANY($1::bigint[]) GROUP BY c.telegram_user_id`,
      [users],
    );
    expect(rows).toHaveLength(leads.length);
    for (const r of rows) expect(r).toMatchObject({ conversions: 1, sends: 2 });
  });

  it('an event that waits too long for a transaction gets 503 UNAVAILABLE, and is never written', async () => {
    const { user } = await warmUser();
    t.deps.local.eventBatches.setQueueWait(500);
    try {
      const { sent, blockers } = await queuedTogether(async () => {
        const started = performance.now();
        const answer = await post(purchase(user));
        return { answer, waited: performance.now() - started };
      }, 1_000);
      const { answer, waited } = await sent;
      expect(answer).toMatchObject({ status: 503, body: { code: 'UNAVAILABLE' } });
      expect(waited).toBeGreaterThanOrEqual(450);
      for (const b of blockers) expect(b.status).toBe(201);
      expect(await count(db.pool, 'conversions WHERE telegram_user_id = $1', [user])).toBe(0);
      // Its retry goes through.
      expect((await post(purchase(user))).status).toBe(201);
    } finally {
      t.deps.local.eventBatches.setQueueWait(QUEUE_WAIT_MS);
    }
  });

  it('a lone event its rules refuse is answered from its one run, not run again', async () => {
    const outcomes = async () => {
      const text = await (await fetch(`${t.url}/metrics`)).text();
      const of = (outcome: string) =>
        Number(
          new RegExp(`^capigram_event_batch_events_count\\{outcome="${outcome}"\\} (\\S+)$`, 'm').exec(
            text,
          )?.[1] ?? 0,
        );
      return { refused: of('refused'), alone: of('ran_alone') };
    };
    const before = await outcomes();
    const answer = await post(purchase(newUser()));
    expect(answer).toMatchObject({ status: 400, body: { code: 'SITE_REQUIRED' } });
    expect(await outcomes()).toEqual({ refused: before.refused + 1, alone: before.alone });
  });

  it('the metrics count shared transactions by outcome and size', async () => {
    const text = await (await fetch(`${t.url}/metrics`)).text();
    const value = (series: string) =>
      Number(new RegExp(`^${series.replace(/[{}"+]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
    // The tests above: a transaction of twelve, one of 32, and the two refused ones that ran alone.
    expect(
      value('capigram_event_batch_events_bucket{le="32",outcome="committed"}') -
        value('capigram_event_batch_events_bucket{le="16",outcome="committed"}'),
    ).toBeGreaterThanOrEqual(1);
    expect(value('capigram_event_batch_events_sum{outcome="committed"}')).toBeGreaterThanOrEqual(12 + 32);
    expect(value('capigram_event_batch_events_count{outcome="ran_alone"}')).toBeGreaterThanOrEqual(2);
  });
});
