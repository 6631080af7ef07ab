// The operator's own bot backend, as a real HTTP server on loopback: it records every forward it
// gets and answers as the test says (a status, or holding the request open).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export interface Forwarded {
  body: string;
  secret: string | undefined;
  contentType: string | undefined;
  status: number;
  at: number;
}

/** What to do with a request: answer this status, or `hold` it open (until the server closes). */
export type Answer = number | 'hold';

export interface OperatorBackend {
  url: string;
  received: Forwarded[];
  /** Bodies answered 2xx, parsed, in the order they were taken. */
  taken(): { update_id: number }[];
  answerWith(fn: (body: string, n: number) => Answer): void;
  close(): Promise<void>;
}

export async function startOperatorBackend(): Promise<OperatorBackend> {
  const received: Forwarded[] = [];
  let decide: (body: string, n: number) => Answer = () => 200;
  const held: ServerResponse[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const answer = decide(body, received.length);
      const status = answer === 'hold' ? 0 : answer;
      received.push({
        body,
        secret: req.headers['x-telegram-bot-api-secret-token'] as string | undefined,
        contentType: req.headers['content-type'],
        status,
        at: Date.now(),
      });
      if (answer === 'hold') {
        held.push(res);
        return;
      }
      res.writeHead(answer, { 'content-type': 'text/plain' }).end(answer < 300 ? 'ok' : 'no');
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}/telegram-updates`,
    received,
    taken: () =>
      received
        .filter((r) => r.status >= 200 && r.status < 300)
        .map((r) => JSON.parse(r.body) as { update_id: number }),
    answerWith(fn) {
      decide = fn;
    },
    async close() {
      for (const r of held) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}
