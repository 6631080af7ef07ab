import type { Deps } from '../../deps.js';
import { migrationsApplied } from '../../db/migrate.js';
import type { App } from '../app.js';
import { ApiError } from '../errors.js';

/** Liveness, readiness and metrics: what an orchestrator and Prometheus call. */
export function registerHealthRoutes(app: App, deps: Pick<Deps, 'pool' | 'metrics'>): void {
  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.get('/readyz', async (c) => {
    let ready = false;
    try {
      ready = await migrationsApplied(deps.pool);
    } catch {
      ready = false;
    }
    if (!ready) throw new ApiError('UNAVAILABLE', 'database unreachable or migrations not applied');
    return c.json({ status: 'ready' });
  });

  app.get('/metrics', async (c) => {
    const body = await deps.metrics.registry.metrics();
    return c.body(body, 200, { 'content-type': deps.metrics.registry.contentType });
  });
}
