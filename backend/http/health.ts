import { createHash, timingSafeEqual } from 'node:crypto';
import { Hono } from 'hono';
import type { Deps } from '../deps.js';
import { migrationState } from '../db/migrate.js';
import { checkDelivery } from '../delivery/stall.js';
import type { AppEnv } from './env.js';
import { ApiError } from './errors.js';

/** Liveness, readiness, delivery health and metrics: what an orchestrator and Prometheus call. */
export function healthRoutes(
  deps: Pick<Deps, 'pool' | 'metrics' | 'config' | 'log' | 'worker' | 'local'>,
): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  // Readiness: can this process serve its role? Only the database decides that (it answers, and it
  // holds exactly the migrations this build knows). A slow or failing ad platform, a backlog or a
  // stopped worker elsewhere is no reason to take the tracker and the webhook out of rotation:
  // that is /healthz/delivery's.
  app.get('/readyz', async (c) => {
    let state: Awaited<ReturnType<typeof migrationState>>;
    try {
      state = await migrationState(deps.pool);
    } catch {
      throw new ApiError('UNAVAILABLE', 'database unreachable');
    }
    if (state.unknown.length > 0)
      throw new ApiError(
        'UNAVAILABLE',
        `the database holds migrations this build does not know (${state.unknown.join(', ')})`,
      );
    if (state.pending > 0)
      throw new ApiError('UNAVAILABLE', `${state.pending} migrations of this build are not applied`);
    return c.json({ status: 'ready' });
  });

  // Delivery health, for an alert (not a readiness probe): stalled under the stall rule.
  app.get('/healthz/delivery', async (c) => {
    let check: Awaited<ReturnType<typeof checkDelivery>>;
    try {
      check = await checkDelivery(deps);
    } catch {
      throw new ApiError('UNAVAILABLE', 'database unreachable');
    }
    const body = {
      oldestDueSeconds: Math.round(check.oldestDueSeconds),
      ...(check.workerRunning === null ? {} : { worker: check.workerRunning ? 'running' : 'down' }),
    };
    // The contract's body (not problem+json): a probe reads which check failed.
    if (check.delivery === 'stalled') return c.json({ status: 'stalled', ...body }, 503);
    return c.json({ status: 'ok', ...body });
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
