/**
 * The site behind the proxy, reached through http-proxy-3: requests passed on with forwarded
 * headers, WebSockets piped, and a navigation's response head caught on `proxyRes` so our
 * cookies join the upstream's there and the pageview is decided there.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import type { Logger } from 'pino';
import { sendUpstreamUnavailable } from './pages.js';
import { setForwardedHeaders, type RequestView } from './request-view.js';

/** What an upgrade gets when the upstream cannot be reached: a plain 502, then the socket closes. */
const UPGRADE_FAILED =
  'HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 32\r\nconnection: close\r\n\r\nThe site is unavailable just now';

/** A navigation waiting for its head: the cookies to add to the upstream's. */
interface Held {
  cookies: string[];
}

export interface Upstream<P extends Held> {
  /** Keeps `pageview` until the upstream's response head for `res` arrives. */
  hold(res: ServerResponse, pageview: P): void;
  web(req: IncomingMessage, res: ServerResponse, view: RequestView): void;
  ws(req: IncomingMessage, socket: Duplex, head: Buffer, view: RequestView): void;
  /** Frees the kept-alive sockets of the proxy's own agent. */
  close(): void;
}

export function createUpstream<P extends Held>(options: {
  url: URL;
  changeOrigin: boolean;
  agent: http.Agent | undefined;
  log: Logger;
  /** The upstream's head for a held navigation: its status and content type. */
  onHead: (pageview: P, status: number, contentType: string | undefined) => void;
}): Upstream<P> {
  const { url, log, onHead } = options;
  const ownAgent =
    options.agent !== undefined
      ? undefined
      : url.protocol === 'https:'
        ? new https.Agent({ keepAlive: true })
        : new http.Agent({ keepAlive: true });
  const proxy = createProxyServer({
    target: url.href,
    xfwd: false,
    changeOrigin: options.changeOrigin,
    agent: options.agent ?? ownAgent,
  });
  // http-proxy-3 turns a DELETE or OPTIONS without Content-Length into `Content-Length: 0` even
  // when the body is chunked; the body would then reach the upstream as the start of another
  // request (request smuggling on a kept-alive connection). Put the framing back before sending.
  const chunked = new WeakSet<IncomingMessage>();
  proxy.before('web', 'stream', (req) => {
    if (!chunked.has(req)) return;
    delete req.headers['content-length'];
    req.headers['transfer-encoding'] = 'chunked';
  });
  // Wrapping `res.writeHead` instead (as the mounted handler must) cost the proxy about 25 µs a
  // request under load, more than all of the pageview's own work (docs/proxy.md).
  const held = new WeakMap<ServerResponse, P>();
  proxy.on('proxyRes', (proxyRes, _req, res) => {
    // An upstream that drops its connection mid-body: http-proxy-3's pipe just stops, and the
    // visitor would wait for the rest forever. Cut the visitor's response too, so the browser
    // sees a broken download (and may retry) instead of a hang.
    proxyRes.once('close', () => {
      if (!proxyRes.complete && !res.destroyed) {
        log.warn({ status: proxyRes.statusCode }, 'upstream closed the connection mid-response');
        res.destroy();
      }
    });
    const pageview = held.get(res);
    if (pageview === undefined) return;
    held.delete(res);
    const theirs = proxyRes.headers['set-cookie'];
    proxyRes.headers['set-cookie'] =
      theirs === undefined ? pageview.cookies : [...theirs, ...pageview.cookies];
    onHead(pageview, proxyRes.statusCode ?? 0, proxyRes.headers['content-type']);
  });
  proxy.on('error', (error, req, res) => {
    log.warn({ err: error.message, method: req.method, url: req.url }, 'upstream failed');
    if (!('writeHead' in res)) {
      // A WebSocket upgrade: the client still waits for an HTTP answer to its handshake.
      const socket = res as Socket;
      if (socket.writable) socket.end(UPGRADE_FAILED);
      else socket.destroy();
    } else if (res.headersSent) {
      res.destroy();
    } else {
      // The browser keeps its ids even when the site is down.
      const pageview = held.get(res);
      if (pageview !== undefined) res.appendHeader('set-cookie', pageview.cookies);
      sendUpstreamUnavailable(res);
    }
  });

  return {
    hold: (res, pageview) => held.set(res, pageview),
    web(req, res, view) {
      setForwardedHeaders(req.headers, view);
      if (req.headers['transfer-encoding'] !== undefined) chunked.add(req);
      proxy.web(req, res);
    },
    ws(req, socket, head, view) {
      setForwardedHeaders(req.headers, view);
      proxy.ws(req, socket, head);
    },
    close: () => ownAgent?.destroy(),
  };
}
