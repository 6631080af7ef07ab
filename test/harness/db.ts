import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { createPool, type Pool } from '../../backend/db/pool.js';
import { withDatabase } from './global-setup.js';

export interface TestDatabase {
  url: string;
  pool: Pool;
  drop(): Promise<void>;
}

/**
 * A fresh database cloned from the migrated template: each test file gets its own, so files run
 * in parallel and never see each other's rows. Cloning a template costs tens of milliseconds.
 */
export async function createTestDatabase(poolSize = 10): Promise<TestDatabase> {
  const adminUrl = inject('pgAdminUrl');
  const template = inject('pgTemplate');
  const name = `capigram_t_${template.split('_')[2]}_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  } finally {
    await admin.end();
  }
  const url = withDatabase(adminUrl, name);
  const pool = createPool(url, poolSize);
  return {
    url,
    pool,
    async drop() {
      await pool.end().catch(() => undefined);
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      await c.end();
    },
  };
}
