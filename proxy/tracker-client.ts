/**
 * Best-effort calls from the proxy to Capigram's keyless tracker surface.
 *
 * Nothing here throws or rejects: a slow, failing or unreachable tracker costs a log line, never a
 * page. Each attempt is bounded by a timeout; retries reuse the very same body (and with it the
 * `visitRequestId`, which makes a repeated `track/init` return the same visit). Background calls
 * are bounded in number, and a circuit breaker stops sending them while the tracker keeps failing,
 * so a dead tracker costs the proxy next to nothing.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { clientContextHeaders, type ClientContext } from '../shared/headers.js';
import { createCallGate } from './call-gate.js';
import { createPipelinedClient } from './pipelined-client.js';
import {
  trackInitResponseSchema,
  trackUpdateFbpResponseSchema,
  type TrackInitBody,
  type TrackInitResponse,
  type TrackEntryQuery,
  type TrackInviteQuery,
  type TrackUpdateFbpBody,
  type TrackUpdateFbpResponse,
  WIRE_LIMITS,
} from '../shared/tracker-wire.js';

export interface TrackerCallContext {
  /** The visitor's IP and User-Agent, sent as `X-Capigram-Client-*`. */
  client: ClientContext;
  /** The site's own origin (`https://shop.example.com`), sent as `Origin` for domain validation. */
  origin: string | undefined;
  /** The page the visitor clicked on (their `Referer`), passed on with invite clicks. */
  referrer?: string | undefined;
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
  /** Consecutive failed attempts that open the circuit (default 5). */
  breakerThreshold?: number;
  /** How long an open circuit drops background calls before one probe is let through (default 5 s). */
  breakerCooldownMs?: number;
}

/** A visitor is waiting: one attempt, over by `deadline` (a `performance.now()` instant). */
export interface Urgent {
  deadline: number;
}

export interface TrackerClient {
  init(
    body: TrackInitBody,
    context: TrackerCallContext,
    urgent?: Urgent,
  ): Promise<TrackInitResponse | undefined>;
  updateFbp(
    body: TrackUpdateFbpBody,
    context: TrackerCallContext,
  ): Promise<TrackUpdateFbpResponse | undefined>;
  /**
   * The invite URL the tracker redirected to, or undefined when it could not give one in time.
   * Always tried, whatever the circuit says: a visitor is waiting on this one.
   */
  invite(query: TrackInviteQuery, context: TrackerCallContext, urgent?: Urgent): Promise<string | undefined>;
  /** The bot (or Mini App) deep link `track/entry` redirected to; as `invite`. */
  entry(query: TrackEntryQuery, context: TrackerCallContext, urgent?: Urgent): Promise<string | undefined>;
  /** Calls still running (they never outlive their timeouts). */
  pending(): number;
  /** Waits for the running calls, at most `maxWaitMs`, then closes the kept-alive connections. */
  drain(maxWaitMs: number): Promise<void>;
}

export const DEFAULT_MAX_PENDING = 1_000;
const RETRY_BASE_DELAY_MS = 100;

/** Statuses worth another attempt: the request may succeed later as it is. */
function isTransient(status: number): boolean {
  return status === 408 || status === 425 || status === 429 || status >= 500;
}

class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
}

interface Answer {
  status: number;
  location: string | undefined;
}

export function createTrackerClient(options: TrackerClientOptions): TrackerClient {
  const log = options.logger;
  const base = new URL(options.trackerUrl);
  const secure = base.protocol === 'https:';
  const send = secure ? https.request : http.request;
  const agent = secure ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
  const basePath = base.pathname.replace(/\/+$/, '');
  const target = {
    protocol: base.protocol,
    hostname: base.hostname.replace(/^\[|\]$/g, ''),
    port: base.port,
    agent,
  };
  const pipeline = createPipelinedClient(options.trackerUrl);

  const gate = createCallGate({
    log,
    maxPending: options.maxPending ?? DEFAULT_MAX_PENDING,
    threshold: options.breakerThreshold ?? 5,
    cooldownMs: options.breakerCooldownMs ?? 5_000,
  });

  /**
   * An invite click over node:http, given up after `timeoutMs`. Invites are not pipelined: a
   * failed pipelined request cannot tell whether it reached the tracker, and an invite that did
   * may already have handed out a link.
   */
  function getInvite(path: string, headers: Record<string, string>, timeoutMs: number): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = send({ ...target, method: 'GET', path: `${basePath}${path}`, headers }, (res) => {
        res.resume();
        res.on('error', reject);
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, location: res.headers.location });
        });
      });
      const timer = setTimeout(
        () => req.destroy(new TimeoutError(`no answer within ${timeoutMs} ms`)),
        timeoutMs,
      );
      req.on('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      req.end();
    });
  }

  function headers(context: TrackerCallContext, json: boolean): Record<string, string> {
    const out = clientContextHeaders(context.client);
    out.accept = 'application/json';
    if (context.origin !== undefined) out.origin = context.origin;
    if (json) out['content-type'] = 'application/json';
    return out;
  }

  async function postJson<S extends z.ZodType>(
    op: string,
    path: string,
    body: object,
    context: TrackerCallContext,
    schema: S,
    urgent?: Urgent,
  ): Promise<z.output<S> | undefined> {
    const payload = JSON.stringify(body);
    const requestHeaders = headers(context, true);
    const attempts = urgent === undefined ? options.attempts : 1;
    for (let attempt = 1; attempt <= attempts; attempt += 1) {
      let retry: boolean;
      const timeoutMs =
        urgent === undefined ? options.timeoutMs : Math.floor(urgent.deadline - performance.now());
      if (timeoutMs <= 0) return undefined;
      try {
        const answer = await pipeline.request('POST', path, requestHeaders, payload, timeoutMs);
        const text = answer.body.toString('utf8');
        if (answer.status >= 200 && answer.status < 300) {
          gate.succeeded();
          const parsed = schema.safeParse(safeJson(text));
          if (parsed.success) return parsed.data;
          log.warn(
            { op, status: answer.status, body: text.slice(0, 200) },
            'tracker answered an unexpected body',
          );
          return undefined;
        }
        retry = isTransient(answer.status);
        if (retry) gate.failed();
        else gate.succeeded();
        log.warn(
          { op, attempt, status: answer.status, body: text.slice(0, 200) },
          'tracker refused the call',
        );
      } catch (error) {
        retry = true;
        gate.failed();
        log.warn({ op, attempt, err: describe(error) }, 'tracker unreachable');
      }
      if (!retry) return undefined;
      if (attempt < attempts) {
        await sleep(RETRY_BASE_DELAY_MS * 3 ** (attempt - 1));
        if (!gate.closed()) break;
      }
    }
    log.error({ op, attempts }, 'tracker call given up');
    return undefined;
  }

  async function invite(
    query: TrackInviteQuery,
    context: TrackerCallContext,
    urgent?: Urgent,
  ): Promise<string | undefined> {
    const search = new URLSearchParams({ website: query.website, tid: query.tid, sid: query.sid });
    if (query.channel !== undefined) search.set('channel', query.channel);
    if (query.consent !== undefined) search.set('consent', query.consent);
    return click('invite', `/backend/track/invite?${search}`, context, urgent);
  }

  async function entry(
    query: TrackEntryQuery,
    context: TrackerCallContext,
    urgent?: Urgent,
  ): Promise<string | undefined> {
    const search = new URLSearchParams({ website: query.website, tid: query.tid, sid: query.sid });
    if (query.entry !== undefined) search.set('entry', query.entry);
    if (query.consent !== undefined) search.set('consent', query.consent);
    return click('entry', `/backend/track/entry?${search}`, context, urgent);
  }

  /** A click the visitor waits on: the redirect's Location, or undefined. */
  async function click(
    op: 'invite' | 'entry',
    path: string,
    context: TrackerCallContext,
    urgent?: Urgent,
  ): Promise<string | undefined> {
    const deadline = urgent?.deadline ?? performance.now() + options.inviteTimeoutMs;
    // A second attempt only when the first never reached the tracker (connection refused or
    // reset): a request that did arrive may already have handed out a pooled link.
    for (let attempt = 1; attempt <= 2; attempt += 1) {
      const left = Math.floor(deadline - performance.now());
      if (left <= 0) return undefined;
      try {
        // Never followed: the Location is the visitor's to follow, not ours.
        const inviteHeaders = headers(context, false);
        if (context.referrer !== undefined && context.referrer.length <= WIRE_LIMITS.url)
          inviteHeaders.referer = context.referrer;
        const { status, location } = await getInvite(path, inviteHeaders, left);
        if (status >= 300 && status < 400 && location !== undefined && isNavigable(location)) return location;
        log.warn({ op, status, location }, `tracker gave no ${op} redirect`);
        return undefined;
      } catch (error) {
        log.warn({ op, attempt, err: describe(error) }, 'tracker unreachable');
        if (!neverConnected(error)) return undefined;
      }
    }
    return undefined;
  }

  return {
    init: (body, context, urgent) =>
      gate.bounded('init', () =>
        postJson('init', '/backend/track/init', body, context, trackInitResponseSchema, urgent),
      ),
    updateFbp: (body, context) =>
      gate.bounded('update-fbp', () =>
        postJson('update-fbp', '/backend/track/update-fbp', body, context, trackUpdateFbpResponseSchema),
      ),
    invite: (query, context, urgent) => gate.track(invite(query, context, urgent)),
    entry: (query, context, urgent) => gate.track(entry(query, context, urgent)),
    pending: () => gate.running(),
    async drain(maxWaitMs) {
      await gate.drain(maxWaitMs);
      agent.destroy();
      pipeline.close();
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
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

function neverConnected(error: unknown): boolean {
  const code = errorCode(error);
  return code === 'ECONNREFUSED' || code === 'ECONNRESET';
}

function describe(error: unknown): string {
  const code = errorCode(error);
  const message = error instanceof Error ? error.message : String(error);
  return code === undefined ? message : `${message} (${code})`;
}
