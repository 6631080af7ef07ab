/**
 * Best-effort calls from the proxy to Capigram's keyless tracker surface.
 *
 * Nothing here throws or rejects: a slow, failing or unreachable tracker costs a log line, never a
 * page. Each attempt is bounded by a timeout; retries reuse the very same body (and with it the
 * `visitRequestId`, which makes a repeated `track/init` return the same visit).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { clientContextHeaders, type ClientContext } from '../shared/headers.js';
import {
  trackInitResponseSchema,
  trackUpdateFbpResponseSchema,
  type TrackInitBody,
  type TrackInitResponse,
  type TrackInviteQuery,
  type TrackUpdateFbpBody,
  type TrackUpdateFbpResponse,
} from '../shared/tracker-wire.js';

export interface TrackerCallContext {
  /** The visitor's IP and User-Agent, sent as `X-Capigram-Client-*`. */
  client: ClientContext;
  /** The site's own origin (`https://shop.example.com`), sent as `Origin` for domain validation. */
  origin: string | undefined;
}

export interface TrackerClientOptions {
  /** Capigram's `{site_url}`, without a trailing slash. */
  trackerUrl: string;
  logger: Logger;
  timeoutMs: number;
  attempts: number;
  inviteTimeoutMs: number;
  /**
   * Background calls allowed in flight at once. A stalled tracker would otherwise collect one
   * pending call (and socket) per pageview; past the bound, new pageviews go unreported.
   */
  maxPending?: number;
  fetch?: typeof fetch;
}

export interface TrackerClient {
  init(body: TrackInitBody, context: TrackerCallContext): Promise<TrackInitResponse | undefined>;
  updateFbp(body: TrackUpdateFbpBody, context: TrackerCallContext): Promise<TrackUpdateFbpResponse | undefined>;
  /** The invite URL the tracker redirected to, or undefined when it could not give one in time. */
  invite(query: TrackInviteQuery, context: TrackerCallContext): Promise<string | undefined>;
  /** Calls still running (they never outlive their timeouts). */
  pending(): number;
  /** Waits for the running calls, at most `maxWaitMs`. */
  drain(maxWaitMs: number): Promise<void>;
}

/** Statuses worth another attempt: the request may succeed later as it is. */
function isTransient(status: number): boolean {
  return status === 408 || status === 425 || status === 429 || status >= 500;
}

const RETRY_BASE_DELAY_MS = 100;
export const DEFAULT_MAX_PENDING = 1_000;
/** At most one "calls dropped" line per interval, however many are dropped. */
const DROP_LOG_INTERVAL_MS = 10_000;

export function createTrackerClient(options: TrackerClientOptions): TrackerClient {
  const doFetch = options.fetch ?? fetch;
  const running = new Set<Promise<unknown>>();
  const log = options.logger;
  const maxPending = options.maxPending ?? DEFAULT_MAX_PENDING;
  let background = 0;
  let dropped = 0;
  let lastDropLog = Number.NEGATIVE_INFINITY;

  function track<T>(promise: Promise<T>): Promise<T> {
    running.add(promise);
    void promise.finally(() => running.delete(promise));
    return promise;
  }

  function bounded<T>(op: string, call: () => Promise<T | undefined>): Promise<T | undefined> {
    if (background >= maxPending) {
      dropped += 1;
      const now = performance.now();
      if (now - lastDropLog >= DROP_LOG_INTERVAL_MS) {
        lastDropLog = now;
        log.error({ op, dropped, maxPending }, 'tracker too slow: calls dropped');
      }
      return Promise.resolve(undefined);
    }
    background += 1;
    return track(call().finally(() => (background -= 1)));
  }

  function headers(context: TrackerCallContext, json: boolean): Record<string, string> {
    return {
      accept: 'application/json',
      ...(json ? { 'content-type': 'application/json' } : {}),
      ...(context.origin === undefined ? {} : { origin: context.origin }),
      ...clientContextHeaders(context.client),
    };
  }

  async function postJson<S extends z.ZodType>(
    op: string,
    path: string,
    body: object,
    context: TrackerCallContext,
    schema: S,
  ): Promise<z.output<S> | undefined> {
    const payload = JSON.stringify(body);
    for (let attempt = 1; attempt <= options.attempts; attempt += 1) {
      let retry: boolean;
      try {
        const response = await doFetch(`${options.trackerUrl}${path}`, {
          method: 'POST',
          headers: headers(context, true),
          body: payload,
          signal: AbortSignal.timeout(options.timeoutMs),
        });
        const text = await response.text();
        if (response.ok) {
          const parsed = schema.safeParse(safeJson(text));
          if (parsed.success) return parsed.data;
          log.warn({ op, status: response.status, body: text.slice(0, 200) }, 'tracker answered an unexpected body');
          return undefined;
        }
        retry = isTransient(response.status);
        log.warn({ op, attempt, status: response.status, body: text.slice(0, 200) }, 'tracker refused the call');
      } catch (error) {
        retry = true;
        log.warn({ op, attempt, err: describe(error) }, 'tracker unreachable');
      }
      if (!retry) return undefined;
      if (attempt < options.attempts) await sleep(RETRY_BASE_DELAY_MS * 3 ** (attempt - 1));
    }
    log.error({ op, attempts: options.attempts }, 'tracker call given up');
    return undefined;
  }

  async function invite(query: TrackInviteQuery, context: TrackerCallContext): Promise<string | undefined> {
    const search = new URLSearchParams({ website: query.website, tid: query.tid, sid: query.sid });
    if (query.channel !== undefined) search.set('channel', query.channel);
    const deadline = AbortSignal.timeout(options.inviteTimeoutMs);
    // A second attempt only when the first never reached the tracker (connection refused or
    // reset): a request that did arrive may already have handed out a pooled link.
    for (let attempt = 1; attempt <= 2; attempt += 1) {
      try {
        const response = await doFetch(`${options.trackerUrl}/backend/track/invite?${search}`, {
          method: 'GET',
          headers: headers(context, false),
          redirect: 'manual',
          signal: deadline,
        });
        await response.body?.cancel();
        const location = response.headers.get('location');
        if (response.status >= 300 && response.status < 400 && location !== null && isNavigable(location)) {
          return location;
        }
        log.warn({ op: 'invite', status: response.status, location }, 'tracker gave no invite redirect');
        return undefined;
      } catch (error) {
        log.warn({ op: 'invite', attempt, err: describe(error) }, 'tracker unreachable');
        if (deadline.aborted || !neverConnected(error)) return undefined;
      }
    }
    return undefined;
  }

  return {
    init: (body, context) =>
      bounded('init', () => postJson('init', '/backend/track/init', body, context, trackInitResponseSchema)),
    updateFbp: (body, context) =>
      bounded('update-fbp', () => postJson('update-fbp', '/backend/track/update-fbp', body, context, trackUpdateFbpResponseSchema)),
    invite: (query, context) => track(invite(query, context)),
    pending: () => running.size,
    async drain(maxWaitMs) {
      if (running.size === 0) return;
      const timer = sleep(maxWaitMs, undefined, { ref: false });
      await Promise.race([Promise.allSettled([...running]), timer]);
    },
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Only absolute web or Telegram URLs are followed: never a relative path or a script URL. */
function isNavigable(location: string): boolean {
  try {
    return ['https:', 'http:', 'tg:'].includes(new URL(location).protocol);
  } catch {
    return false;
  }
}

function errorCode(error: unknown): string | undefined {
  const cause = error instanceof Error ? (error.cause as { code?: unknown } | undefined) : undefined;
  const code = cause?.code ?? (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

function neverConnected(error: unknown): boolean {
  const code = errorCode(error);
  return code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'UND_ERR_SOCKET';
}

function describe(error: unknown): string {
  const code = errorCode(error);
  const message = error instanceof Error ? error.message : String(error);
  return code === undefined ? message : `${message} (${code})`;
}
