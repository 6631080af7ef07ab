// Migration 180: time-ordered ids for the high-volume tables, and one index on visitRequestId.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMigrations, migrate } from '../../backend/db/migrate.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase(2);
});
afterAll(async () => db.drop());

/** The Unix milliseconds a version 7 UUID carries in its first 48 bits. */
function millisOf(id: string): number {
  return Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16);
}

async function siteOf(d: TestDatabase, name: string): Promise<string> {
  const {
    rows: [account],
  } = await d.pool.query<{ id: string }>(`INSERT INTO accounts (name) VALUES ($1) RETURNING id`, [name]);
  const {
    rows: [site],
  } = await d.pool.query<{ id: string }>(
    `INSERT INTO sites (account_id, name, website_id, domains) VALUES ($1, $2, $3, ARRAY['m.example.com']) RETURNING id`,
    [account!.id, name, `ws_${name}_${randomUUID().slice(0, 8)}`],
  );
  return site!.id;
}

describe('capigram_uuid_v7', () => {
  it('is a version 7, RFC 9562 variant UUID carrying the time it was made', async () => {
    const before = Date.now();
    const { rows } = await db.pool.query<{ id: string }>(
      'SELECT capigram_uuid_v7()::text AS id FROM generate_series(1, 2000)',
    );
    const after = Date.now();
    const ids = rows.map((r) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) {
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      // The database's clock and ours are one machine's: allow a little rounding either side.
      expect(millisOf(id)).toBeGreaterThanOrEqual(before - 5);
      expect(millisOf(id)).toBeLessThanOrEqual(after + 5);
    }
  });

  it('orders ids made in different milliseconds by their time', async () => {
    const first = (await db.pool.query<{ id: string }>('SELECT capigram_uuid_v7()::text AS id')).rows[0]!.id;
    await new Promise((r) => setTimeout(r, 5));
    const second = (await db.pool.query<{ id: string }>('SELECT capigram_uuid_v7()::text AS id')).rows[0]!.id;
    expect(millisOf(second)).toBeGreaterThan(millisOf(first));
    expect(second > first).toBe(true);
  });

  it('is the id of new visits, sends, conversions and memberships', async () => {
    const { rows } = await db.pool.query<{ table_name: string; column_default: string }>(
      `SELECT table_name, column_default FROM information_schema.columns
        WHERE table_schema = 'public' AND column_name = 'id' AND table_name = ANY($1)`,
      [['visits', 'sends', 'conversions', 'memberships']],
    );
    expect(rows).toHaveLength(4);
    for (const r of rows) expect(r.column_default).toBe('capigram_uuid_v7()');
    const site = await siteOf(db, 'v7');
    const {
      rows: [visit],
    } = await db.pool.query<{ id: string }>(
      `INSERT INTO visits (site_id, temp_id, session_id) VALUES ($1, $2, $3) RETURNING id::text`,
      [site, randomUUID(), randomUUID()],
    );
    expect(visit!.id[14]).toBe('7');
  });
});

describe('migration 180: one unique index on visit_request_id', () => {
  it('refuses one visitRequestId on two sites, and keeps it free where it is absent', async () => {
    const [a, b] = [await siteOf(db, 'ua'), await siteOf(db, 'ub')];
    const rid = randomUUID();
    const insert = (site: string, requestId: string | null) =>
      db.pool.query(
        `INSERT INTO visits (site_id, temp_id, session_id, visit_request_id) VALUES ($1, $2, $3, $4)`,
        [site, randomUUID(), randomUUID(), requestId],
      );
    await insert(a, rid);
    await expect(insert(b, rid)).rejects.toMatchObject({ code: '23505' });
    await insert(a, null);
    await insert(b, null);
    const { rows } = await db.pool.query<{ indexname: string }>(
      `SELECT indexname FROM pg_indexes WHERE tablename = 'visits' AND indexdef LIKE '%visit_request_id%'`,
    );
    expect(rows.map((r) => r.indexname)).toEqual(['visits_request']);
  });

  it('an id two sites took in a race stays with the earlier visit; the later keeps its row without it', async () => {
    const fresh = await createTestDatabase(2);
    try {
      await fresh.pool.query(
        'DROP SCHEMA public CASCADE; CREATE SCHEMA public; DROP SCHEMA graphile_worker CASCADE',
      );
      const all = listMigrations();
      await migrate(
        fresh.pool,
        all.filter((m) => m.version < 180),
      );
      const [a, b] = [await siteOf(fresh, 'ra'), await siteOf(fresh, 'rb')];
      const rid = randomUUID();
      const other = randomUUID();
      const visit = async (site: string, requestId: string, at: string) =>
        (
          await fresh.pool.query<{ id: string }>(
            `INSERT INTO visits (site_id, temp_id, session_id, visit_request_id, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
            [site, randomUUID(), randomUUID(), requestId, at],
          )
        ).rows[0]!.id;
      const earlier = await visit(b, rid, '2026-01-01T00:00:00Z');
      const later = await visit(a, rid, '2026-01-02T00:00:00Z');
      const alone = await visit(a, other, '2026-01-03T00:00:00Z');
      expect(await migrate(fresh.pool, all)).toEqual(
        all.filter((m) => m.version >= 180).map((m) => m.version),
      );
      const { rows } = await fresh.pool.query<{ id: string; visit_request_id: string | null }>(
        'SELECT id, visit_request_id FROM visits',
      );
      const byId = new Map(rows.map((r) => [r.id, r.visit_request_id]));
      expect(byId.size).toBe(3);
      expect(byId.get(earlier)).toBe(rid);
      expect(byId.get(later)).toBeNull();
      expect(byId.get(alone)).toBe(other);
    } finally {
      await fresh.drop();
    }
  });
});
