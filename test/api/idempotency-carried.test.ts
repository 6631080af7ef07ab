// The Idempotency-Key of the event endpoints costs no round trip of its own: a new key's claim,
// holding its answer, is written by the conversions' statement of the event's transaction (or,
// when the transaction writes no conversion, travels with its COMMIT), in the round trip of the
// COMMIT. What the answer holds that only that statement decides (the conversion's id, its
// capiStatus, its sends) is filled in there; the bytes stored are the bytes answered.
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_BATCHES_IN_FLIGHT } from '../../backend/db/transaction-batch.js';
import type { TestDatabase } from '../harness/db.js';
import type { TestApp } from '../harness/app.js';
import { waitUntil } from '../delivery/support.js';
import { apiWorld, count, lockLead, newUser, queuedBehind, type Tenant, warmLead } from './support.js';

const world = apiWorld({ connections: 20, tenant: { platforms: ['meta', 'tiktok'] } });
let db: TestDatabase;
let t: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  ({ db, t, tenant } = world);
  // Every claim written is noted with the query string that wrote it: the claims of an event's
  // transaction must come in the round trip that carries its COMMIT.
  await db.pool.query(`
    CREATE TABLE claim_queries (key text, query text);
    CREATE FUNCTION note_claim_query() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO claim_queries VALUES (NEW.key, current_query()); RETURN NEW; END $$;
    CREATE TRIGGER note_claim_query BEFORE INSERT ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION note_claim_query();`);
});

let keySeq = 0;
const freshKey = (tag: string) => `carried-${tag}-${Date.now()}-${keySeq++}`;
const purchase = (user: number, extra: Record<string, unknown> = {}) => ({
  telegramUserId: user,
  eventType: 'Purchase',
  value: 10,
  currency: 'USD',
  ...extra,
});

interface Raw {
  status: number;
  replay: boolean;
  text: string;
}

/** An event as sent and answered, byte for byte. */
async function post(body: unknown, idempotencyKey?: string): Promise<Raw> {
  const res = await fetch(`${t.url}/api/v1/events/conversion`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${tenant.accountKey}`,
      ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
    },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    replay: res.headers.get('x-idempotent-replay') === 'true',
    text: await res.text(),
  };
}

const advisoryWaiters = () =>
  count(db.pool, "pg_stat_activity WHERE datname = current_database() AND wait_event = 'advisory'");

/** `send`'s events queued behind both batch slots (held on lead locks), then leaving together. */
async function together<T>(send: () => T, events: number): Promise<T> {
  const blockers = await Promise.all(
    Array.from({ length: MAX_BATCHES_IN_FLIGHT }, () => warmLead(db.pool, tenant)),
  );
  const { sent } = await queuedBehind(db.pool, {
    hold: async (holder) => {
      for (const user of blockers) await lockLead(holder, tenant.accountId, user);
    },
    waiters: advisoryWaiters,
    blockers: blockers.map((user) => async () => {
      const r = await post(purchase(user));
      return { status: r.status, headers: new Headers(), body: {} };
    }),
    send,
    until: () => t.deps.local.eventBatches.waiting >= events,
  });
  return sent;
}

async function stored(key: string): Promise<{ status: number; text: string } | undefined> {
  const { rows } = await db.pool.query<{ status_code: number; response_body: { text: string } }>(
    'SELECT status_code, response_body FROM idempotency_keys WHERE api_key_id = $1 AND key = $2',
    [tenant.accountKeyId, key],
  );
  const row = rows[0];
  return row && { status: row.status_code, text: row.response_body.text };
}

async function claimQuery(key: string): Promise<string> {
  const { rows } = await db.pool.query<{ query: string }>('SELECT query FROM claim_queries WHERE key = $1', [
    key,
  ]);
  expect(rows).toHaveLength(1);
  return rows[0]!.query;
}

const conversionsOf = (users: number[]) =>
  count(db.pool, 'conversions WHERE telegram_user_id = ANY($1::bigint[])', [users]);

describe('a claim written with the event', () => {
  it('in one shared transaction, keyed events of every shape store the exact bytes they answered, written with the conversions', async () => {
    const warm = await warmLead(db.pool, tenant);
    const reused = await warmLead(db.pool, tenant);
    expect((await post(purchase(reused))).status).toBe(201);
    const [coldUnsent, coldWarned, plain] = [newUser(), newUser(), newUser()];
    const channel = { siteId: tenant.site.siteId, channelId: tenant.site.channels.main };
    const shapes = [
      // Created, with sends on both platforms.
      { tag: 'sent', body: purchase(warm) },
      // Created, nothing to send: no attribution signal (capiStatus skipped, a warning, no sends).
      { tag: 'unsent', body: { telegramUserId: coldUnsent, eventType: 'Lead', ...channel } },
      // Created with PII the platforms cannot use: piiWarnings beside the sends.
      {
        tag: 'warned',
        body: {
          telegramUserId: coldWarned,
          eventType: 'Lead',
          ...channel,
          pii: { email: 'lead@example.com', phone: '(650) 555-1212', country: 'GB' },
        },
      },
      // A recent match updated (200): an answer known before the write.
      { tag: 'reused', body: purchase(reused, { value: 12 }) },
    ].map((s) => ({ ...s, key: freshKey(s.tag) }));
    const answers = await together(
      () =>
        Promise.all([
          ...shapes.map((s) => post(s.body, s.key)),
          post({ telegramUserId: plain, eventType: 'Lead', ...channel, clientIp: '203.0.113.9' }),
        ]),
      shapes.length + 1,
    );
    expect(answers.map((a) => a.status)).toEqual([201, 201, 201, 200, 201]);
    const body = (i: number) => JSON.parse(answers[i]!.text) as Record<string, unknown>;
    expect(body(0)).toMatchObject({ capiStatus: 'pending', dispatched: true });
    expect(body(0).sends).toHaveLength(2);
    expect(body(1)).toMatchObject({ capiStatus: 'skipped', dispatched: false, sends: [] });
    expect(body(1).warning).toMatch(/no attribution signal/);
    expect(body(2)).toMatchObject({ dispatched: true, piiWarnings: [expect.stringMatching(/phone/)] });
    expect(body(3)).toMatchObject({ updatedExisting: true });

    for (const [i, s] of shapes.entries()) {
      expect(await stored(s.key)).toEqual({ status: answers[i]!.status, text: answers[i]!.text });
      // Claimed in the round trip that wrote the conversions and committed them.
      const query = await claimQuery(s.key);
      expect(query).toMatch(/^EXECUTE capigram_record_conversions_claiming\(/);
      expect(query).toMatch(/; COMMIT$/);
      const replay = await post({ ...(s.body as object), value: 99 }, s.key);
      expect(replay).toEqual({ status: answers[i]!.status, replay: true, text: answers[i]!.text });
    }
    expect(await conversionsOf([warm, coldUnsent, coldWarned, reused, plain])).toBe(5);
  });

  it('a lone keyed event claims its key in the round trip of its COMMIT too, with or without a conversion to write', async () => {
    const user = await warmLead(db.pool, tenant);
    const [created, reuse] = [freshKey('lone'), freshKey('lone-reuse')];
    const first = await post(purchase(user), created);
    const second = await post(purchase(user, { value: 11 }), reuse);
    expect([first.status, second.status]).toEqual([201, 200]);
    expect(await claimQuery(created)).toMatch(/^EXECUTE capigram_record_conversions_claiming\(.*; COMMIT$/s);
    expect(await claimQuery(reuse)).toMatch(/^EXECUTE capigram_idempotency_claims_with_work\(.*; COMMIT$/s);
    expect(await stored(created)).toEqual({ status: 201, text: first.text });
    expect(await stored(reuse)).toEqual({ status: 200, text: second.text });
  });

  it('two requests of one key queued together: one runs, the other replays its bytes', async () => {
    const [a, b] = [await warmLead(db.pool, tenant), await warmLead(db.pool, tenant)];
    const key = freshKey('twice');
    const other = freshKey('beside');
    const beside = await warmLead(db.pool, tenant);
    const [one, two, three] = await together(
      () =>
        Promise.all([
          post(purchase(a), key),
          post(purchase(b, { value: 20 }), key),
          post(purchase(beside), other),
        ]),
      3,
    );
    const [ran, replayed] = one!.replay ? [two!, one!] : [one!, two!];
    expect(ran).toMatchObject({ status: 201, replay: false });
    expect(replayed).toEqual({ status: 201, replay: true, text: ran.text });
    expect(three).toMatchObject({ status: 201, replay: false });
    expect(await conversionsOf([a, b])).toBe(1);
    expect(await stored(key)).toEqual({ status: 201, text: ran.text });
  });
});

describe('a key another server holds while the event is in flight', () => {
  /**
   * The key's row written, answer and all, by a transaction of the test's (another server's event,
   * in flight); the request with the key is sent, and the test's transaction ends with `end` once
   * the request's claim waits on it.
   */
  async function heldElsewhere(end: 'COMMIT' | 'ROLLBACK') {
    const user = await warmLead(db.pool, tenant);
    const key = freshKey(`elsewhere-${end}`);
    const theirs = JSON.stringify({
      conversionId: '00000000-0000-4000-8000-000000000001',
      from: 'elsewhere',
    });
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(
        `INSERT INTO idempotency_keys (api_key_id, key, created_at, status_code, response_body, completed_at, endpoint)
         VALUES ($1, $2, now(), 201, $3, now(), 'POST /api/v1/events/conversion')`,
        [tenant.accountKeyId, key, { contentType: 'application/json', text: theirs }],
      );
      const waiting = () =>
        count(
          db.pool,
          "pg_stat_activity WHERE datname = current_database() AND wait_event = 'transactionid'",
        );
      const before = await waiting();
      const sent = post(purchase(user), key);
      await waitUntil(async () => (await waiting()) > before, 10_000, 'the claim waiting on the held row');
      await holder.query(end);
      return { answer: await sent, theirs, user, key };
    } finally {
      holder.release();
    }
  }

  it('it commits: the event is rolled back and replays the answer it stored', async () => {
    const { answer, theirs, user } = await heldElsewhere('COMMIT');
    expect(answer).toEqual({ status: 201, replay: true, text: theirs });
    expect(await conversionsOf([user])).toBe(0);
  });

  it('it rolls back: the event runs, and its own answer is stored', async () => {
    const { answer, user, key } = await heldElsewhere('ROLLBACK');
    expect(answer).toMatchObject({ status: 201, replay: false });
    expect(await conversionsOf([user])).toBe(1);
    expect(await stored(key)).toEqual({ status: 201, text: answer.text });
  });
});
