/**
 * The first-party reverse proxy as a mountable Node request handler.
 *
 * Every request passes through untouched (http-proxy-3, or `next()` when mounted in front of the
 * site's own app) except two kinds:
 * - HTML navigations: the browser's ids are read or created and written back as first-party
 *   cookies, and once the page's response head is known to be a page, `track/init` is posted
 *   beside the response (never before it: the page does not wait for Capigram);
 * - `GET <invitePath>`: answered with a 302 to the invite link `track/invite` hands out, or to the
 *   fallback URL, or with a plain page; never with an error. `GET <entryPath>` likewise, to the
 *   bot deep link `track/entry` hands out.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, OutgoingHttpHeader, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import { pino, type Logger } from 'pino';
import type { CookieScope } from '../shared/cookies.js';
import type { TrackInitBody } from '../shared/tracker-wire.js';
import { consentlessInitBody, visitorConsent, watchConsentMode } from './consent.js';
import { resolveProxySettings, type ProxySettingsInput } from './options.js';
import { sendInviteLater, sendNotFound, sendRedirect, sendUpstreamUnavailable } from './pages.js';
import {
  dropCapigramHeaders,
  isHtmlNavigation,
  isPageResponse,
  setForwardedHeaders,
  viewRequest,
  type RequestView,
} from './request-view.js';
import { createTrackerClient, type TrackerCallContext } from './tracker-client.js';
import { attributionOf, initBody, readVisitor, visitorCookies, type Visitor } from './visitor.js';

export interface CapigramProxyOptions extends ProxySettingsInput {
  /** Where warnings about the tracker and the upstream go; default: pino at `LOG_LEVEL`. */
  logger?: Logger;
  /** Milliseconds since the epoch; injectable so tests can move time (cookie expiry, fbc). */
  now?: () => number;
  /** Agent for upstream connections; default: a keep-alive agent owned (and closed) by the proxy. */
  agent?: http.Agent;
}

/** A navigation on its way: the cookies for its answer, and the visit to post if it is a page. */
interface Pageview {
  cookies: string[];
  body: TrackInitBody;
  view: RequestView;
  /** What goes with the call: nothing of the visitor for a visit without consent. */
  context: TrackerCallContext;
  /** The fbp patch the visit must follow, when one was sent. */
  patched: Promise<unknown> | undefined;
}

export type NextFunction = (error?: unknown) => void;

export interface CapigramProxy {
  (req: IncomingMessage, res: ServerResponse, next?: NextFunction): void;
  /** For the server's `upgrade` event: WebSockets go to the upstream untouched. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Tracker calls still running. */
  pendingTrackerCalls(): number;
  /** Waits (at most `drainMs`, default 5 s) for running tracker calls, then frees upstream sockets. */
  close(options?: { drainMs?: number }): Promise<void>;
}

/**
 * Appends `cookies` to the response's `Set-Cookie` at the moment its head is written, whoever
 * writes it (http-proxy-3 copying the upstream's headers, the site's app, our own pages), and
 * tells `onHead` the status and content type. Upstream cookies are kept: ours are added after.
 */
function onResponseHead(
  res: ServerResponse,
  cookies: string[],
  onHead: ((status: number, contentType: string | undefined) => void) | undefined,
): void {
  const writeHead = res.writeHead;
  res.writeHead = function patchedWriteHead(this: ServerResponse, ...args: unknown[]) {
    res.writeHead = writeHead;
    const status = typeof args[0] === 'number' ? args[0] : res.statusCode;
    // writeHead(status[, statusMessage][, headers]); an implicit head (write or end without
    // writeHead) comes with the status alone, and that common case does no header scanning.
    const headersArg = (isObject(args[1]) ? args[1] : isObject(args[2]) ? args[2] : undefined) as
      | OutgoingHttpHeaders
      | OutgoingHttpHeader[]
      | undefined;
    let contentType = res.getHeader('content-type');
    if (headersArg === undefined) {
      if (cookies.length > 0) res.appendHeader('set-cookie', cookies);
    } else if (Array.isArray(headersArg)) {
      for (let i = 0; i + 1 < headersArg.length; i += 2) {
        if (String(headersArg[i]).toLowerCase() === 'content-type') contentType = headersArg[i + 1] as string;
      }
      for (const cookie of cookies) headersArg.push('set-cookie', cookie);
    } else {
      let cookieKey: string | undefined;
      for (const name of Object.keys(headersArg)) {
        const lower = name.toLowerCase();
        if (lower === 'content-type') contentType = headersArg[name];
        else if (lower === 'set-cookie') cookieKey = name;
      }
      if (cookieKey !== undefined) {
        const theirs = headersArg[cookieKey];
        headersArg[cookieKey] = [
          ...(Array.isArray(theirs) ? theirs : theirs === undefined ? [] : [String(theirs)]),
          ...cookies,
        ];
      } else if (cookies.length > 0) {
        res.appendHeader('set-cookie', cookies);
      }
    }
    try {
      onHead?.(status, contentType === undefined ? undefined : String(contentType));
    } catch {
      // Tracking never costs the page; the tracker client logs its own failures.
    }
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse['writeHead'];
}

/** What an upgrade gets when the upstream cannot be reached: a plain 502, then the socket closes. */
const UPGRADE_FAILED =
  'HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: 32\r\nconnection: close\r\n\r\nThe site is unavailable just now';

function isObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

export function createCapigramProxy(options: CapigramProxyOptions): CapigramProxy {
  const settings = resolveProxySettings(options);
  const log = options.logger ?? pino({ name: 'capigram-proxy', level: process.env.LOG_LEVEL ?? 'info' });
  const now = options.now ?? Date.now;
  const tracker = createTrackerClient({
    trackerUrl: settings.tracker,
    logger: log,
    timeoutMs: settings.trackerTimeoutMs,
    attempts: settings.trackerAttempts,
    inviteTimeoutMs: settings.inviteTimeoutMs,
    maxPending: settings.trackerMaxPending,
    breakerCooldownMs: settings.trackerCooldownMs,
  });

  // Only with a consent cookie does the site's mode matter: it decides for visitors without one.
  const consentMode =
    settings.consentCookie === undefined
      ? undefined
      : watchConsentMode(settings.tracker, settings.websiteId, settings.consentModeRefreshMs, log);
  const consentOf = (req: IncomingMessage) =>
    visitorConsent(req.headers.cookie, settings.consentCookie, consentMode?.current());
  /** A visit without consent is sent with nothing of the visitor: no IP, User-Agent or referrer. */
  const anonymousContext = (view: RequestView): TrackerCallContext => ({ client: {}, origin: view.origin });

  const upstream = settings.upstream === undefined ? undefined : new URL(settings.upstream);
  const ownAgent =
    upstream === undefined || options.agent !== undefined
      ? undefined
      : upstream.protocol === 'https:'
        ? new https.Agent({ keepAlive: true })
        : new http.Agent({ keepAlive: true });
  const proxy =
    upstream === undefined
      ? undefined
      : createProxyServer({
          target: upstream.href,
          xfwd: false,
          changeOrigin: settings.changeOrigin,
          agent: options.agent ?? ownAgent,
        });
  // http-proxy-3 turns a DELETE or OPTIONS without Content-Length into `Content-Length: 0` even
  // when the body is chunked; the body would then reach the upstream as the start of another
  // request (request smuggling on a kept-alive connection). Put the framing back before sending.
  const chunked = new WeakSet<IncomingMessage>();
  proxy?.before('web', 'stream', (req) => {
    if (!chunked.has(req)) return;
    delete req.headers['content-length'];
    req.headers['transfer-encoding'] = 'chunked';
  });
  // With an upstream, a navigation's response head is known on http-proxy-3's `proxyRes`, before
  // the upstream's headers are copied: our cookies join the upstream's there, and the pageview is
  // decided there. Wrapping `res.writeHead` instead (as the mounted handler must) cost the proxy
  // about 25 µs a request under load, more than all of the pageview's own work (docs/proxy.md).
  const pageviews = new WeakMap<ServerResponse, Pageview>();
  proxy?.on('proxyRes', (proxyRes, _req, res) => {
    // An upstream that drops its connection mid-body: http-proxy-3's pipe just stops, and the
    // visitor would wait for the rest forever. Cut the visitor's response too, so the browser
    // sees a broken download (and may retry) instead of a hang.
    proxyRes.once('close', () => {
      if (!proxyRes.complete && !res.destroyed) {
        log.warn({ status: proxyRes.statusCode }, 'upstream closed the connection mid-response');
        res.destroy();
      }
    });
    const pageview = pageviews.get(res);
    if (pageview === undefined) return;
    pageviews.delete(res);
    const theirs = proxyRes.headers['set-cookie'];
    proxyRes.headers['set-cookie'] =
      theirs === undefined ? pageview.cookies : [...theirs, ...pageview.cookies];
    answered(pageview, proxyRes.statusCode ?? 0, proxyRes.headers['content-type']);
  });
  proxy?.on('error', (error, req, res) => {
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
      const pageview = pageviews.get(res);
      if (pageview !== undefined) res.appendHeader('set-cookie', pageview.cookies);
      sendUpstreamUnavailable(res);
    }
  });

  const scopeOf = (view: RequestView): CookieScope => ({
    secure: view.proto === 'https',
    domain: settings.cookieDomain,
  });
  const contextOf = (view: RequestView): TrackerCallContext => ({
    client: { ip: view.clientIp, userAgent: view.userAgent },
    origin: view.origin,
  });
  const referrerOf = (req: IncomingMessage): string | undefined => req.headers.referer;

  function passThrough(
    req: IncomingMessage,
    res: ServerResponse,
    view: RequestView,
    next: NextFunction | undefined,
  ): void {
    if (proxy !== undefined) {
      setForwardedHeaders(req.headers, view);
      if (req.headers['transfer-encoding'] !== undefined) chunked.add(req);
      proxy.web(req, res);
    } else if (next !== undefined) {
      dropCapigramHeaders(req.headers);
      next();
    } else {
      sendNotFound(res);
    }
  }

  function patchFbp(visitor: Visitor, view: RequestView): Promise<unknown> | undefined {
    if (!visitor.needsFbpPatch || visitor.fbp === undefined) return undefined;
    return tracker.updateFbp(
      { websiteId: settings.websiteId, tempId: visitor.tempId, fbp: visitor.fbp },
      contextOf(view),
    );
  }

  function preparePageview(req: IncomingMessage, res: ServerResponse, view: RequestView): void {
    const consent = consentOf(req);
    if (consent === 'denied') {
      // Counted, nothing more: no cookie written, no cookie read, no fbp patched.
      const counted: Pageview = {
        cookies: [],
        body: consentlessInitBody(settings.websiteId, view),
        view,
        context: anonymousContext(view),
        patched: undefined,
      };
      if (proxy === undefined)
        onResponseHead(res, [], (status, contentType) => answered(counted, status, contentType));
      else pageviews.set(res, counted);
      return;
    }
    const nowMs = now();
    const visitor = readVisitor(req.headers.cookie, view.search, nowMs);
    // Older visits of this browser get their fbp before the new visit is created, so the
    // tracker's "latest visit" is still the one that lacked it.
    const patched = patchFbp(visitor, view);
    const body = initBody(settings.websiteId, visitor, attributionOf(view, referrerOf(req), visitor));
    if (consent === 'granted') body.consent = 'granted';
    const pageview: Pageview = {
      cookies: visitorCookies(visitor, nowMs, scopeOf(view)),
      body,
      view,
      context: contextOf(view),
      patched,
    };
    if (proxy === undefined)
      onResponseHead(res, pageview.cookies, (status, contentType) => answered(pageview, status, contentType));
    else pageviews.set(res, pageview);
  }

  /** The navigation's answer is known: post the visit if it is a page the visitor sees. */
  function answered(pageview: Pageview, status: number, contentType: string | undefined): void {
    try {
      if (!isPageResponse(status, contentType)) return;
      const { body, context, patched } = pageview;
      // Without a patch to wait for (nearly always), no promise hop before the call.
      if (patched === undefined) void tracker.init(body, context);
      else void patched.then(() => tracker.init(body, context));
    } catch (error) {
      // Tracking never costs the page.
      log.error({ err: describe(error) }, 'tracking failed after the answer');
    }
  }

  /**
   * A click the visitor waits on (an invite, or an entry into a bot): the browser's ids as
   * cookies, a visit recorded first when the session has none, then `ask` for the link.
   */
  async function handleClick(
    req: IncomingMessage,
    res: ServerResponse,
    view: RequestView,
    ask: (
      visitor: Pick<Visitor, 'tempId' | 'sessionId'>,
      context: TrackerCallContext & { referrer?: string | undefined },
      urgent: { deadline: number },
      consent: 'granted' | 'denied' | undefined,
    ) => Promise<string | undefined>,
  ): Promise<void> {
    // One budget for everything the visitor waits on, whatever it takes.
    const urgent = { deadline: performance.now() + settings.inviteTimeoutMs };
    const consent = consentOf(req);
    if (consent === 'denied') {
      // The click still leads to the channel, through a link of a visit of its own that keeps
      // nothing of the visitor (its join is organic): no cookie, no id of the browser, no IP.
      const ids = { tempId: randomUUID(), sessionId: randomUUID() };
      await answerClick(res, await ask(ids, anonymousContext(view), urgent, 'denied'));
      return;
    }
    const nowMs = now();
    const visitor = readVisitor(req.headers.cookie, view.search, nowMs);
    const context = { ...contextOf(view), referrer: referrerOf(req) };
    onResponseHead(res, visitorCookies(visitor, nowMs, scopeOf(view)), undefined);
    if (visitor.tempIdIsNew || visitor.sessionIdIsNew) {
      // No visit for this session yet (a shared link, or 30 idle minutes on the page): record one
      // first, so the click has a visit to belong to. The only tracker call a visitor waits for.
      const body = initBody(settings.websiteId, visitor, attributionOf(view, referrerOf(req), visitor));
      if (consent === 'granted') body.consent = 'granted';
      await tracker.init(body, context, urgent);
    } else {
      void patchFbp(visitor, view);
    }
    await answerClick(
      res,
      await ask(visitor, context, urgent, consent === 'granted' ? 'granted' : undefined),
    );
  }

  function answerClick(res: ServerResponse, location: string | undefined): void {
    if (res.destroyed) return;
    if (location !== undefined) sendRedirect(res, location);
    else if (settings.fallbackUrl !== undefined) sendRedirect(res, settings.fallbackUrl);
    else sendInviteLater(res);
  }

  /** `GET <entryPath>[?entry=ID]`: to the bot (or its Mini App) with a fresh payload, as `track/entry` hands it out. */
  function handleEntry(req: IncomingMessage, res: ServerResponse, view: RequestView): Promise<void> {
    const requested = new URLSearchParams(view.search).get('entry');
    return handleClick(req, res, view, (visitor, context, urgent, consent) =>
      tracker.entry(
        {
          website: settings.websiteId,
          tid: visitor.tempId,
          sid: visitor.sessionId,
          ...(requested ? { entry: requested } : {}),
          ...(consent === undefined ? {} : { consent }),
        },
        context,
        urgent,
      ),
    );
  }

  function handleInvite(req: IncomingMessage, res: ServerResponse, view: RequestView): Promise<void> {
    // A channel the link names is asked for as it is, even one the tracker will refuse (then the
    // visitor gets the fallback): silently swapping in the default would send them elsewhere.
    const requested = new URLSearchParams(view.search).get('channel');
    const channel = requested !== null && requested !== '' ? requested : settings.channel;
    return handleClick(req, res, view, (visitor, context, urgent, consent) =>
      tracker.invite(
        {
          website: settings.websiteId,
          tid: visitor.tempId,
          sid: visitor.sessionId,
          ...(channel === undefined ? {} : { channel }),
          ...(consent === undefined ? {} : { consent }),
        },
        context,
        urgent,
      ),
    );
  }

  const handler = function capigramProxy(
    req: IncomingMessage,
    res: ServerResponse,
    next?: NextFunction,
  ): void {
    const view = viewRequest(req, settings.trust);
    try {
      const click =
        req.method !== 'GET'
          ? undefined
          : view.pathname === settings.invitePath
            ? handleInvite
            : view.pathname === settings.entryPath
              ? handleEntry
              : undefined;
      if (click !== undefined) {
        click(req, res, view).catch((error: unknown) => {
          log.error({ err: describe(error) }, 'invite handling failed');
          if (res.headersSent) return;
          if (settings.fallbackUrl !== undefined) sendRedirect(res, settings.fallbackUrl);
          else sendInviteLater(res);
        });
        return;
      }
      if (isHtmlNavigation(req, view.pathname)) preparePageview(req, res, view);
    } catch (error) {
      // Tracking must never cost the page: whatever went wrong, the request still passes.
      log.error({ err: describe(error) }, 'tracking failed before pass-through');
    }
    passThrough(req, res, view, next);
  } as CapigramProxy;

  handler.upgrade = (req, socket, head) => {
    if (proxy === undefined) {
      socket.destroy();
      return;
    }
    setForwardedHeaders(req.headers, viewRequest(req, settings.trust));
    proxy.ws(req, socket, head);
  };
  handler.pendingTrackerCalls = () => tracker.pending();
  handler.close = async ({ drainMs = 5_000 } = {}) => {
    consentMode?.stop();
    await tracker.drain(drainMs);
    ownAgent?.destroy();
  };
  return handler;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
