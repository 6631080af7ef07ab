/**
 * What the proxy believes about an incoming request: who the visitor is, which host and scheme
 * they used, and whether the request is a page the visitor is navigating to.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { resolveForwardedChain, type TrustedProxies } from '../shared/client-ip.js';

export interface RequestView {
  clientIp: string;
  userAgent: string | undefined;
  /** The believable `X-Forwarded-For` chain, the client first and our socket's peer last. */
  forwardedFor: string[];
  peerTrusted: boolean;
  proto: 'http' | 'https';
  /** Host (and port) the visitor asked for, from `Host` or a trusted `X-Forwarded-Host`. */
  host: string | undefined;
  /** `proto://host`, when the host is known. */
  origin: string | undefined;
  /** Origin-form target: path plus query, as received. */
  target: string;
  pathname: string;
  search: string;
}

function first(value: string | string[] | undefined): string | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  const head = raw?.split(',')[0]?.trim();
  return head === undefined || head === '' ? undefined : head;
}

const HOST_PATTERN = /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:\d{1,5})?$/i;

export function viewRequest(req: IncomingMessage, trust: TrustedProxies): RequestView {
  const chain = resolveForwardedChain(req.socket.remoteAddress, req.headers['x-forwarded-for'], trust);
  const encrypted = (req.socket as Partial<TLSSocket>).encrypted === true;
  const forwardedProto = chain.peerTrusted
    ? first(req.headers['x-forwarded-proto'])?.toLowerCase()
    : undefined;
  const proto = encrypted || forwardedProto === 'https' || forwardedProto === 'wss' ? 'https' : 'http';
  const forwardedHost = chain.peerTrusted ? first(req.headers['x-forwarded-host']) : undefined;
  const candidate = forwardedHost ?? req.headers.host;
  const host = candidate !== undefined && HOST_PATTERN.test(candidate) ? candidate.toLowerCase() : undefined;

  let target = req.url ?? '/';
  if (!target.startsWith('/')) {
    // Absolute-form request targets (`GET http://host/path`): keep the path and query only.
    try {
      const absolute = new URL(target);
      target = `${absolute.pathname}${absolute.search}`;
    } catch {
      target = '/';
    }
  }
  const queryAt = target.indexOf('?');
  const userAgent = req.headers['user-agent'];
  return {
    clientIp: chain.clientIp,
    userAgent: userAgent === undefined || userAgent === '' ? undefined : userAgent,
    forwardedFor: chain.hops,
    peerTrusted: chain.peerTrusted,
    proto,
    host,
    origin: host === undefined ? undefined : `${proto}://${host}`,
    target,
    pathname: queryAt === -1 ? target : target.slice(0, queryAt),
    search: queryAt === -1 ? '' : target.slice(queryAt),
  };
}

/**
 * Rewrites the `X-Forwarded-*` headers of a request about to be passed upstream, from what the
 * proxy believes rather than what the client claimed: an untrusted peer's claims are dropped.
 */
export function setForwardedHeaders(headers: IncomingHttpHeaders, view: RequestView): void {
  headers['x-forwarded-for'] = view.forwardedFor.join(', ');
  headers['x-forwarded-proto'] = view.proto;
  if (view.host === undefined) delete headers['x-forwarded-host'];
  else headers['x-forwarded-host'] = view.host;
  if (!view.peerTrusted) {
    // What only a trusted hop may say about the request: many frameworks act on these (the
    // client's address, the path prefix or original URL behind a rewrite).
    for (const name of UNTRUSTED_FORWARDING_HEADERS) delete headers[name];
  }
  dropCapigramHeaders(headers);
}

/**
 * `X-Capigram-*` is how Capigram's own parts speak to each other (the client's IP and User-Agent
 * towards the tracker). An origin that reads them, or a Capigram backend behind this proxy, must
 * never see a visitor's forgery: nobody in front of the proxy has anything to say in them. For an
 * upstream and for the app the handler is mounted in alike.
 */
export function dropCapigramHeaders(headers: IncomingHttpHeaders): void {
  for (const name in headers) if (name.startsWith(CAPIGRAM_HEADER_PREFIX)) delete headers[name];
}

const CAPIGRAM_HEADER_PREFIX = 'x-capigram-';

const UNTRUSTED_FORWARDING_HEADERS = [
  'forwarded',
  'x-forwarded-port',
  'x-forwarded-prefix',
  'x-forwarded-server',
  'x-forwarded-ssl',
  'x-real-ip',
  'x-client-ip',
  'true-client-ip',
  'cf-connecting-ip',
  'x-original-url',
  'x-rewrite-url',
] as const;

const ASSET_EXTENSION =
  /\.(?:js|mjs|cjs|css|map|json|xml|txt|webmanifest|png|jpe?g|gif|webp|avif|svg|ico|bmp|tiff?|woff2?|ttf|otf|eot|mp4|webm|mov|mp3|wav|ogg|m4a|pdf|zip|gz|br|wasm|csv)$/i;

function headerIncludes(headers: IncomingHttpHeaders, name: string, pattern: RegExp): boolean {
  const value = headers[name];
  return value !== undefined && pattern.test(Array.isArray(value) ? value.join(',') : value);
}

/** Speculative loads that the visitor may never see: never pageviews. */
export function isPrefetch(headers: IncomingHttpHeaders): boolean {
  return (
    headerIncludes(headers, 'sec-purpose', /prefetch|prerender/i) ||
    headerIncludes(headers, 'purpose', /prefetch|preview/i) ||
    headerIncludes(headers, 'x-purpose', /prefetch|preview/i) ||
    headerIncludes(headers, 'x-moz', /prefetch/i)
  );
}

/**
 * An HTML navigation: a GET that accepts HTML, is not a prefetch, is not for an asset, and (in
 * browsers that say so) is a top-level document navigation.
 */
export function isHtmlNavigation(req: IncomingMessage, pathname: string): boolean {
  if (req.method !== 'GET') return false;
  if (!headerIncludes(req.headers, 'accept', /text\/html|application\/xhtml\+xml/i)) return false;
  if (isPrefetch(req.headers)) return false;
  const dest = req.headers['sec-fetch-dest'];
  if (dest !== undefined && dest !== 'document') return false;
  const mode = req.headers['sec-fetch-mode'];
  if (mode !== undefined && mode !== 'navigate') return false;
  if (req.headers.upgrade !== undefined) return false;
  return !ASSET_EXTENSION.test(pathname);
}

/**
 * Whether the response to a navigation is a page the visitor sees: a 2xx with content (or a
 * 304 revalidation) that is HTML. Redirects, errors and downloads are not pageviews.
 */
export function isPageResponse(status: number, contentType: string | undefined): boolean {
  const ok = (status >= 200 && status < 300 && status !== 204 && status !== 205) || status === 304;
  if (!ok) return false;
  return contentType === undefined || /text\/html|application\/xhtml\+xml/i.test(contentType);
}
