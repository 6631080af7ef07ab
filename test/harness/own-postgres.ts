import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbedded, type EmbeddedDatabase } from '../../backend/db/embedded.js';
import { migrate } from '../../backend/db/migrate.js';
import { createPool } from '../../backend/db/pool.js';

/**
 * A PostgreSQL of one test file's own, for tests that stop and restart the server: the run's
 * shared one (global-setup.ts) serves every other file at the same time and must stay up. The
 * embedded binaries in a scratch directory; a restart listens on the same port, as a real
 * restart or failover behind a stable address does. Migrated once.
 */
export interface OwnPostgres {
  url: string;
  /** PostgreSQL's "fast" shutdown: open transactions rolled back, every connection closed. */
  stop(): Promise<void>;
  /** Starts it again on the same port and data; resolves once it answers queries. */
  start(): Promise<void>;
  up(): boolean;
  /** Stops it (if up) and removes its files. */
  close(): Promise<void>;
}

export async function startOwnPostgres(prefix: string): Promise<OwnPostgres> {
  // Straight under the system's temporary directory, not the run's scratch directory: as root,
  // PostgreSQL runs as its own user, which must be able to reach its data directory.
  const dataDir = mkdtempSync(join(tmpdir(), `capigram-${prefix}-`));
  // Durability is pointless for throw-away data; a crash-safe restart is not what is tested here.
  const settings = { fsync: 'off', full_page_writes: 'off', max_connections: '200' };
  let db: EmbeddedDatabase | null = await startEmbedded({ dataDir, settings });
  const url = db.url;
  const port = Number(new URL(url).port);
  const pool = createPool(url, 2);
  await migrate(pool);
  await pool.end();
  return {
    url,
    async stop() {
      await db?.stop();
      db = null;
    },
    async start() {
      db = await startEmbedded({ dataDir, settings, port });
    },
    up: () => db !== null,
    async close() {
      await db?.stop();
      db = null;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
