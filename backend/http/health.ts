import { createHash, timingSafeEqual } from 'node:crypto';
import { Hono } from 'hono';
import type { Deps } from '../deps.js';
import { migrationsApplied } from '../db/migrate.js';
import { checkDelivery } from '../delivery/stall.js';
import type { AppEnv } from './env.js';
import { ApiError } from './errors.js';

/** Liveness, readiness and metrics: what an orchestrator and Prometheus call. */
export function healthRoutes(
  deps: Pick<Deps, 'pool' | 'metrics' | 'config' | 'log' | 'worker' | 'local'>,
): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.get('/readyz', async (c) => {
    let ready = false;
    try {
      ready = await migrationsApplied(deps.pool);
    } catch {
      ready = false;
    }
    if (!ready) throw new ApiError('UNAVAILABLE', 'database unreachable or migrations not applied');
    let check: Awaited<ReturnType<typeof checkDelivery>>;
    try {
      check = await checkDelivery(deps);
    } catch {
      throw new ApiError('UNAVAILABLE', 'database unreachable');
    }
    if (check.delivery === 'stalled') {
      // The contract's body (not problem+json): a probe reads which check failed.
      return c.json(
        {
          status: 'degraded',
          checks: {
            database: 'ok',
            delivery: 'stalled',
            oldestDueSeconds: Math.round(check.oldestDueSeconds),
            ...(check.workerRunning === null ? {} : { worker: check.workerRunning ? 'running' : 'down' }),
          },
        },
        503,
      );
    }
    return c.json({ status: 'ready' });
  });

  app.get('/metrics', async (c) => {
    if (
      deps.config.METRICS_TOKEN !== undefined &&
      !bearerMatches(c.req.header('authorization'), deps.config.METRICS_TOKEN)
    ) {
      throw new ApiError('UNAUTHORIZED', 'metrics need Authorization: Bearer <METRICS_TOKEN>');
    }
    // The gauge is read at scrape time; a database away leaves its last value (the scrape still works).
    await checkDelivery(deps).catch(() => undefined);
    const body = await deps.metrics.registry.metrics();
    return c.body(body, 200, { 'content-type': deps.metrics.registry.contentType });
  });
  return app;
}

/** Constant-time comparison of a bearer token (hashed first, so lengths do not leak either). */
function bearerMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (!m) return false;
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(m[1]!), digest(token));
}
