import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface TrackerCall {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown> | undefined;
}

export type TrackerMode =
  /** Answers as CONTRACT.md says. */
  | 'up'
  /** Accepts connections and never answers. */
  | 'stalled';

/**
 * A recording stand-in for Capigram's keyless tracker surface, answering with CONTRACT.md's shapes.
 * It lets the proxy's own behaviour (what it sends, when, and what it does with the answers) be
 * tested precisely; `backend.integration.test.ts` repeats the story against the real backend.
 */
export interface TrackerStandIn {
  url: string;
  calls: TrackerCall[];
  mode: TrackerMode;
  /** The next `n` calls answer this status instead (a problem+json body). */
  failNext(n: number, status: number): void;
  /** What `track/invite` answers; default a 302 to a fresh `https://t.me/+…` link. */
  inviteAnswer: { status: number; location?: string } | undefined;
  /** Resolves once at least `n` calls of `path` were recorded (or rejects after `timeoutMs`). */
  waitFor(path: string, n?: number, timeoutMs?: number): Promise<TrackerCall[]>;
  of(path: string): TrackerCall[];
  close(): Promise<void>;
}

export async function startTrackerStandIn(): Promise<TrackerStandIn> {
  const calls: TrackerCall[] = [];
  const sockets = new Set<Socket>();
  let failures: { left: number; status: number } = { left: 0, status: 500 };
  const visits = new Map<string, string>();
  const state: TrackerStandIn = {
    url: '',
    calls,
    mode: 'up',
    inviteAnswer: undefined,
    failNext(n, status) {
      failures = { left: n, status };
    },
    of: (path) => calls.filter((call) => call.path === path),
    async waitFor(path, n = 1, timeoutMs = 3_000) {
      const deadline = Date.now() + timeoutMs;
      while (state.of(path).length < n) {
        if (Date.now() > deadline)
          throw new Error(`expected ${n} calls of ${path}, got ${state.of(path).length}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      return state.of(path);
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://tracker');
      const text = Buffer.concat(chunks).toString('utf8');
      calls.push({
        method: req.method ?? '',
        path: url.pathname,
        query: url.searchParams,
        headers: req.headers,
        body: text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>),
      });
      if (state.mode === 'stalled') return;
      if (failures.left > 0) {
        failures.left -= 1;
        res.writeHead(failures.status, { 'content-type': 'application/problem+json' });
        res.end(JSON.stringify({ status: failures.status, code: 'UNAVAILABLE' }));
        return;
      }
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      const body = calls.at(-1)?.body;
      switch (`${req.method} ${url.pathname}`) {
        case 'POST /backend/track/init': {
          const requestId = String(body?.visitRequestId ?? randomUUID());
          const visitId = visits.get(requestId) ?? randomUUID();
          visits.set(requestId, visitId);
          json(200, { visitId });
          return;
        }
        case 'POST /backend/track/update-fbp':
          json(200, { updated: true });
          return;
        case 'GET /backend/track/invite': {
          const answer = state.inviteAnswer ?? {
            status: 302,
            location: `https://t.me/+stand-in-${calls.length}`,
          };
          res.writeHead(answer.status, answer.location === undefined ? {} : { location: answer.location });
          res.end();
          return;
        }
        case 'GET /backend/track/entry':
          res.writeHead(302, { location: `https://t.me/stand_in_bot?start=StandIn${calls.length}` });
          res.end();
          return;
        default:
          json(404, { code: 'NOT_FOUND' });
      }
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return state;
}
