// The migrator knows its place: a database holding a migration this build does not know (a newer
// release migrated it) makes `npm start` and `npm run worker` exit 1 with the reason and
// `/readyz` answer 503; a migration that declares itself non-transactional builds its index
// CONCURRENTLY while inserts go on, and is safe to run again after a build that failed half-way.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  isNonTransactional,
  listMigrations,
  migrate,
  splitStatements,
  UnknownMigrationsError,
} from '../../backend/db/migrate.js';
import { startTestApp } from '../harness/app.js';
import { TEST_SECRET_KEY } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { spawnService } from '../harness/process.js';

const here = import.meta.dirname;
let db: TestDatabase;
const dataDir = mkdtempSync(join(tmpdir(), 'capigram-migrator-'));

beforeAll(async () => {
  db = await createTestDatabase(8);
});
afterAll(async () => {
  await db.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('a database migrated by a newer build', () => {
  let newer: TestDatabase;
  beforeAll(async () => {
    newer = await createTestDatabase(2);
    await newer.pool.query(
      `INSERT INTO capigram_migrations (version, name) VALUES (9990, '9990_from_a_later_release.sql')`,
    );
  });
  afterAll(async () => newer.drop());

  it('migrate() refuses it, naming the unknown migration', async () => {
    await expect(migrate(newer.pool)).rejects.toThrow(UnknownMigrationsError);
    await expect(migrate(newer.pool)).rejects.toThrow(/9990_from_a_later_release\.sql/);
  });

  it('/readyz answers 503 UNAVAILABLE with the reason', async () => {
    const app = await startTestApp(newer.pool);
    try {
      const res = await fetch(`${app.url}/readyz`);
      expect(res.status).toBe(503);
      const body = (await res.json()) as { code: string; detail?: string; message?: string };
      expect(body.code).toBe('UNAVAILABLE');
      expect(JSON.stringify(body)).toContain('9990_from_a_later_release.sql');
    } finally {
      await app.stop();
    }
  });

  it.each(['backend/main.ts', 'backend/worker-main.ts'])(
    '%s exits 1 with the reason',
    async (entry) => {
      const p = spawnService(entry, {
        DATABASE_URL: newer.url,
        DATA_DIR: dataDir,
        SECRET_KEY: TEST_SECRET_KEY.toString('hex'),
        HOST: '127.0.0.1',
        PORT: '0',
        WORKER: 'off',
      });
      expect(await p.exit()).toBe(1);
      expect(p.output()).toMatch(
        /failed to start: the database holds migrations this build does not know \(9990_from_a_later_release\.sql\)/,
      );
    },
    60_000,
  );
});

describe('non-transactional migrations', () => {
  it.each([
    { sql: '-- migrate: no transaction\nCREATE INDEX CONCURRENTLY a ON t (x);\n', nonTx: true, steps: 1 },
    {
      sql: '-- migrate: no transaction\n-- why\nCREATE INDEX CONCURRENTLY IF NOT EXISTS a ON t (x);\nDROP INDEX CONCURRENTLY IF EXISTS b; -- old\nANALYZE t;',
      nonTx: true,
      steps: 3,
    },
    { sql: '-- Adds a table.\nCREATE TABLE t (x int);', nonTx: false, steps: 1 },
    { sql: 'CREATE TABLE t (x int); -- migrate: no transaction', nonTx: false, steps: 1 },
  ])('marker and steps: $nonTx, $steps', ({ sql, nonTx, steps }) => {
    const m = { version: 1, name: '001_x.sql', sql };
    expect(isNonTransactional(m)).toBe(nonTx);
    expect(splitStatements(m)).toHaveLength(steps);
  });

  it('a $-quoted body is refused rather than split wrong', () => {
    expect(() =>
      splitStatements({
        version: 1,
        name: '001_fn.sql',
        sql: '-- migrate: no transaction\nCREATE FUNCTION f() RETURNS int AS $$ SELECT 1; $$ LANGUAGE sql;',
      }),
    ).toThrow(/\$-quoted/);
  });

  it('builds an index CONCURRENTLY while inserts go on', async () => {
    await db.pool.query(
      `CREATE TABLE probe_rows (id bigserial PRIMARY KEY, k int NOT NULL, at timestamptz NOT NULL)`,
    );
    await db.pool.query(
      `INSERT INTO probe_rows (k, at) SELECT g % 1000, now() - g * interval '1 second' FROM generate_series(1, 600000) g`,
    );
    let building = true;
    const commands = new Set<string>();
    const inserts: { start: number; end: number }[] = [];
    const writer = (async () => {
      while (building) {
        const start = performance.now();
        await db.pool.query(`INSERT INTO probe_rows (k, at) VALUES (1, now())`);
        inserts.push({ start, end: performance.now() });
      }
    })();
    const watcher = (async () => {
      while (building) {
        const { rows } = await db.pool.query<{ command: string }>(
          `SELECT command FROM pg_stat_progress_create_index WHERE relid = 'probe_rows'::regclass`,
        );
        for (const r of rows) commands.add(r.command);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const started = performance.now();
    const applied = await migrate(db.pool, [
      ...listMigrations(),
      ...listMigrations(join(here, 'migrations-concurrent')),
    ]);
    const ended = performance.now();
    building = false;
    await Promise.all([writer, watcher]);

    expect(applied).toEqual([9001]);
    expect(commands).toEqual(new Set(['CREATE INDEX CONCURRENTLY']));
    const during = inserts.filter((i) => i.start > started && i.end < ended);
    process.stdout.write(
      `concurrent index: built in ${Math.round(ended - started)} ms; ${during.length} inserts done meanwhile, the slowest ${Math.round(Math.max(...during.map((i) => i.end - i.start)))} ms\n`,
    );
    expect(during.length).toBeGreaterThan(10);
    const { rows } = await db.pool.query<{ valid: boolean }>(
      `SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = 'probe_rows_at'::regclass`,
    );
    expect(rows).toEqual([{ valid: true }]);
  }, 60_000);

  it('run again after a concurrent build failed: the INVALID index it left is dropped and built again', async () => {
    // A concurrent unique build on duplicates fails and leaves its index INVALID, as a crash would.
    await expect(
      db.pool.query('CREATE UNIQUE INDEX CONCURRENTLY probe_rows_k ON probe_rows (k)'),
    ).rejects.toThrow(/could not create unique index/);
    const validity = async () =>
      (
        await db.pool.query<{ valid: boolean }>(
          `SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = 'probe_rows_k'::regclass`,
        )
      ).rows;
    expect(await validity()).toEqual([{ valid: false }]);
    const all = [
      ...listMigrations(),
      ...listMigrations(join(here, 'migrations-concurrent')),
      ...listMigrations(join(here, 'migrations-rebuild')),
    ];
    expect(await migrate(db.pool, all)).toEqual([9002]);
    expect(await validity()).toEqual([{ valid: true }]);
    expect(await migrate(db.pool, all)).toEqual([]);
  }, 60_000);
});
