/**
 * A small HTTP/1.1 client that pipelines requests on a few kept-alive connections.
 *
 * The proxy posts one `track/init` per pageview. Through node:http each post costs about as much
 * CPU as proxying the page itself (a ClientRequest, header validation, at least one write per
 * request). Here every request queued during one turn of the event loop leaves in a single write,
 * and answers are read back in order, with no timer per request (one per connection watches the
 * earliest deadline). Only what the tracker surface needs is supported: requests with small
 * bodies, answers framed by Content-Length or chunked encoding.
 *
 * Pipelining's one hazard: when a connection dies (timeout, reset, `Connection: close`), the
 * requests queued behind the failing one fail too, without knowing whether the server saw them.
 * The callers here only send calls that are safe to repeat (`track/init` with its
 * `visitRequestId`, `track/update-fbp`), and retry them.
 */
import * as net from 'node:net';
import * as tls from 'node:tls';

export interface PipelinedAnswer {
  status: number;
  /** Lower-cased names; a repeated header keeps its last value. */
  headers: Record<string, string>;
  body: Buffer;
}

export class PipelineError extends Error {
  override readonly name = 'PipelineError';
  constructor(
    message: string,
    readonly code: 'ETIMEDOUT' | 'ECONNRESET' | 'ECONNREFUSED' | 'EPROTO' | 'ECLOSED',
  ) {
    super(message);
  }
}

const MAX_HEAD_BYTES = 16 * 1024;
const MAX_BODY_BYTES = 256 * 1024;
const UNSAFE_HEADER = /[\r\n\0]/;
const STATUS_LINE = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/;

interface Pending {
  resolve(answer: PipelinedAnswer): void;
  reject(error: Error): void;
  /** `performance.now()` instant past which the answer is overdue. */
  deadline: number;
  timeoutMs: number;
  /** No body in the answer (HEAD). */
  headOnly: boolean;
}

class Connection {
  readonly pending: Pending[] = [];
  private outbox: Buffer[] = [];
  private outboxBytes = 0;
  private flushScheduled = false;
  /**
   * One timer per connection, armed for the earliest deadline, instead of one per request: at a
   * few thousand requests a second, creating and clearing a timer per request is a measurable
   * share of the proxy's CPU. Answers come in order, so the timer rarely needs moving.
   */
  private deadlineTimer: NodeJS.Timeout | undefined;
  private armedFor = Number.POSITIVE_INFINITY;
  private buffer: Buffer = Buffer.alloc(0);
  private closed = false;
  private readonly socket: net.Socket;

  constructor(
    url: URL,
    private readonly onGone: (connection: Connection) => void,
  ) {
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    const host = url.hostname.replace(/^\[|\]$/g, '');
    this.socket =
      url.protocol === 'https:'
        ? tls.connect({
            host,
            port,
            servername: net.isIP(host) === 0 ? host : undefined,
            ALPNProtocols: ['http/1.1'],
          })
        : net.connect({ host, port });
    this.socket.setNoDelay(true);
    this.socket.on('data', (chunk: Buffer) => this.read(chunk));
    this.socket.on('error', (error: NodeJS.ErrnoException) =>
      this.fail(
        new PipelineError(error.message, error.code === 'ECONNREFUSED' ? 'ECONNREFUSED' : 'ECONNRESET'),
      ),
    );
    this.socket.on('close', () => this.fail(new PipelineError('connection closed', 'ECLOSED')));
  }

  get usable(): boolean {
    return !this.closed;
  }

  send(request: Buffer, timeoutMs: number, headOnly: boolean): Promise<PipelinedAnswer> {
    return new Promise((resolve, reject) => {
      const deadline = performance.now() + timeoutMs;
      this.pending.push({ resolve, reject, deadline, timeoutMs, headOnly });
      if (deadline < this.armedFor) this.arm(deadline);
      else this.deadlineTimer?.ref();
      this.outbox.push(request);
      this.outboxBytes += request.length;
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private arm(deadline: number): void {
    if (this.deadlineTimer !== undefined) clearTimeout(this.deadlineTimer);
    this.armedFor = deadline;
    this.deadlineTimer = setTimeout(
      () => this.checkDeadlines(),
      Math.max(0, Math.ceil(deadline - performance.now())),
    );
  }

  private checkDeadlines(): void {
    this.deadlineTimer = undefined;
    this.armedFor = Number.POSITIVE_INFINITY;
    if (this.closed) return;
    const now = performance.now();
    let earliest = Number.POSITIVE_INFINITY;
    for (const request of this.pending) {
      if (request.deadline <= now) {
        // A pipelined answer that does not come blocks every one behind it: drop the connection.
        this.fail(new PipelineError(`no answer within ${request.timeoutMs} ms`, 'ETIMEDOUT'));
        return;
      }
      earliest = Math.min(earliest, request.deadline);
    }
    if (earliest !== Number.POSITIVE_INFINITY) this.arm(earliest);
  }

  close(): void {
    this.fail(new PipelineError('client closed', 'ECLOSED'));
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.closed || this.outbox.length === 0) return;
    const batch = this.outbox.length === 1 ? this.outbox[0]! : Buffer.concat(this.outbox, this.outboxBytes);
    this.outbox = [];
    this.outboxBytes = 0;
    this.socket.write(batch);
  }

  private fail(error: PipelineError): void {
    if (this.closed) return;
    this.closed = true;
    this.onGone(this);
    this.socket.destroy();
    if (this.deadlineTimer !== undefined) clearTimeout(this.deadlineTimer);
    this.outbox = [];
    this.outboxBytes = 0;
    for (const request of this.pending.splice(0)) request.reject(error);
  }

  private read(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const request = this.pending[0];
      if (request === undefined) {
        if (this.buffer.length > 0) this.fail(new PipelineError('answer nobody asked for', 'EPROTO'));
        return;
      }
      const parsed = parseAnswer(this.buffer, request.headOnly);
      if (parsed === 'incomplete') {
        if (this.buffer.length > MAX_HEAD_BYTES + MAX_BODY_BYTES)
          this.fail(new PipelineError('answer too large', 'EPROTO'));
        return;
      }
      if (parsed === 'invalid') {
        this.fail(new PipelineError('malformed answer', 'EPROTO'));
        return;
      }
      this.pending.shift();
      // Nothing left to wait for: the armed timer may stay (it finds nothing), but must not hold
      // the process open.
      if (this.pending.length === 0) this.deadlineTimer?.unref();
      this.buffer = this.buffer.subarray(parsed.consumed);
      request.resolve(parsed.answer);
      if (parsed.answer.status >= 100 && parsed.answer.status < 200) continue;
      if (/\bclose\b/i.test(parsed.answer.headers.connection ?? '')) {
        this.fail(new PipelineError('server closed the connection', 'ECONNRESET'));
        return;
      }
    }
  }
}

type Parsed = { answer: PipelinedAnswer; consumed: number } | 'incomplete' | 'invalid';

/** One answer at the start of `data`, if it is all there. */
export function parseAnswer(data: Buffer, headOnly: boolean): Parsed {
  const headEnd = data.indexOf('\r\n\r\n');
  if (headEnd === -1) return data.length > MAX_HEAD_BYTES ? 'invalid' : 'incomplete';
  const head = data.toString('latin1', 0, headEnd);
  const firstEnd = head.indexOf('\r\n');
  const status = STATUS_LINE.exec(firstEnd === -1 ? head : head.slice(0, firstEnd));
  if (status?.[1] === undefined) return 'invalid';
  const code = Number(status[1]);
  const headers: Record<string, string> = {};
  // Line by line without splitting the head first: this runs once per pageview.
  for (let at = firstEnd + 2; firstEnd !== -1 && at <= head.length; ) {
    let end = head.indexOf('\r\n', at);
    if (end === -1) end = head.length;
    const colon = head.indexOf(':', at);
    if (colon <= at || colon > end) return 'invalid';
    headers[head.slice(at, colon).trim().toLowerCase()] = head.slice(colon + 1, end).trim();
    at = end + 2;
  }
  const start = headEnd + 4;
  if (headOnly || code === 204 || code === 304 || (code >= 100 && code < 200)) {
    return { answer: { status: code, headers, body: Buffer.alloc(0) }, consumed: start };
  }
  if (/\bchunked\b/i.test(headers['transfer-encoding'] ?? '')) {
    const chunks: Buffer[] = [];
    let at = start;
    for (;;) {
      const lineEnd = data.indexOf('\r\n', at);
      if (lineEnd === -1) return 'incomplete';
      const size = Number.parseInt(data.toString('latin1', at, lineEnd).split(';')[0] ?? '', 16);
      if (!Number.isInteger(size) || size < 0 || size > MAX_BODY_BYTES) return 'invalid';
      if (size === 0) {
        // The last chunk, then optional trailers, then an empty line.
        const end = data.indexOf('\r\n\r\n', lineEnd);
        if (end === -1) return 'incomplete';
        return { answer: { status: code, headers, body: Buffer.concat(chunks) }, consumed: end + 4 };
      }
      if (data.length < lineEnd + 2 + size + 2) return 'incomplete';
      chunks.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
  }
  const lengthHeader = headers['content-length'];
  if (lengthHeader === undefined || !/^\d+$/.test(lengthHeader)) return 'invalid';
  const length = Number(lengthHeader);
  if (length > MAX_BODY_BYTES) return 'invalid';
  if (data.length < start + length) return 'incomplete';
  return {
    answer: { status: code, headers, body: Buffer.from(data.subarray(start, start + length)) },
    consumed: start + length,
  };
}

export interface PipelinedClient {
  request(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: string | undefined,
    timeoutMs: number,
  ): Promise<PipelinedAnswer>;
  close(): void;
}

/**
 * Requests to one origin over at most `connections` connections, each carrying at most
 * `depth` unanswered requests (beyond that, a new connection is opened or the least busy used).
 */
export function createPipelinedClient(origin: string, { connections = 4, depth = 32 } = {}): PipelinedClient {
  const url = new URL(origin);
  const host = url.host;
  const basePath = url.pathname.replace(/\/+$/, '');
  const open = new Set<Connection>();
  const gone = (connection: Connection) => open.delete(connection);

  function pick(): Connection {
    let best: Connection | undefined;
    for (const connection of open) {
      if (best === undefined || connection.pending.length < best.pending.length) best = connection;
    }
    if (best !== undefined && (best.pending.length < depth || open.size >= connections)) return best;
    const fresh = new Connection(url, gone);
    open.add(fresh);
    return fresh;
  }

  return {
    request(method, path, headers, body, timeoutMs) {
      let head = `${method} ${basePath}${path} HTTP/1.1\r\nhost: ${host}\r\n`;
      for (const name in headers) {
        const value = headers[name]!;
        if (!UNSAFE_HEADER.test(name) && !UNSAFE_HEADER.test(value)) head += `${name}: ${value}\r\n`;
      }
      let request: Buffer;
      if (body === undefined) {
        request = Buffer.from(`${head}\r\n`, 'latin1');
      } else {
        // Head and body in one allocation: the head is latin1 (as node:http writes it), the body UTF-8.
        const bodyBytes = Buffer.byteLength(body, 'utf8');
        head += `content-length: ${bodyBytes}\r\n\r\n`;
        request = Buffer.allocUnsafe(head.length + bodyBytes);
        request.write(head, 0, 'latin1');
        request.write(body, head.length, 'utf8');
      }
      return pick().send(request, timeoutMs, method === 'HEAD');
    },
    close() {
      for (const connection of [...open]) connection.close();
    },
  };
}
