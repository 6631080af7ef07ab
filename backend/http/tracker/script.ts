import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Hono } from 'hono';
import type { KeylessEnv } from './env.js';

/**
 * `GET /backend/tracker.js`: the browser tracker script, a static file served with a strong ETag
 * so browsers revalidate cheaply, and cached for an hour (a day more while revalidating) so a new
 * release reaches every page within the hour.
 */
const SCRIPT = readFileSync(new URL('./tracker.js', import.meta.url));
const ETAG = `"${createHash('sha256').update(SCRIPT).digest('base64url').slice(0, 27)}"`;
const CACHE_CONTROL = 'public, max-age=3600, stale-while-revalidate=86400';

function matches(ifNoneMatch: string | undefined): boolean {
  if (ifNoneMatch === undefined) return false;
  return ifNoneMatch.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t === ETAG || t === `W/${ETAG}`;
  });
}

export function registerTrackerScriptRoute(app: Hono<KeylessEnv>): void {
  app.get('/backend/tracker.js', (c) => {
    const headers = {
      etag: ETAG,
      'cache-control': CACHE_CONTROL,
      'x-content-type-options': 'nosniff',
      // Loading it from any site's page is the point; reading it cross-origin is harmless.
      'cross-origin-resource-policy': 'cross-origin',
    };
    if (matches(c.req.header('if-none-match'))) return c.body(null, 304, headers);
    return c.body(SCRIPT, 200, { ...headers, 'content-type': 'text/javascript; charset=utf-8' });
  });
}
