import { join, resolve } from 'node:path';
import { loadConfig, type Config } from './config.js';
import { createSecretBox, parseSecretKey } from './crypto/secret-box.js';
import { loadLocalSecrets } from './crypto/local-secrets.js';
import { startEmbedded, type EmbeddedDatabase } from './db/embedded.js';
import { migrate } from './db/migrate.js';
import { createPool } from './db/pool.js';
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
 * when DATABASE_URL is unset), migrations, local secrets. Used by the server, the worker and the CLI.
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
  const pool = createPool(url, opts.poolSize ?? 20, {
    statementMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
    connectMs: config.DATABASE_CONNECT_TIMEOUT_MS,
  });
  try {
    await migrate(pool);
  } catch (err) {
    await pool.end().catch(() => undefined);
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
      await pool.end().catch(() => undefined);
      await embedded?.stop();
    },
  };
}
