// Shared machinery of the loopback fakes: an HTTP server on 127.0.0.1:0, a log of what it
// received, waiting on that log, and failure injection. Each platform module supplies only its
// routes and the platform-specific shape of each injected failure.
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';

export type FailureKind =
  /** A 5xx. By default in the platform's own error shape; `gateway: true` answers as a load
   *  balancer in front of the platform would (plain HTML, no JSON), which clients must survive. */
  | { type: 'status'; status: 500 | 502 | 503; gateway?: boolean }
  | { type: 'rateLimit'; retryAfterSec: number }
  /** Accepts the request and never answers; the client must give up on its own. */
  | { type: 'timeout' }
  | { type: 'invalidToken' }
  /** Destroys the socket without an answer. */
  | { type: 'reset' }
  /** Does what was asked, then destroys the socket: the caller cannot know it was done. */
  | { type: 'lostAnswer' };

/** A failure the platform answers itself (everything but the two transport-level kinds). */
export type ReplyFailure = Exclude<
  FailureKind,
  { type: 'timeout' } | { type: 'reset' } | { type: 'lostAnswer' }
>;

export interface ReceivedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  /** Parsed JSON or form body; undefined when absent or unparseable (see `bodyError`). */
  body: unknown;
  rawBody: string;
  bodyError?: string;
  /** `performance.now()` at arrival: monotonic, for measuring retry intervals. */
  receivedAt: number;
  /** `Date.now()` at arrival. */
  receivedAtEpochMs: number;
  /** Set when an injected failure (or `down`) answered instead of the platform. */
  injected?: FailureKind['type'];
  /** HTTP status the fake answered (set before any `latencyMs` delay); undefined for timeout/reset. */
  status?: number;
}

export interface Reply {
  status: number;
  /** Objects are sent as JSON; strings as text/html. */
  body: unknown;
  headers?: Record<string, string>;
}

export interface FakeOptions {
  /** Delay before every answer, injected failures included. */
  latencyMs?: number;
}

type Waiter = {
  predicate: (log: ReceivedRequest[]) => boolean;
  resolve: (log: ReceivedRequest[]) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
};

export abstract class FakeServer {
  /** Base URL, no trailing slash. Empty until `listen()` resolved. */
  url = '';
  readonly received: ReceivedRequest[] = [];
  latencyMs: number;
  /** When true every request is answered 502 by the "gateway", as when the platform is down. */
  down = false;

  private readonly server: Server;
  private readonly initialLatencyMs: number;
  private queued: FailureKind[] = [];
  private rate: { p: number; kinds: FailureKind[]; random: () => number } | undefined;
  private waiters = new Set<Waiter>();
  private closed = false;

  protected constructor(
    readonly name: string,
    options: FakeOptions = {},
  ) {
    this.latencyMs = this.initialLatencyMs = options.latencyMs ?? 0;
    this.server = createServer((req, res) => void this.onRequest(req, res));
  }

  /** The platform's answer to a request no failure was injected into. Mutates platform state. */
  protected abstract route(req: ReceivedRequest): Reply;
  /** The platform's own shape of an injected failure. */
  protected abstract failureReply(kind: ReplyFailure, req: ReceivedRequest): Reply;
  /** Clears platform state (accepted events, links…) for `reset()`. */
  protected abstract resetState(): void;

  async listen(): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve());
    });
    const { port } = this.server.address() as AddressInfo;
    this.url = `http://127.0.0.1:${port}`;
    return this;
  }

  /** Stops the server and destroys every open socket, hung `timeout` requests included. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const w of this.waiters) {
      clearTimeout(w.timer);
      w.reject(new Error(`${this.name} fake closed while waiting`));
    }
    this.waiters.clear();
    const done = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await done;
  }

  /** Forgets the log, injected failures, latency changes and platform state. */
  reset(): void {
    this.received.length = 0;
    this.queued = [];
    this.rate = undefined;
    this.down = false;
    this.latencyMs = this.initialLatencyMs;
    this.resetState();
  }

  /** The next `n` requests fail with `kind` (queued after any earlier `failNext`). */
  failNext(n: number, kind: FailureKind): this {
    for (let i = 0; i < n; i++) this.queued.push(kind);
    return this;
  }

  /** Each request fails with probability `p`, with a kind drawn from `kinds`. Seeded, so a run
   *  is reproducible. `failRate(0, [])` turns it off. `failNext` takes precedence. */
  failRate(p: number, kinds: FailureKind[], seed = 1): this {
    if (p > 0 && kinds.length === 0) throw new Error('failRate needs at least one failure kind');
    this.rate = p > 0 ? { p, kinds, random: mulberry32(seed) } : undefined;
    return this;
  }

  /** Resolves with the log once `predicate(log)` holds; rejects after `timeoutMs`. The predicate
   *  is checked after each request has been handled, so platform state is already updated. */
  waitFor(predicate: (log: ReceivedRequest[]) => boolean, timeoutMs = 2000): Promise<ReceivedRequest[]> {
    if (predicate(this.received)) return Promise.resolve(this.received);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        predicate,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters.delete(waiter);
          const seen = this.received.map(
            (r) => `${r.method} ${r.path} → ${r.injected ?? r.status ?? 'pending'}`,
          );
          reject(
            new Error(
              `${this.name} fake: waitFor timed out after ${timeoutMs} ms; received ${seen.length} request(s): ${JSON.stringify(seen)}`,
            ),
          );
        }, timeoutMs),
      };
      this.waiters.add(waiter);
    });
  }

  private notify(): void {
    for (const w of this.waiters) {
      if (!w.predicate(this.received)) continue;
      clearTimeout(w.timer);
      this.waiters.delete(w);
      w.resolve(this.received);
    }
  }

  private nextFailure(): FailureKind | undefined {
    if (this.down) return { type: 'status', status: 502, gateway: true };
    const queued = this.queued.shift();
    if (queued) return queued;
    if (this.rate && this.rate.random() < this.rate.p) {
      return this.rate.kinds[Math.floor(this.rate.random() * this.rate.kinds.length)];
    }
    return undefined;
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let entry: ReceivedRequest;
    try {
      entry = await parseRequest(req);
    } catch {
      req.socket.destroy(); // the client went away mid-body; there is no one to answer
      return;
    }
    this.received.push(entry);
    const failure = this.nextFailure();
    if (failure) entry.injected = failure.type;

    let reply: Reply | undefined;
    if (!failure || failure.type === 'lostAnswer') reply = this.safeRoute(entry);
    else if (failure.type === 'status' && failure.gateway) reply = gatewayReply(failure.status);
    else if (failure.type !== 'timeout' && failure.type !== 'reset')
      reply = this.failureReply(failure, entry);
    if (failure?.type === 'lostAnswer') reply = undefined;
    entry.status = reply?.status;
    this.notify();

    if (failure?.type === 'timeout') return; // left open until the client aborts or close()
    if (this.latencyMs > 0) await sleep(this.latencyMs);
    if (failure?.type === 'reset' || failure?.type === 'lostAnswer') {
      req.socket.destroy();
      return;
    }
    if (reply && !res.destroyed) send(res, reply);
  }

  // A bug in a fake must show up as a loud 500 naming the fake, not as a hung test.
  private safeRoute(entry: ReceivedRequest): Reply {
    try {
      return this.route(entry);
    } catch (e) {
      return {
        status: 500,
        body: { fakeError: `${this.name} fake crashed: ${(e as Error).stack ?? String(e)}` },
      };
    }
  }
}

async function parseRequest(req: IncomingMessage): Promise<ReceivedRequest> {
  const receivedAt = performance.now();
  const receivedAtEpochMs = Date.now();
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const rawBody = Buffer.concat(chunks).toString('utf8');
  const url = new URL(req.url ?? '/', 'http://fake');
  const entry: ReceivedRequest = {
    method: req.method ?? 'GET',
    path: url.pathname,
    query: Object.fromEntries(url.searchParams),
    headers: req.headers,
    body: undefined,
    rawBody,
    receivedAt,
    receivedAtEpochMs,
  };
  if (rawBody.length === 0) return entry;
  const type = req.headers['content-type'] ?? '';
  if (type.includes('application/x-www-form-urlencoded')) {
    entry.body = Object.fromEntries(new URLSearchParams(rawBody));
  } else {
    try {
      entry.body = JSON.parse(rawBody);
    } catch (e) {
      entry.bodyError = (e as Error).message;
    }
  }
  return entry;
}

function send(res: ServerResponse, reply: Reply): void {
  const isText = typeof reply.body === 'string';
  const payload = isText ? (reply.body as string) : JSON.stringify(reply.body);
  res.writeHead(reply.status, {
    'content-type': isText ? 'text/html' : 'application/json; charset=UTF-8',
    'content-length': Buffer.byteLength(payload),
    ...reply.headers,
  });
  res.end(payload);
}

function gatewayReply(status: number): Reply {
  const title =
    status === 502 ? 'Bad Gateway' : status === 503 ? 'Service Unavailable' : 'Internal Server Error';
  return {
    status,
    body: `<html>\r\n<head><title>${status} ${title}</title></head>\r\n<body>\r\n<center><h1>${status} ${title}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n`,
  };
}

// Unref'd so a pending latency delay never keeps the process alive after close().
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** Small seeded PRNG (mulberry32): reproducible failure patterns without a dependency. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// ---- helpers shared by the platform modules ----

export const SHA256_HEX = /^[0-9a-f]{64}$/;

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** True when `v` is a string, or a non-empty array of strings, each matching `re`. */
export function matchesEach(v: unknown, re: RegExp): boolean {
  const values = Array.isArray(v) ? v : [v];
  return values.length > 0 && values.every((x) => typeof x === 'string' && re.test(x));
}

/** A value this large cannot be seconds since 1970 (it would be after year 5138): it is milliseconds. */
export function looksLikeMilliseconds(t: number): boolean {
  return t > 1e11;
}

export function randomId(
  length: number,
  alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789',
): string {
  let s = '';
  for (let i = 0; i < length; i++) s += alphabet[Math.floor(Math.random() * alphabet.length)];
  return s;
}

export interface DedupStats {
  total: number;
  distinct: number;
  duplicates: number;
}

/** Counts accepted events the way the platforms deduplicate them: by a key such as
 *  event name + event id. Events without an id are always distinct. */
export function dedupStats<T>(events: T[], key: (e: T) => string | undefined): DedupStats {
  const keys = new Set<string>();
  let distinct = 0;
  for (const e of events) {
    const k = key(e);
    if (k === undefined) distinct++;
    else if (!keys.has(k)) {
      keys.add(k);
      distinct++;
    }
  }
  return { total: events.length, distinct, duplicates: events.length - distinct };
}

/** A validation failure inside a route; each platform turns it into its own error shape. */
export class Invalid extends Error {
  constructor(
    message: string,
    readonly detail: Record<string, unknown> = {},
  ) {
    super(message);
  }
}
