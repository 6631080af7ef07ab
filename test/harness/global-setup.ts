import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbedded, type EmbeddedDatabase } from '../../backend/db/embedded.js';
import { migrate } from '../../backend/db/migrate.js';
import { createPool } from '../../backend/db/pool.js';

/**
 * One PostgreSQL for the whole run: an embedded one in a temporary directory, or the server named
 * by DATABASE_URL. A template database is migrated once; each test file clones it (see db.ts).
 */
declare module 'vitest' {
  export interface ProvidedContext {
    pgAdminUrl: string;
    pgTemplate: string;
    /** A directory for the run's temporary files (data dirs, generated scripts), removed at the end. */
    scratchDir: string;
  }
}

let embedded: EmbeddedDatabase | null = null;
let dir: string | null = null;

export default async function setup(project: TestProject) {
  const scratch = mkdtempSync(join(tmpdir(), 'capigram-test-run-'));
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    dir = mkdtempSync(join(tmpdir(), 'capigram-test-pg-'));
    embedded = await startEmbedded({
      dataDir: dir,
      // Durability is pointless for throw-away test data; these make cloning and commits fast.
      settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '400' },
    });
    adminUrl = embedded.url;
  }
  const template = `capigram_tpl_${process.pid}_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${template}`);
  await admin.end();
  const pool = createPool(withDatabase(adminUrl, template), 2);
  await migrate(pool);
  await pool.end();

  project.provide('pgAdminUrl', adminUrl);
  project.provide('pgTemplate', template);
  project.provide('scratchDir', scratch);

  return async () => {
    if (embedded) await embedded.stop();
    else {
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      const { rows } = await c.query<{ datname: string }>(
        `SELECT datname FROM pg_database WHERE datname = $1 OR datname LIKE $2`,
        [template, `capigram_t_${process.pid}_%`],
      );
      for (const r of rows) await c.query(`DROP DATABASE IF EXISTS ${r.datname} WITH (FORCE)`);
      await c.end();
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
    rmSync(scratch, { recursive: true, force: true });
  };
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
