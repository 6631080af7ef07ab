// A loopback receiver of webhook POSTs: records each request (headers and raw body) and answers
// what the test says (a status, or `hold` to keep the request open, as a hung receiver would).
import { createServer, type IncomingMessage, type Server } from 'node:http';

export interface Received {
  headers: IncomingMessage['headers'];
  body: string;
}
export type Answer = number | 'hold';

export interface Receiver {
  url: string;
  received: Received[];
  answerWith(rule: (body: string, index: number) => Answer): void;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  let rule: (body: string, index: number) => Answer = () => 200;
  const held: import('node:http').ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const answer = rule(body, received.length);
      received.push({ headers: req.headers, body });
      if (answer === 'hold') {
        held.push(res);
        return;
      }
      res.statusCode = answer;
      res.end(answer >= 200 && answer < 300 ? 'ok' : 'no');
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/hooks/capigram`,
    received,
    answerWith: (r) => void (rule = r),
    close: () =>
      new Promise<void>((ok) => {
        for (const r of held) r.destroy();
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}
