// Retention (RETENTION_DAYS): raw identifiers of old visits and conversions erased in small batches,
// finished sends deleted, run from graphile-worker's cron and resumed after a crash mid-batch.
import { parseCrontab } from 'graphile-worker';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../backend/config.js';
import { runRetention } from '../../backend/domain/erasure/retention.js';
import { VISIT_RAW_FIELDS } from '../../backend/domain/erasure/fields.js';
import { CRONTAB, TASKS } from '../../backend/worker/tasks/index.js';
import { seedTenant, type Tenant } from '../api/support.js';
import { startTestApp, testClock, testDeps } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

const DAY = 86_400_000;
const NOW = new Date('2026-06-01T12:00:00Z');
const DAYS = 30;
const CUTOFF = NOW.getTime() - DAYS * DAY;

let db: TestDatabase;
let tenant: Tenant;
let pixelId: string;

beforeAll(async () => {
  db = await createTestDatabase();
  tenant = await seedTenant(db.pool, testDeps(db.pool).box);
  pixelId = (await db.pool.query('SELECT id FROM pixels WHERE site_id = $1', [tenant.site.siteId])).rows[0]
    .id;
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.pool.query(
    'DELETE FROM entry_clicks; DELETE FROM sends; DELETE FROM conversions; DELETE FROM visits; DELETE FROM retention_progress',
  );
});

const FULL = `'198.51.100.1', 'UA', 'https://s.example.com/?gclid=G', 'https://s.example.com/', 'https://r.example.org/', 'fbc', 'fbp', 'G', 'GB', 'WB', 'TT', 'SC', 'TTP', 'SCID', 'meta'`;

/** Visits at the given ages (ms before NOW), every raw field set; returns their ids in order. */
async function visitsAt(ages: number[]): Promise<string[]> {
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO visits (site_id, temp_id, session_id, client_ip, user_agent, href, landing_page, referrer, fbc, fbp, gclid, gbraid, wbraid, ttclid, sccid, ttp, scid, utm_source, created_at)
     SELECT $1, gen_random_uuid(), gen_random_uuid(), ${FULL}, $2::timestamptz - a * interval '1 millisecond'
     FROM unnest($3::bigint[]) WITH ORDINALITY AS u(a, i) ORDER BY i RETURNING id`,
    [tenant.site.siteId, NOW, ages],
  );
  return rows.map((r) => r.id);
}

async function rawVisits(): Promise<Set<string>> {
  const { rows } = await db.pool.query<{ id: string }>(`SELECT id FROM visits WHERE client_ip IS NOT NULL`);
  return new Set(rows.map((r) => r.id));
}

describe('retention', () => {
  it('erases exactly the rows past the limit, every raw field of them, and nothing else', async () => {
    const old = await visitsAt([DAYS * DAY + 1, DAYS * DAY + 60_000, 40 * DAY, 400 * DAY, 3 * 365 * DAY]);
    const young = await visitsAt([DAYS * DAY - 1, DAYS * DAY - 60_000, DAY, 0]);
    const conv = await db.pool.query<{ id: string; received_at: Date }>(
      `INSERT INTO conversions (site_id, telegram_user_id, visit_id, event_type, value, currency, event_time, attributed_at, received_at, source, pii_hashed, client_ip, user_agent, event_source_url, api_visit_override)
       SELECT $1, 42, v, 'Purchase', 10, 'EUR', t, t, t, 'api', '{"em":"ab"}', '198.51.100.1', 'UA', 'https://s.example.com/t', '{"fbc":"x"}'
       FROM unnest($2::uuid[], $3::timestamptz[]) AS u(v, t) RETURNING id, received_at`,
      [tenant.site.siteId, [old[0], young[0]], [new Date(CUTOFF - 1000), new Date(CUTOFF + 1000)]],
    );
    const [oldConv, youngConv] = conv.rows.map((r) => r.id);
    // Sends: finished and old go; pending old and finished young stay.
    const send = async (visitId: string, status: string, ageMs: number) =>
      (
        await db.pool.query(
          `INSERT INTO sends (visit_id, pixel_id, platform, event_id, status, created_at) VALUES ($1, $2, 'meta', gen_random_uuid()::text, $3, $4) RETURNING id`,
          [visitId, pixelId, status, new Date(NOW.getTime() - ageMs)],
        )
      ).rows[0].id as string;
    const gone = [
      await send(old[1]!, 'sent', 40 * DAY),
      await send(old[2]!, 'failed', 40 * DAY),
      await send(old[3]!, 'skipped', 400 * DAY),
    ];
    const kept = [await send(old[4]!, 'pending', 40 * DAY), await send(young[0]!, 'sent', DAY)];

    const out = await runRetention(db.pool, NOW, { days: DAYS, batch: 2 });
    expect(out).toEqual({
      cleared: { visits: 5, conversions: 1, entry_clicks_unused: 0, entry_clicks: 0 },
      sendsDeleted: 3,
      done: true,
      seconds: {
        visits: expect.any(Number),
        conversions: expect.any(Number),
        entry_clicks_unused: expect.any(Number),
        entry_clicks: expect.any(Number),
        sends: expect.any(Number),
      },
    });

    expect(await rawVisits()).toEqual(new Set(young));
    const { rows } = await db.pool.query(`SELECT * FROM visits WHERE id = ANY($1::uuid[])`, [old]);
    for (const v of rows) {
      for (const col of [
        'client_ip',
        'user_agent',
        'href',
        'landing_page',
        'referrer',
        'fbc',
        'fbp',
        'gclid',
        'gbraid',
        'wbraid',
        'ttclid',
        'sccid',
        'ttp',
        'scid',
        ...Object.keys(VISIT_RAW_FIELDS),
      ]) {
        expect(v[col], col).toBeNull();
      }
      expect(v.utm_source).toBe('meta');
    }
    const { rows: young1 } = await db.pool.query(`SELECT * FROM visits WHERE id = ANY($1::uuid[])`, [young]);
    for (const v of young1)
      expect(v).toMatchObject({
        client_ip: '198.51.100.1',
        user_agent: 'UA',
        gclid: 'G',
        sccid: 'SC',
        referrer: 'https://r.example.org/',
      });

    const c = Object.fromEntries(
      (
        await db.pool.query(
          `SELECT id, client_ip, user_agent, event_source_url, api_visit_override, pii_hashed, value FROM conversions`,
        )
      ).rows.map((r) => [r.id, r]),
    );
    expect(c[oldConv!]).toMatchObject({
      client_ip: null,
      user_agent: null,
      event_source_url: null,
      api_visit_override: null,
      value: 10,
    });
    expect(c[youngConv!]).toMatchObject({
      client_ip: '198.51.100.1',
      user_agent: 'UA',
      event_source_url: 'https://s.example.com/t',
      api_visit_override: { fbc: 'x' },
    });

    const { rows: sends } = await db.pool.query<{ id: string }>('SELECT id FROM sends');
    expect(new Set(sends.map((s) => s.id))).toEqual(new Set(kept));
    expect(gone.every((id) => !sends.some((s) => s.id === id))).toBe(true);

    // Progress is kept; a second run finds nothing; the counts are what they were.
    const { rows: progress } = await db.pool.query(
      'SELECT target, done_before FROM retention_progress ORDER BY target',
    );
    expect(progress).toEqual(
      ['conversions', 'entry_clicks', 'entry_clicks_unused', 'visits'].map((target) => ({
        target,
        done_before: new Date(CUTOFF),
      })),
    );
    expect(await runRetention(db.pool, NOW, { days: DAYS, batch: 2 })).toMatchObject({
      cleared: { visits: 0, conversions: 0, entry_clicks_unused: 0, entry_clicks: 0 },
      sendsDeleted: 0,
      done: true,
    });
    expect((await db.pool.query('SELECT count(*)::int AS n FROM visits')).rows[0].n).toBe(9);
  });

  it('gets through many rows of one instant, more than a batch, and a day later takes the next day only', async () => {
    const same = await visitsAt(Array.from({ length: 7 }, () => 50 * DAY));
    const next = await visitsAt([DAYS * DAY - DAY / 2]);
    expect((await runRetention(db.pool, NOW, { days: DAYS, batch: 3 })).cleared.visits).toBe(7);
    expect([...(await rawVisits())]).toEqual(next);
    const tomorrow = new Date(NOW.getTime() + DAY);
    expect((await runRetention(db.pool, tomorrow, { days: DAYS, batch: 3 })).cleared.visits).toBe(1);
    expect((await rawVisits()).size).toBe(0);
    expect(same.length).toBe(7);
  });

  it('stops when its time is up and resumes where it stopped', async () => {
    await visitsAt(Array.from({ length: 10 }, (_, i) => 100 * DAY - i * 60_000));
    const first = await runRetention(db.pool, NOW, { days: DAYS, batch: 2, until: Date.now() - 1 });
    expect(first.done).toBe(false);
    expect((await rawVisits()).size).toBe(10);
    expect(await runRetention(db.pool, NOW, { days: DAYS, batch: 2 })).toMatchObject({
      cleared: { visits: 10 },
      done: true,
    });
  });
});

/** Runs `change` in a transaction that stays open until the retention run below waits for its lock. */
async function changedWhileWaiting<T>(change: string, params: unknown[], run: () => Promise<T>): Promise<T> {
  const holder = await db.pool.connect();
  try {
    await holder.query('BEGIN');
    await holder.query(change, params);
    const out = run();
    const deadline = Date.now() + 10_000;
    for (;;) {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
      );
      if (rows[0]!.n > 0) break;
      if (Date.now() > deadline) throw new Error('the retention run never waited for the held row');
      await new Promise((r) => setTimeout(r, 20));
    }
    await holder.query('COMMIT');
    return await out;
  } finally {
    holder.release();
  }
}

describe('retention beside other writers', () => {
  it('leaves what another transaction wrote into a row it waited for, and comes back for the row', async () => {
    const old = await visitsAt(Array.from({ length: 6 }, (_, i) => 50 * DAY - i * 60_000));
    // A late write to the second visit of the first batch (a retried track/init, say) holds it.
    const out = await changedWhileWaiting(
      `UPDATE visits SET utm_source = 'late', client_ip = '203.0.113.9' WHERE id = $1`,
      [old[1]],
      () => runRetention(db.pool, NOW, { days: DAYS, batch: 3 }),
    );
    expect(out).toMatchObject({ cleared: { visits: 6 }, done: true });
    expect((await rawVisits()).size).toBe(0);
    const { rows } = await db.pool.query(`SELECT utm_source FROM visits WHERE id = $1`, [old[1]]);
    expect(rows[0].utm_source).toBe('late');
    const { rows: progress } = await db.pool.query(
      `SELECT done_before FROM retention_progress WHERE target = 'visits'`,
    );
    expect(progress[0].done_before).toEqual(new Date(CUTOFF));
  });

  it('deletes finished sends batch after batch, and keeps one retried by hand while it waited for it', async () => {
    const visits = await visitsAt(Array.from({ length: 11 }, () => DAY));
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO sends (visit_id, pixel_id, platform, event_id, status, created_at)
       SELECT v, $2, 'meta', 'e' || i, CASE WHEN i % 3 = 0 THEN 'failed' ELSE 'sent' END, $3::timestamptz - i * interval '1 minute'
       FROM unnest($1::uuid[]) WITH ORDINALITY AS u(v, i) ORDER BY i RETURNING id`,
      [visits, pixelId, new Date(NOW.getTime() - 40 * DAY)],
    );
    // Sent, in the third of the sent ones' batches (oldest first: 11 10 | 8 7 | 5 4 | 2 1): the
    // batches after it go on.
    const retried = rows[4]!.id;
    const out = await changedWhileWaiting(
      `UPDATE sends SET status = 'pending', attempts = 0 WHERE id = $1`,
      [retried],
      () => runRetention(db.pool, NOW, { days: DAYS, batch: 2 }),
    );
    expect(out).toMatchObject({ sendsDeleted: 10, done: true });
    const { rows: left } = await db.pool.query('SELECT id, status FROM sends');
    expect(left).toEqual([{ id: retried, status: 'pending' }]);
  });
});

describe('entry clicks', () => {
  /** Entry clicks at the given ages (ms before NOW), each with its own visit; `used` ones tied to a Telegram user a minute later. */
  async function clicksAt(entryId: string, clicks: { age: number; used: boolean }[]): Promise<string[]> {
    const visits = await visitsAt(clicks.map((c) => c.age));
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO entry_clicks (entry_id, site_id, visit_id, payload, created_at, used_by, used_at, used_through)
       SELECT $1, $2, v, replace(gen_random_uuid()::text, '-', ''), $3::timestamptz - a * interval '1 millisecond',
         CASE WHEN u THEN 777000000 + i END, CASE WHEN u THEN $3::timestamptz - a * interval '1 millisecond' + interval '1 minute' END, CASE WHEN u THEN 'start' END
       FROM unnest($4::uuid[], $5::bigint[], $6::boolean[]) WITH ORDINALITY AS x(v, a, u, i) ORDER BY i RETURNING id`,
      [entryId, tenant.site.siteId, NOW, visits, clicks.map((c) => c.age), clicks.map((c) => c.used)],
    );
    return rows.map((r) => r.id);
  }

  it('deletes exactly the unused clicks past the limit, and takes only the payload of the used ones', async () => {
    const { rows: bots } = await db.pool.query<{ id: string }>('SELECT id FROM bots WHERE account_id = $1', [
      tenant.accountId,
    ]);
    const { rows: entries } = await db.pool.query<{ id: string }>(
      'INSERT INTO entries (site_id, bot_id) VALUES ($1, $2) RETURNING id',
      [tenant.site.siteId, bots[0]!.id],
    );
    const [oldUnused1, oldUnused2, youngUnused1, youngUnused2, oldUsed, youngUsed] = await clicksAt(
      entries[0]!.id,
      [
        { age: DAYS * DAY + 1, used: false },
        { age: 400 * DAY, used: false },
        { age: DAYS * DAY - 1, used: false },
        { age: 0, used: false },
        { age: DAYS * DAY + 60_000, used: true },
        { age: DAYS * DAY - 60_000, used: true },
      ],
    );
    const before = await db.pool.query(
      'SELECT id, visit_id, used_by, used_at, used_through FROM entry_clicks WHERE id = $1',
      [oldUsed],
    );

    const out = await runRetention(db.pool, NOW, { days: DAYS, batch: 1 });
    expect(out.cleared).toMatchObject({ entry_clicks_unused: 2, entry_clicks: 1 });
    const { rows } = await db.pool.query<{ id: string; has_payload: boolean }>(
      'SELECT id, payload IS NOT NULL AS has_payload FROM entry_clicks ORDER BY created_at',
    );
    expect(rows.map((r) => [r.id, r.has_payload])).toEqual([
      [oldUsed, false],
      [youngUnused1, true],
      [youngUsed, true],
      [youngUnused2, true],
    ]);
    expect(rows.map((r) => r.id)).not.toContain(oldUnused1);
    expect(rows.map((r) => r.id)).not.toContain(oldUnused2);
    // The tie stays whole: its visit, user and time are the lead's history.
    expect(
      (
        await db.pool.query(
          'SELECT id, visit_id, used_by, used_at, used_through FROM entry_clicks WHERE id = $1',
          [oldUsed],
        )
      ).rows,
    ).toEqual(before.rows);
    // A second run has nothing left to do.
    expect((await runRetention(db.pool, NOW, { days: DAYS })).cleared).toMatchObject({
      entry_clicks_unused: 0,
      entry_clicks: 0,
    });
  });
});

describe('RETENTION_DAYS', () => {
  it('defaults to 400 days and refuses what is not a whole number of days', () => {
    const base = { SECRET_KEY: '5e'.repeat(32), PUBLIC_URL: 'https://capigram.example.com' };
    expect(loadConfig(base).RETENTION_DAYS).toBe(400);
    expect(loadConfig({ ...base, RETENTION_DAYS: '30' }).RETENTION_DAYS).toBe(30);
    for (const bad of ['0', '-1', '1.5', 'abc', '99999'])
      expect(() => loadConfig({ ...base, RETENTION_DAYS: bad }), bad).toThrow(ConfigError);
  });
});

describe('retention under graphile-worker', () => {
  it('is on the cron, hourly, in a form graphile-worker parses', () => {
    expect(CRONTAB).toMatch(new RegExp(`^23 \\* \\* \\* \\* ${TASKS.retention} `, 'm'));
    expect(parseCrontab(CRONTAB).map((i) => i.task)).toContain(TASKS.retention);
  });

  it('survives a crash in the middle of a batch: the batch is lost whole, the next run finishes exactly the expired rows', async () => {
    const clock = testClock();
    clock.set(NOW.getTime());
    const env = { RETENTION_DAYS: String(DAYS) };
    const old = await visitsAt(Array.from({ length: 30 }, (_, i) => 60 * DAY - i * 60_000));
    const young = await visitsAt([DAY, 2 * DAY]);

    // A transaction of the test holds one expired row: the job's batch waits on it.
    const holder = await db.pool.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM visits WHERE id = $1 FOR UPDATE', [old[0]]);
    let app = await startTestApp(db.pool, { worker: true, clock, env });
    await db.pool.query(`SELECT graphile_worker.add_job($1, '{}'::json)`, [TASKS.retention]);
    const deadline = Date.now() + 15_000;
    let pid: number | undefined;
    while (pid === undefined && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      const { rows } = await db.pool.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%EXECUTE retention_visits%' AND pid <> pg_backend_pid()`,
      );
      pid = rows[0]?.pid;
    }
    expect(pid).toBeDefined();
    // The worker's connection dies mid-batch (as with a killed process); then the process restarts.
    await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    await holder.query('ROLLBACK');
    holder.release();
    expect((await rawVisits()).size).toBe(32);
    await app.stop();

    app = await startTestApp(db.pool, { worker: true, clock, env });
    // The failed job is retried by graphile-worker after its backoff (a few seconds).
    const until = Date.now() + 20_000;
    while ((await rawVisits()).size > 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    expect(await rawVisits()).toEqual(new Set(young));
    const { rows: progress } = await db.pool.query(
      `SELECT done_before FROM retention_progress WHERE target = 'visits'`,
    );
    expect(progress[0].done_before).toEqual(new Date(CUTOFF));
    await app.stop();
  });
});
