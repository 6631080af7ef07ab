import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runMigrations } from 'graphile-worker';
import type { Pool, PoolClient } from './pool.js';

const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), 'migrations');
// Any constant works; it only has to be the same in every Capigram process.
const MIGRATION_LOCK = 727_361_001;

/**
 * The first line of a migration that must run outside a transaction (`CREATE INDEX CONCURRENTLY`
 * on a big table, which a transaction refuses): its statements run one by one, each its own step.
 */
export const NO_TRANSACTION_MARKER = '-- migrate: no transaction';

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

/** The database was migrated by a newer build: this one must not run on it. */
export class UnknownMigrationsError extends Error {
  constructor(readonly unknown: { version: number; name: string }[]) {
    super(
      `the database holds migrations this build does not know (${unknown.map((m) => m.name).join(', ')}): ` +
        'it was migrated by a newer Capigram; run that release (or a later one), or restore a backup taken before the upgrade',
    );
    this.name = 'UnknownMigrationsError';
  }
}

export function isNonTransactional(m: Migration): boolean {
  return m.sql.split('\n', 1)[0]!.trim().toLowerCase() === NO_TRANSACTION_MARKER;
}

/**
 * The statements of a non-transactional migration: split at each `;` that ends a line. Such a
 * migration holds plain statements only (index builds, `ALTER … SET`), never a dollar-quoted body,
 * which could hold such a `;`: one is refused rather than split wrong.
 */
export function splitStatements(m: Migration): string[] {
  if (m.sql.includes('$'))
    throw new Error(`migration ${m.name}: a non-transactional migration cannot hold $-quoted text`);
  return m.sql
    .split(/;[ \t]*(?:--[^\n]*)?(?:\r?\n|$)/)
    .map((s) =>
      s
        .split('\n')
        .filter((line) => !line.trim().startsWith('--'))
        .join('\n')
        .trim(),
    )
    .filter((s) => s !== '');
}

const CONCURRENT_INDEX =
  /^create\s+(?:unique\s+)?index\s+concurrently\s+(?:if\s+not\s+exists\s+)?("?)([\w$]+)\1\s+on\s+(?:only\s+)?(?:("?)([\w$]+)\3\.)?/i;

/**
 * Applies pending migrations, each in its own transaction, or statement by statement when it
 * declares itself non-transactional. A session-level advisory lock makes concurrent starts (several
 * web and worker processes at once) wait for each other instead of racing; whoever gets the lock
 * second finds nothing left to do. A database that holds a migration this build does not know is
 * refused (`UnknownMigrationsError`): a newer release changed it, and this one's queries may no
 * longer fit it.
 */
export async function migrate(pool: Pool, migrations = listMigrations()): Promise<number[]> {
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    // A migration may build an index on a big table, and a start waits here for another start's
    // migrations: neither is bounded by the pool's statement and lock timeouts (this connection
    // is discarded afterwards, so the settings go with it).
    await client.query(`SET statement_timeout = 0; SET lock_timeout = 0`);
    await takeMigrationLock(client);
    await client.query(`CREATE TABLE IF NOT EXISTS capigram_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const { rows } = await client.query<{ version: number; name: string }>(
      'SELECT version, name FROM capigram_migrations ORDER BY version',
    );
    const known = new Set(migrations.map((m) => m.version));
    const unknown = rows.filter((r) => !known.has(r.version));
    if (unknown.length > 0) throw new UnknownMigrationsError(unknown);
    const done = new Set(rows.map((r) => r.version));
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      try {
        if (isNonTransactional(m)) await applyStepByStep(client, m);
        else {
          await client.query('BEGIN');
          await client.query(m.sql);
          await record(client, m);
          await client.query('COMMIT');
        }
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw new Error(`migration ${m.name} failed: ${(err as Error).message}`);
      }
      applied.push(m.version);
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    // Never back to the pool with the timeouts turned off.
    client.release(true);
  }
  // graphile-worker keeps its own schema and locks its own migrations.
  await runMigrations({ pgPool: pool });
  return applied;
}

/**
 * Waits for the migration lock by trying, not by blocking in `pg_advisory_lock`: a session blocked
 * in a statement holds a snapshot, and `CREATE INDEX CONCURRENTLY` in the lock holder's migration
 * waits for every older snapshot to go, which would be a deadlock between the two.
 */
async function takeMigrationLock(client: PoolClient): Promise<void> {
  for (;;) {
    const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [
      MIGRATION_LOCK,
    ]);
    if (rows[0]?.ok) return;
    await new Promise((r) => setTimeout(r, 100 + Math.random() * 100));
  }
}

async function record(client: PoolClient, m: Migration): Promise<void> {
  await client.query('INSERT INTO capigram_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
}

/**
 * A non-transactional migration: each statement alone, then the record. A crash part-way leaves
 * the migration unrecorded, so the next start runs every statement again: they must be written to
 * be repeatable (`IF NOT EXISTS`), and an index a crashed `CREATE INDEX CONCURRENTLY` left INVALID
 * (which `IF NOT EXISTS` would take for done) is dropped first and built again.
 */
async function applyStepByStep(client: PoolClient, m: Migration): Promise<void> {
  for (const statement of splitStatements(m)) {
    const index = CONCURRENT_INDEX.exec(statement);
    if (index) await dropInvalidIndex(client, index[2]!, index[4]);
    await client.query(statement);
  }
  await record(client, m);
}

async function dropInvalidIndex(client: PoolClient, name: string, schema: string | undefined): Promise<void> {
  const { rows } = await client.query<{ qualified: string }>(
    `SELECT format('%I.%I', n.nspname, c.relname) AS qualified
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_index i ON i.indexrelid = c.oid
     WHERE c.relname = $1 AND n.nspname = COALESCE($2, current_schema()) AND NOT i.indisvalid`,
    [name, schema ?? null],
  );
  for (const r of rows) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS ${r.qualified}`);
}

/** What the database holds against what this build knows (the readiness check). */
export async function migrationState(
  pool: Pick<Pool, 'query'>,
  migrations = listMigrations(),
): Promise<{ pending: number; unknown: string[] }> {
  const { rows } = await pool.query<{ version: number; name: string }>(
    'SELECT version, name FROM capigram_migrations',
  );
  const applied = new Set(rows.map((r) => r.version));
  const known = new Set(migrations.map((m) => m.version));
  return {
    pending: migrations.filter((m) => !applied.has(m.version)).length,
    unknown: rows.filter((r) => !known.has(r.version)).map((r) => r.name),
  };
}

/** True when every migration in the repo has been applied and none the repo does not know. */
export async function migrationsApplied(
  pool: Pick<Pool, 'query'>,
  migrations = listMigrations(),
): Promise<boolean> {
  const state = await migrationState(pool, migrations);
  return state.pending === 0 && state.unknown.length === 0;
}
