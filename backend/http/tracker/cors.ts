import type { Handler, MiddlewareHandler } from 'hono';
import type { Queryable } from '../../db/pool.js';
import { anySiteServesHost } from '../../domain/tracker/sites.js';
import { hostAndParents, hostOf } from './domains.js';
import type { KeylessEnv } from './env.js';

/**
 * CORS for the keyless surface: only a site's own origins are answered, by reflecting the Origin
 * (never `*`), and without credentials (the tracker needs no cookies of Capigram's host). An origin
 * no site lists gets no CORS headers at all, so the browser keeps the response from the page.
 */
const ALLOWED_METHODS = 'GET, POST, OPTIONS';
const ALLOWED_HEADERS = 'Content-Type';
const PREFLIGHT_MAX_AGE_SECONDS = '600';

function addVary(headers: Headers): void {
  const vary = headers.get('vary');
  if (vary === null || vary === '') headers.set('vary', 'Origin');
  else if (!/(^|,)\s*(origin|\*)\s*(,|$)/i.test(vary)) headers.set('vary', `${vary}, Origin`);
}

/**
 * Adds the CORS answer to whatever the handler produced, errors included: a handler that checked
 * the Origin against its site's domains sets `corsOrigin`.
 */
export function corsResponses(): MiddlewareHandler<KeylessEnv> {
  return async (c, next) => {
    c.set('corsOrigin', undefined);
    await next();
    const origin = c.get('corsOrigin');
    const headers = c.res.headers;
    addVary(headers);
    if (origin !== undefined) {
      headers.set('access-control-allow-origin', origin);
      headers.set('access-control-expose-headers', 'Retry-After, X-Request-Id');
    }
  };
}

/**
 * Preflights carry no body, so no websiteId: the Origin is accepted when any site lists its host
 * (or a parent domain). The request that follows is checked against its own site.
 */
export function preflight(db: Queryable): Handler<KeylessEnv> {
  return async (c) => {
    const origin = c.req.header('origin');
    const host = origin === undefined ? null : hostOf(origin);
    if (origin !== undefined && host !== null && (await anySiteServesHost(db, hostAndParents(host)))) {
      c.set('corsOrigin', origin);
      return c.body(null, 204, {
        'access-control-allow-methods': ALLOWED_METHODS,
        'access-control-allow-headers': ALLOWED_HEADERS,
        'access-control-max-age': PREFLIGHT_MAX_AGE_SECONDS,
      });
    }
    return c.body(null, 204);
  };
}
