/**
 * The first-party reverse proxy as a mountable Node request handler.
 *
 * Every request passes through untouched (http-proxy-3, or `next()` when mounted in front of the
 * site's own app) except two kinds:
 * - HTML navigations (`pageviews.ts`): cookies, and `track/init` beside the response;
 * - `GET <invitePath>` and `GET <entryPath>` (`clicks.ts`): a 302 to the link the tracker hands
 *   out, or to the fallback URL, or a plain page; never an error.
 */
import type * as http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { pino, type Logger } from 'pino';
import { createClicks } from './clicks.js';
import { watchConsentMode } from './consent.js';
import { resolveProxySettings, type ProxySettingsInput } from './options.js';
import { sendNotFound } from './pages.js';
import { createPageviews, type Pageview } from './pageviews.js';
import { createProxyContext, describeError } from './proxy-context.js';
import { dropCapigramHeaders, isHtmlNavigation, viewRequest } from './request-view.js';
import { createTrackerClient } from './tracker-client.js';
import { createUpstream } from './upstream.js';

export interface CapigramProxyOptions extends ProxySettingsInput {
  /** Where warnings about the tracker and the upstream go; default: pino at `LOG_LEVEL`. */
  logger?: Logger;
  /** Milliseconds since the epoch; injectable so tests can move time (cookie expiry, fbc). */
  now?: () => number;
  /** Agent for upstream connections; default: a keep-alive agent owned (and closed) by the proxy. */
  agent?: http.Agent;
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

export function createCapigramProxy(options: CapigramProxyOptions): CapigramProxy {
  const settings = resolveProxySettings(options);
  const log = options.logger ?? pino({ name: 'capigram-proxy', level: process.env.LOG_LEVEL ?? 'info' });
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
  const ctx = createProxyContext(settings, tracker, log, options.now ?? Date.now, consentMode);

  const pageviews = createPageviews(ctx, () => upstream?.hold);
  const upstream =
    settings.upstream === undefined
      ? undefined
      : createUpstream<Pageview>({
          url: new URL(settings.upstream),
          changeOrigin: settings.changeOrigin,
          agent: options.agent,
          log,
          onHead: pageviews.answered,
        });
  const clicks = createClicks(ctx);

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
            ? clicks.invite
            : view.pathname === settings.entryPath
              ? clicks.entry
              : undefined;
      if (click !== undefined) {
        click(req, res, view).catch((error: unknown) => {
          log.error({ err: describeError(error) }, 'invite handling failed');
          if (!res.headersSent) clicks.fallback(res);
        });
        return;
      }
      if (isHtmlNavigation(req, view.pathname)) pageviews.prepare(req, res, view);
    } catch (error) {
      // Tracking must never cost the page: whatever went wrong, the request still passes.
      log.error({ err: describeError(error) }, 'tracking failed before pass-through');
    }
    if (upstream !== undefined) {
      upstream.web(req, res, view);
    } else if (next !== undefined) {
      dropCapigramHeaders(req.headers);
      next();
    } else {
      sendNotFound(res);
    }
  } as CapigramProxy;

  handler.upgrade = (req, socket, head) => {
    if (upstream === undefined) socket.destroy();
    else upstream.ws(req, socket, head, viewRequest(req, settings.trust));
  };
  handler.pendingTrackerCalls = () => tracker.pending();
  handler.close = async ({ drainMs = 5_000 } = {}) => {
    consentMode?.stop();
    await tracker.drain(drainMs);
    upstream?.close();
  };
  return handler;
}
