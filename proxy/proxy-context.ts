/**
 * What every part of the proxy's request handling shares: its settings, the tracker client, and
 * how a request's visitor is described to the tracker (context, consent, cookie scope).
 */
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import type { CookieScope } from '../shared/cookies.js';
import { visitorConsent, type ConsentModeWatch, type VisitorConsent } from './consent.js';
import type { ProxySettings } from './options.js';
import type { RequestView } from './request-view.js';
import type { TrackerCallContext, TrackerClient } from './tracker-client.js';
import type { Visitor } from './visitor.js';

export interface ProxyContext {
  readonly settings: ProxySettings;
  readonly tracker: TrackerClient;
  readonly log: Logger;
  /** Milliseconds since the epoch (injectable: cookie expiry and fbc depend on it). */
  readonly now: () => number;
  consentOf(req: IncomingMessage): VisitorConsent;
  /** The visitor's IP and User-Agent and the site's origin, for a visit with consent. */
  contextOf(view: RequestView): TrackerCallContext;
  /** A visit without consent is sent with nothing of the visitor: no IP, User-Agent or referrer. */
  anonymousContext(view: RequestView): TrackerCallContext;
  scopeOf(view: RequestView): CookieScope;
  /** Sends the browser's new `_fbp` to its older visits, when it has one they lack. */
  patchFbp(visitor: Visitor, view: RequestView): Promise<unknown> | undefined;
}

export function createProxyContext(
  settings: ProxySettings,
  tracker: TrackerClient,
  log: Logger,
  now: () => number,
  consentMode: ConsentModeWatch | undefined,
): ProxyContext {
  const contextOf = (view: RequestView): TrackerCallContext => ({
    client: { ip: view.clientIp, userAgent: view.userAgent },
    origin: view.origin,
  });
  return {
    settings,
    tracker,
    log,
    now,
    consentOf: (req) => visitorConsent(req.headers.cookie, settings.consentCookie, consentMode?.current()),
    contextOf,
    anonymousContext: (view) => ({ client: {}, origin: view.origin }),
    scopeOf: (view) => ({ secure: view.proto === 'https', domain: settings.cookieDomain }),
    patchFbp(visitor, view) {
      if (!visitor.needsFbpPatch || visitor.fbp === undefined) return undefined;
      return tracker.updateFbp(
        { websiteId: settings.websiteId, tempId: visitor.tempId, fbp: visitor.fbp },
        contextOf(view),
      );
    },
  };
}

export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
