import { OpenAPIHono } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import { requestId } from 'hono/request-id';
import type { Deps } from '../deps.js';
import { BODY_LIMIT_BYTES, limitBody, payloadTooLarge } from './body-limit.js';
import { ApiError, problemResponse, toApiError, validationError } from './errors.js';
import { apiRoutes } from './api/index.js';
import { dashboardRoutes } from './dashboard/index.js';
import type { App, AppEnv } from './env.js';
import { healthRoutes } from './health.js';
import { telegramRoutes } from './telegram.js';
import { trackerRoutes } from './tracker/index.js';

export type { App } from './env.js';

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The HTTP app: request ids, access logging and metrics, body limits, one error handler, then the
 * surfaces, each a sub-app of its own. Every failure leaves here as problem+json; nothing leaks a stack trace.
 */
export function createApp(deps: Deps): App {
  const app = new OpenAPIHono<AppEnv>({
    // zod-openapi validation failures use the same problem body as everything else.
    defaultHook: (result) => {
      if (!result.success) throw validationError(result.error, result.target);
    },
  });

  app.use(
    requestId({
      headerName: 'X-Request-Id',
      generator: () => crypto.randomUUID(),
      limitLength: 128,
    }),
  );
  app.use(observe(deps));
  // The Telegram webhook applies its own, larger limit after checking its secret (telegram.ts).
  const limited = limitBody(BODY_LIMIT_BYTES, payloadTooLarge);
  app.use('*', async (c, next) => {
    if (c.req.path.startsWith('/backend/telegram/')) return next();
    return limited(c, next);
  });

  app.onError((err, c) => {
    const { apiError, unexpected } = toApiError(err);
    const rid = c.get('requestId');
    if (unexpected) deps.log.error({ err, requestId: rid, path: c.req.path }, 'unhandled error');
    else if (apiError.code === 'UNAVAILABLE')
      deps.log.warn({ err: (err as Error).message, requestId: rid }, 'database unavailable');
    return problemResponse(apiError, rid);
  });
  app.notFound((c) =>
    problemResponse(
      new ApiError('NOT_FOUND', `No route for ${c.req.method} ${c.req.path}`),
      c.get('requestId'),
    ),
  );

  // Every surface of the service, in the order their routes match.
  app.route('/', healthRoutes(deps));
  app.route('/', telegramRoutes(deps));
  app.route('/', trackerRoutes(deps));
  app.route('/api/v1', apiRoutes(deps));
  app.route('/', dashboardRoutes(deps));
  return app;
}

function observe(deps: Pick<Deps, 'log' | 'metrics'>): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const start = performance.now();
    const incoming = c.req.header('x-request-id');
    if (incoming && !REQUEST_ID_RE.test(incoming)) c.set('requestId', crypto.randomUUID());
    await next();
    const seconds = (performance.now() - start) / 1000;
    // The matched pattern, not the path: ids in paths would explode the label set.
    const route = c.req.routePath === '/*' ? 'unmatched' : c.req.routePath;
    deps.metrics.httpRequests.inc({ method: c.req.method, route, status: String(c.res.status) });
    deps.metrics.httpDuration.observe({ method: c.req.method, route }, seconds);
    if (route !== '/healthz' && route !== '/metrics') {
      deps.log.info(
        {
          requestId: c.get('requestId'),
          method: c.req.method,
          route,
          status: c.res.status,
          ms: Math.round(seconds * 1000),
        },
        'request',
      );
    }
  };
}
