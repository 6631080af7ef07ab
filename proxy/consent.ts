/**
 * The visitor's consent as the proxy reads it (docs/consent.md): the `--consent-cookie` the site's
 * banner writes, else the site's consent mode, which the proxy asks the tracker for at start and
 * again every minute. Until the mode is known, a visitor without the cookie is treated as one
 * without consent: the safe side when the site requires it.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { readCookies } from '../shared/cookies.js';
import { hasNul } from '../shared/text.js';
import {
  type ConsentMode,
  trackConsentResponseSchema,
  type TrackInitBody,
  WIRE_LIMITS,
} from '../shared/tracker-wire.js';
import type { RequestView } from './request-view.js';

/** `implied`: no consent cookie configured, or none needed; `granted`/`denied`: what the visitor said (or the site's mode for silence). */
export type VisitorConsent = 'implied' | 'granted' | 'denied';

export function visitorConsent(
  cookieHeader: string | undefined,
  cookieName: string | undefined,
  mode: ConsentMode | undefined,
): VisitorConsent {
  if (cookieName === undefined) return 'implied';
  const said = readCookies(cookieHeader)[cookieName];
  if (said === 'granted' || said === 'denied') return said;
  return mode === 'implied' ? 'implied' : 'denied';
}

/**
 * The `track/init` of a visit without consent: counted, with the page's path alone, under ids
 * made for this request (never a cookie's), and sent without the visitor's IP or User-Agent.
 */
export function consentlessInitBody(websiteId: string, view: RequestView): TrackInitBody {
  const body: TrackInitBody = {
    websiteId,
    tempId: randomUUID(),
    sessionId: randomUUID(),
    visitRequestId: randomUUID(),
    consent: 'denied',
  };
  const path = view.pathname;
  if (path.length <= WIRE_LIMITS.url && !hasNul(path)) body.landingPage = path;
  const href = view.origin === undefined ? undefined : `${view.origin}${path}`;
  if (href !== undefined && href.length <= WIRE_LIMITS.url && !hasNul(href)) body.href = href;
  return body;
}

export interface ConsentModeWatch {
  /** The site's mode as last answered; undefined until the first answer. */
  current(): ConsentMode | undefined;
  stop(): void;
}

/** Asks `GET {tracker}/backend/track/consent` now and every `refreshMs`; a failed ask keeps the last answer. */
export function watchConsentMode(
  tracker: string,
  websiteId: string,
  refreshMs: number,
  log: Logger,
): ConsentModeWatch {
  let mode: ConsentMode | undefined;
  let stopped = false;
  const ask = async (): Promise<void> => {
    try {
      const res = await fetch(`${tracker}/backend/track/consent?website=${encodeURIComponent(websiteId)}`, {
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(3_000),
      });
      const parsed = trackConsentResponseSchema.safeParse(await res.json().catch(() => undefined));
      if (res.ok && parsed.success) mode = parsed.data.consentMode;
      else log.warn({ status: res.status }, "the tracker did not answer the site's consent mode");
    } catch (error) {
      log.warn(
        { err: error instanceof Error ? error.message : String(error) },
        "the site's consent mode could not be asked",
      );
    }
  };
  void ask();
  const timer = setInterval(() => {
    if (!stopped) void ask();
  }, refreshMs);
  timer.unref();
  return {
    current: () => mode,
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}
