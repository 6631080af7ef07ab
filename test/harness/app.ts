import { serve, type ServerType } from '@hono/node-server';
import type { Runner } from 'graphile-worker';
import { loadConfig, type Config } from '../../backend/config.js';
import { createSecretBox } from '../../backend/crypto/secret-box.js';
import type { Pool } from '../../backend/db/pool.js';
import type { Deps } from '../../backend/deps.js';
import { createApp, type App } from '../../backend/http/app.js';
import { createLogger } from '../../backend/log.js';
import { createMetrics } from '../../backend/metrics.js';
import { createProcessState } from '../../backend/process-state.js';
import { answerUnparseableRequests } from '../../backend/http/client-errors.js';
import { startWorker, type WorkerOptions } from '../../backend/worker/runner.js';
import { scratchDir } from './scratch.js';

export const TEST_SECRET_KEY = Buffer.alloc(32, 7);
export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface TestClock {
  now: () => Date;
  set(d: Date | number): void;
  advance(ms: number): void;
  /** Back to following the real clock. */
  real(): void;
}

export function testClock(): TestClock {
  let fixed: number | null = null;
  return {
    now: () => new Date(fixed ?? Date.now()),
    set: (d) => void (fixed = typeof d === 'number' ? d : d.getTime()),
    advance: (ms) => void (fixed = (fixed ?? Date.now()) + ms),
    real: () => void (fixed = null),
  };
}

/** Real dependencies on a test database; `env` overrides the environment (fakes' URLs, say). */
export function testDeps(
  pool: Pool,
  env: Record<string, string> = {},
  clock = testClock(),
  logTo?: { write(line: string): void },
): Deps & { clock: TestClock } {
  const config: Config = loadConfig({
    DATA_DIR: scratchDir('data'),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DATABASE_URL: 'postgres://unused-in-tests/',
    ...env,
  });
  const metrics = createMetrics();
  const log = createLogger(config.LOG_LEVEL, logTo);
  return {
    config,
    pool,
    log,
    metrics,
    box: createSecretBox(TEST_SECRET_KEY),
    adminToken: TEST_ADMIN_TOKEN,
    now: clock.now,
    // One per app, as one per process in production.
    local: createProcessState(pool, log, {
      onEventBatch: (events, outcome) => metrics.eventBatches.observe({ outcome }, events),
      onVisitBatch: (visits, outcome) => metrics.visitBatches.observe({ outcome }, visits),
    }),
    clock,
  };
}

export interface TestApp {
  url: string;
  app: App;
  deps: Deps & { clock: TestClock };
  worker: Runner | null;
  stop(): Promise<void>;
}

/** The real HTTP app on a loopback port, optionally with the real worker beside it. */
export async function startTestApp(
  pool: Pool,
  opts: {
    env?: Record<string, string>;
    worker?: boolean | WorkerOptions;
    clock?: TestClock;
    /** Where the app's and worker's log lines go (at env.LOG_LEVEL), for tests that read them. */
    logTo?: { write(line: string): void };
  } = {},
): Promise<TestApp> {
  const deps = testDeps(pool, opts.env, opts.clock, opts.logTo);
  const app = createApp(deps);
  const server: ServerType = await new Promise((ok) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => ok(s));
    answerUnparseableRequests(s);
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  const url = `http://127.0.0.1:${port}`;
  if (!opts.env?.PUBLIC_URL) deps.config.PUBLIC_URL = url;
  const worker = opts.worker
    ? await startWorker(deps, {
        pollIntervalMs: 100,
        crontab: '',
        ...(typeof opts.worker === 'object' ? opts.worker : {}),
      })
    : null;
  return {
    url,
    app,
    deps,
    worker,
    async stop() {
      await worker?.stop();
      deps.local.close();
      await new Promise<void>((ok) => {
        server.close(() => ok());
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
    },
  };
}
