import { join, resolve } from 'node:path';
import { loadConfig, type Config } from './config.js';
import { createSecretBox, parseSecretKey } from './crypto/secret-box.js';
import { loadLocalSecrets } from './crypto/local-secrets.js';
import { startEmbedded, type EmbeddedDatabase } from './db/embedded.js';
import { migrate } from './db/migrate.js';
import { createPool } from './db/pool.js';
import { runStatementsInline } from './db/prepared-batch.js';
import type { Deps } from './deps.js';
import { createLogger, type Logger } from './log.js';
import { createMetrics } from './metrics.js';
import { createProcessState } from './process-state.js';

export interface Runtime {
  deps: Deps;
  embedded: EmbeddedDatabase | null;
  generatedAdminToken: boolean;
  close(): Promise<void>;
}

/**
 * Builds the process's dependencies from the environment: configuration, the database (embedded
 * when DATABASE_URL is unset; a session-mode DATABASE_DIRECT_URL for migrations and the worker, a
 * REPORTS_DATABASE_URL replica for reports), migrations, local secrets. Used by the server, the worker and the CLI.
 */
export async function openRuntime(
  opts: { env?: NodeJS.ProcessEnv; log?: Logger; poolSize?: number } = {},
): Promise<Runtime> {
  const config: Config = loadConfig(opts.env);
  const log = opts.log ?? createLogger(config.LOG_LEVEL);
  const secrets = loadLocalSecrets(config.DATA_DIR, config);
  const box = createSecretBox(parseSecretKey(secrets.secretKey));

  let embedded: EmbeddedDatabase | null = null;
  let url = config.DATABASE_URL;
  if (!url) {
    const started = Date.now();
    embedded = await startEmbedded({ dataDir: config.DATA_DIR });
    url = embedded.url;
    log.info(
      { dataDir: join(resolve(config.DATA_DIR), 'pg'), ms: Date.now() - started, owned: embedded.owned },
      'embedded PostgreSQL ready',
    );
  }
  const size = opts.poolSize ?? 20;
  const timeouts = {
    statementMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
    connectMs: config.DATABASE_CONNECT_TIMEOUT_MS,
  };
  const pool = createPool(url, size, timeouts);
  const pooled = config.DATABASE_DIRECT_URL !== undefined && config.DATABASE_DIRECT_URL !== url;
  // Behind a transaction-mode pooler a connection's session state (a prepared statement) may be
  // on another server connection at the next transaction: the web tier's statements go inline.
  if (pooled) runStatementsInline(pool);
  const directPool = pooled ? createPool(config.DATABASE_DIRECT_URL!, size, timeouts) : pool;
  const reportsPool = config.REPORTS_DATABASE_URL
    ? createPool(config.REPORTS_DATABASE_URL, 5, timeouts)
    : pool;
  const pools = [...new Set([pool, directPool, reportsPool])];
  const endPools = () => Promise.all(pools.map((p) => p.end().catch(() => undefined)));
  try {
    await migrate(directPool);
  } catch (err) {
    await endPools();
    await embedded?.stop();
    throw err;
  }
  const metrics = createMetrics({ defaultMetrics: true });
  const local = createProcessState(pool, log, {
    onWakeError: (err) =>
      log.warn({ err: String(err) }, 'delivery wake-up failed; the sweep will pick the sends up'),
    onEventBatch: (events, outcome) => metrics.eventBatches.observe({ outcome }, events),
    onVisitBatch: (visits, outcome) => metrics.visitBatches.observe({ outcome }, visits),
  });
  const deps: Deps = {
    config,
    pool,
    ...(directPool !== pool ? { directPool } : {}),
    ...(reportsPool !== pool ? { reportsPool } : {}),
    log,
    metrics,
    box,
    adminToken: secrets.adminToken,
    now: () => new Date(),
    local,
  };
  return {
    deps,
    embedded,
    generatedAdminToken: secrets.generatedAdminToken,
    async close() {
      local.close();
      await endPools();
      await embedded?.stop();
    },
  };
}
