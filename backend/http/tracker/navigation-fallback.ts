import type { Context } from 'hono';
import type { Deps } from '../../deps.js';
import { findSiteChannel } from '../../domain/invites/invite-channels.js';
import { fallbackUrl } from '../../domain/invites/links.js';
import { ApiError } from '../../errors.js';
import type { KeylessEnv } from './env.js';

/**
 * `track/invite` and `/r/…` are where a visitor's browser goes when they click "join". A refusal
 * there (a site or channel that is not right, the rate limit, the database away) is an operator's
 * problem, but the one who sees it is the visitor, and problem+json or a browser error page loses
 * them. So a browser navigation that fails gets the channel's public address when Capigram knows
 * it (the visitor joins, unattributed), else a small page that says what happened in words. Other
 * callers (scripts, tests, `fetch`) keep the problem+json.
 */
export function isBrowserNavigation(c: Context<KeylessEnv>): boolean {
  const mode = c.req.header('sec-fetch-mode');
  if (mode !== undefined) return mode === 'navigate';
  return /text\/html|application\/xhtml\+xml/i.test(c.req.header('accept') ?? '');
}

export interface FallbackTarget {
  siteId: string | undefined;
  channelId: string | undefined;
}

export async function navigationFallback(
  c: Context<KeylessEnv>,
  err: unknown,
  target: FallbackTarget,
  deps: Pick<Deps, 'pool' | 'log'>,
): Promise<Response> {
  const code = err instanceof ApiError ? err.code : 'INTERNAL';
  let location: string | null = null;
  if (target.siteId !== undefined && code !== 'UNKNOWN_WEBSITE') {
    // The database may be what failed: then there is no public address to find either.
    const channel = await findSiteChannel(deps.pool, target.siteId, target.channelId).catch(() => null);
    location = channel === null ? null : fallbackUrl(channel);
  }
  deps.log.warn(
    {
      requestId: c.get('requestId'),
      code,
      path: c.req.path,
      siteId: target.siteId,
      fallback: location === null ? 'page' : 'public link',
    },
    'join click refused; the visitor was sent on without attribution',
  );
  c.header('cache-control', 'no-store');
  c.header('referrer-policy', 'no-referrer');
  if (location !== null) return c.redirect(location, 302);
  const status = err instanceof ApiError ? err.status : 503;
  if (err instanceof ApiError && err.extra.headers !== undefined)
    for (const [k, v] of Object.entries(err.extra.headers)) c.header(k, v);
  return c.html(FALLBACK_PAGE, status);
}

const FALLBACK_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>Telegram link unavailable</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:15vh auto;padding:0 1rem;color:#222}</style></head>
<body><h1>This Telegram link cannot be opened right now</h1>
<p>Please go back to the page you came from and try again in a moment.</p></body></html>`;
