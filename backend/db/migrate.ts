import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runMigrations } from 'graphile-worker';
import type { Pool } from './pool.js';

const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), 'migrations');
// Any constant works; it only has to be the same in every Capigram process.
const MIGRATION_LOCK = 727_361_001;

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export function listMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{3,}_[\w-]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: Number(f.split('_')[0]), name: f, sql: readFileSync(join(dir, f), 'utf8') }));
}

/**
 * Applies pending migrations, each in its own transaction. A session-level advisory lock makes
 * concurrent starts (several web and worker processes at once) wait for each other instead of
 * racing; whoever gets the lock second finds nothing left to do.
 */
export async function migrate(pool: Pool, migrations = listMigrations()): Promise<number[]> {
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query(`CREATE TABLE IF NOT EXISTS capigram_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const { rows } = await client.query<{ version: number }>('SELECT version FROM capigram_migrations');
    const done = new Set(rows.map((r) => r.version));
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      try {
        await client.query('BEGIN');
        await client.query(m.sql);
        await client.query('INSERT INTO capigram_migrations (version, name) VALUES ($1, $2)', [
          m.version,
          m.name,
        ]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw new Error(`migration ${m.name} failed: ${(err as Error).message}`);
      }
      applied.push(m.version);
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    client.release();
  }
  // graphile-worker keeps its own schema and locks its own migrations.
  await runMigrations({ pgPool: pool });
  return applied;
}

/** True when every migration in the repo has been applied (the readiness check). */
export async function migrationsApplied(pool: Pool, migrations = listMigrations()): Promise<boolean> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM capigram_migrations WHERE version = ANY($1::int[])`,
    [migrations.map((m) => m.version)],
  );
  return rows[0]?.n === migrations.length;
}
