/**
 * The only two pages the proxy ever writes itself. Plain, self-contained, never cached, and free of
 * internals: visitors see the site's domain, so nothing here names Capigram or an error.
 */
import type { ServerResponse } from 'node:http';

function page(title: string, text: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${title}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:15vh auto;padding:0 1rem;color:#222}</style>
</head><body><h1>${title}</h1><p>${text}</p></body></html>
`;
}

const UNAVAILABLE = page(
  'This page is temporarily unavailable',
  'The site could not be reached just now. Please try again in a moment.',
);

const INVITE_LATER = page(
  'Almost there',
  'We could not open the invitation right now. Please go back and tap the link again in a moment.',
);

function send(res: ServerResponse, status: number, body: string, extra: Record<string, string> = {}): void {
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    ...extra,
  });
  res.end(body);
}

/** The upstream could not be reached or broke before answering. */
export function sendUpstreamUnavailable(res: ServerResponse): void {
  send(res, 502, UNAVAILABLE);
}

/** An invite click the tracker could not serve and no fallback URL is configured. */
export function sendInviteLater(res: ServerResponse): void {
  send(res, 200, INVITE_LATER);
}

/** A redirect the browser must not cache: every click needs its own invite link. */
export function sendRedirect(res: ServerResponse, location: string): void {
  res.writeHead(302, { location, 'cache-control': 'no-store', 'content-length': 0 });
  res.end();
}

/** Handler mounted without an upstream and without `next`: nothing to pass the request to. */
export function sendNotFound(res: ServerResponse): void {
  send(res, 404, page('Not found', 'There is nothing at this address.'));
}
