import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMigrations, migrate, migrationsApplied } from '../../backend/db/migrate.js';
import { createPool } from '../../backend/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => db.drop());

describe('migrations', () => {
  it('the template is fully migrated and covers every entity of the spec', async () => {
    expect(await migrationsApplied(db.pool)).toBe(true);
    const { rows } = await db.pool.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`,
    );
    const tables = rows.map((r) => r.table_name);
    for (const t of [
      'accounts',
      'api_keys',
      'sites',
      'bots',
      'channels',
      'pixels',
      'visits',
      'invitations',
      'leads',
      'memberships',
      'conversions',
      'sends',
      'idempotency_keys',
      'telegram_updates',
    ])
      expect(tables).toContain(t);
    const gw = await db.pool.query(
      `SELECT 1 FROM information_schema.schemata WHERE schema_name = 'graphile_worker'`,
    );
    expect(gw.rowCount).toBe(1);
  });

  it('running them again applies nothing', async () => {
    expect(await migrate(db.pool)).toEqual([]);
  });

  it('concurrent runs on a fresh database apply each migration exactly once', async () => {
    const fresh = await createTestDatabase();
    // Start from an empty schema, as a brand-new deployment would.
    await fresh.pool.query(
      'DROP SCHEMA public CASCADE; CREATE SCHEMA public; DROP SCHEMA graphile_worker CASCADE',
    );
    const pools = [0, 1, 2, 3].map(() => createPool(fresh.url, 2));
    const results = await Promise.all(pools.map((p) => migrate(p)));
    await Promise.all(pools.map((p) => p.end()));
    const all = results.flat().sort((a, b) => a - b);
    expect(all).toEqual(listMigrations().map((m) => m.version));
    const { rows } = await fresh.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM capigram_migrations',
    );
    expect(rows[0]!.n).toBe(listMigrations().length);
    await fresh.drop();
  });

  it('a failing migration rolls back and names itself', async () => {
    const bad = [
      {
        version: 9999,
        name: '9999_broken.sql',
        sql: 'CREATE TABLE half_done (id int); SELECT nope FROM nowhere;',
      },
    ];
    await expect(migrate(db.pool, [...listMigrations(), ...bad])).rejects.toThrow(/9999_broken\.sql/);
    const { rowCount } = await db.pool.query(
      `SELECT 1 FROM information_schema.tables WHERE table_name = 'half_done'`,
    );
    expect(rowCount).toBe(0);
  });
});
