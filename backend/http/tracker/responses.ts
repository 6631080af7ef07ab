import type { Context } from 'hono';
import type { KeylessEnv } from './env.js';

/**
 * The answer to a look at a click link (`isLinkLookup`): a small page, nothing recorded and no
 * invite link spent. Not a redirect: the Location would have to be an invite link, and handing
 * one out is exactly what a look must not do.
 */
export function linkLookupAnswer(c: Context<KeylessEnv>): Response {
  c.header('cache-control', 'no-store');
  c.header('x-robots-tag', 'noindex');
  return c.html(
    '<!doctype html><meta charset="utf-8"><meta name="robots" content="noindex"><title>Telegram</title><p>This link opens a Telegram channel.</p>',
  );
}

/** A click's 302 to Telegram; the page the visitor came from is not passed on. */
export function redirect(c: Context<KeylessEnv>, location: string): Response {
  c.header('referrer-policy', 'no-referrer');
  return c.redirect(location, 302);
}
