/**
 * A small HTTP/1.1 client that pipelines requests on a few kept-alive connections.
 *
 * The proxy posts one `track/init` per pageview. Through node:http each post costs about as much
 * CPU as proxying the page itself (a ClientRequest, header validation, at least one write per
 * request). Here every request queued during one turn of the event loop leaves in a single write,
 * and answers are read back in order. Only what the tracker surface needs is supported: requests
 * with small bodies, answers framed by Content-Length or chunked encoding.
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

interface Pending {
  resolve(answer: PipelinedAnswer): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
  /** No body in the answer (HEAD). */
  headOnly: boolean;
}

class Connection {
  readonly pending: Pending[] = [];
  private outbox: Buffer[] = [];
  private flushScheduled = false;
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
        ? tls.connect({ host, port, servername: net.isIP(host) === 0 ? host : undefined, ALPNProtocols: ['http/1.1'] })
        : net.connect({ host, port });
    this.socket.setNoDelay(true);
    this.socket.on('data', (chunk: Buffer) => this.read(chunk));
    this.socket.on('error', (error: NodeJS.ErrnoException) =>
      this.fail(new PipelineError(error.message, error.code === 'ECONNREFUSED' ? 'ECONNREFUSED' : 'ECONNRESET')),
    );
    this.socket.on('close', () => this.fail(new PipelineError('connection closed', 'ECLOSED')));
  }

  get usable(): boolean {
    return !this.closed;
  }

  send(request: Buffer, timeoutMs: number, headOnly: boolean): Promise<PipelinedAnswer> {
    return new Promise((resolve, reject) => {
      // A pipelined answer that does not come blocks every one behind it: drop the connection.
      const timer = setTimeout(() => this.fail(new PipelineError(`no answer within ${timeoutMs} ms`, 'ETIMEDOUT')), timeoutMs);
      this.pending.push({ resolve, reject, timer, headOnly });
      this.outbox.push(request);
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  close(): void {
    this.fail(new PipelineError('client closed', 'ECLOSED'));
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.closed || this.outbox.length === 0) return;
    const batch = this.outbox.length === 1 ? this.outbox[0]! : Buffer.concat(this.outbox);
    this.outbox = [];
    this.socket.write(batch);
  }

  private fail(error: PipelineError): void {
    if (this.closed) return;
    this.closed = true;
    this.onGone(this);
    this.socket.destroy();
    for (const request of this.pending.splice(0)) {
      clearTimeout(request.timer);
      request.reject(error);
    }
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
        if (this.buffer.length > MAX_HEAD_BYTES + MAX_BODY_BYTES) this.fail(new PipelineError('answer too large', 'EPROTO'));
        return;
      }
      if (parsed === 'invalid') {
        this.fail(new PipelineError('malformed answer', 'EPROTO'));
        return;
      }
      this.pending.shift();
      clearTimeout(request.timer);
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
  const lines = data.toString('latin1', 0, headEnd).split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/.exec(lines[0] ?? '');
  if (status?.[1] === undefined) return 'invalid';
  const code = Number(status[1]);
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) return 'invalid';
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
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
  return { answer: { status: code, headers, body: Buffer.from(data.subarray(start, start + length)) }, consumed: start + length };
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
      for (const [name, value] of Object.entries(headers)) {
        if (!UNSAFE_HEADER.test(name) && !UNSAFE_HEADER.test(value)) head += `${name}: ${value}\r\n`;
      }
      const payload = body === undefined ? undefined : Buffer.from(body, 'utf8');
      if (payload !== undefined) head += `content-length: ${payload.length}\r\n`;
      const request = Buffer.from(`${head}\r\n`, 'latin1');
      return pick().send(payload === undefined ? request : Buffer.concat([request, payload]), timeoutMs, method === 'HEAD');
    },
    close() {
      for (const connection of [...open]) connection.close();
    },
  };
}
