import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { createServer as createNetServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createPipelinedClient,
  parseAnswer,
  PipelineError,
  type PipelinedClient,
} from '../../proxy/pipelined-client.js';

const raw = (text: string) => Buffer.from(text, 'latin1');

describe('parseAnswer', () => {
  it('reads a Content-Length answer and says how much it used', () => {
    const answer = 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';
    const parsed = parseAnswer(raw(`${answer}HTTP/1.1`), false);
    expect(parsed).toMatchObject({
      answer: { status: 200, headers: { 'content-type': 'application/json' } },
      consumed: answer.length,
    });
    expect(typeof parsed === 'object' && parsed.answer.body.toString()).toBe('{}');
  });

  it('reads a chunked answer, with or without trailers', () => {
    const plain = parseAnswer(
      raw('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\nNEXT'),
      false,
    );
    expect(typeof plain === 'object' && plain.answer.body.toString()).toBe('abcde');
    expect(typeof plain === 'object' && plain.consumed).toBe(
      raw('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n').length,
    );
    const trailed = parseAnswer(
      raw('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\nX-T: 1\r\n\r\n'),
      false,
    );
    expect(typeof trailed === 'object' && trailed.answer.body.toString()).toBe('z');
  });

  it.each([
    ['a head cut short', 'HTTP/1.1 200 OK\r\nContent-Len'],
    ['a body cut short', 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc'],
    ['a chunk cut short', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab'],
    ['a missing last chunk', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n'],
  ])('waits for the rest of %s', (_name, text) => {
    expect(parseAnswer(raw(text), false)).toBe('incomplete');
  });

  it.each([
    ['a bad status line', 'HTTP/2 200\r\nContent-Length: 0\r\n\r\n'],
    ['a header without colon', 'HTTP/1.1 200 OK\r\nbroken\r\nContent-Length: 0\r\n\r\n'],
    ['no framing at all', 'HTTP/1.1 200 OK\r\n\r\nbody'],
    ['a bad chunk size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'],
    ['a huge body', 'HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n'],
  ])('refuses %s', (_name, text) => {
    expect(parseAnswer(raw(text), false)).toBe('invalid');
  });

  it('knows which answers have no body', () => {
    expect(parseAnswer(raw('HTTP/1.1 204 No Content\r\n\r\n'), false)).toMatchObject({
      answer: { status: 204 },
    });
    expect(
      parseAnswer(raw('HTTP/1.1 302 Found\r\nLocation: https://t.me/+x\r\nContent-Length: 10\r\n\r\n'), true),
    ).toMatchObject({
      answer: { status: 302, headers: { location: 'https://t.me/+x' } },
    });
  });
});

describe('the pipelined client against node:http', () => {
  let server: Server | undefined;
  let client: PipelinedClient | undefined;
  afterEach(async () => {
    client?.close();
    server?.closeAllConnections();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    server = undefined;
  });

  async function serve(
    handler: (
      req: IncomingMessage,
      body: string,
    ) => { status?: number; body?: string; headers?: Record<string, string> } | undefined,
  ) {
    const sockets = new Set<Socket>();
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const answer = handler(req, Buffer.concat(chunks).toString());
        if (answer === undefined) return;
        res.writeHead(answer.status ?? 200, answer.headers ?? { 'content-type': 'application/json' });
        res.end(answer.body ?? '');
      });
    });
    server.on('connection', (socket) => sockets.add(socket));
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, sockets };
  }

  it('answers many concurrent requests, each with its own answer, over a few connections', async () => {
    const { url, sockets } = await serve((req, body) => ({
      body: JSON.stringify({ path: req.url, body, ip: req.headers['x-ip'] }),
    }));
    client = createPipelinedClient(`${url}/prefix/`, { connections: 2, depth: 8 });
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        client!.request('POST', `/n/${i}`, { 'x-ip': `10.0.0.${i % 250}` }, `{"i":${i}}`, 2_000),
      ),
    );
    answers.forEach((answer, i) => {
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body.toString())).toEqual({
        path: `/prefix/n/${i}`,
        body: `{"i":${i}}`,
        ip: `10.0.0.${i % 250}`,
      });
    });
    expect(sockets.size).toBeLessThanOrEqual(2);
  });

  it('drops header lines that would inject others', async () => {
    const { url } = await serve((req) => ({ body: JSON.stringify(req.headers) }));
    client = createPipelinedClient(url);
    const answer = await client.request(
      'POST',
      '/',
      { 'x-ok': 'fine', 'x-bad': 'a\r\nx-injected: 1' },
      '{}',
      1_000,
    );
    const seen = JSON.parse(answer.body.toString()) as Record<string, string>;
    expect(seen['x-ok']).toBe('fine');
    expect(seen['x-bad']).toBeUndefined();
    expect(seen['x-injected']).toBeUndefined();
    expect(seen['content-length']).toBe('2');
  });

  it('reads chunked answers from a real server', async () => {
    server = createServer((_req, res) => {
      res.write('{"part":');
      res.end('1}');
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    client = createPipelinedClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const [first, second] = await Promise.all([
      client.request('GET', '/a', {}, undefined, 1_000),
      client.request('GET', '/b', {}, undefined, 1_000),
    ]);
    expect(first?.body.toString()).toBe('{"part":1}');
    expect(second?.body.toString()).toBe('{"part":1}');
  });

  it('times out a request that gets no answer, failing the ones behind it, and recovers', async () => {
    let calls = 0;
    const { url } = await serve(() => (++calls === 1 ? undefined : { body: '{}' }));
    client = createPipelinedClient(url, { connections: 1 });
    const stuck = client.request('POST', '/stuck', {}, '{}', 150);
    const behind = client.request('POST', '/behind', {}, '{}', 5_000);
    await expect(stuck).rejects.toMatchObject({ code: 'ETIMEDOUT' });
    await expect(behind).rejects.toBeInstanceOf(PipelineError);
    expect((await client.request('POST', '/after', {}, '{}', 1_000)).status).toBe(200);
  });

  it('keeps a later, shorter deadline even when an earlier request waits longer', async () => {
    const { url } = await serve(() => undefined);
    client = createPipelinedClient(url, { connections: 1 });
    const patient = client.request('POST', '/patient', {}, '{}', 5_000);
    const started = performance.now();
    const hurried = client.request('POST', '/hurried', {}, '{}', 100);
    await expect(hurried).rejects.toMatchObject({ code: 'ETIMEDOUT', message: 'no answer within 100 ms' });
    expect(performance.now() - started).toBeLessThan(1_000);
    // Same connection: the patient one fails with it rather than waiting its 5 s out.
    await expect(patient).rejects.toBeInstanceOf(PipelineError);
  });

  it('treats Connection: close as the end of the connection and carries on with a new one', async () => {
    const { url } = await serve((req) => {
      const headers: Record<string, string> = req.url === '/close' ? { connection: 'close' } : {};
      return { headers, body: String(req.url) };
    });
    client = createPipelinedClient(url, { connections: 1 });
    const closing = await client.request('GET', '/close', {}, undefined, 1_000);
    expect(closing.body.toString()).toBe('/close');
    expect((await client.request('GET', '/next', {}, undefined, 1_000)).body.toString()).toBe('/next');
  });

  it('survives the server closing idle connections', async () => {
    const { url } = await serve(() => ({ body: 'ok' }));
    server!.keepAliveTimeout = 50;
    client = createPipelinedClient(url, { connections: 1 });
    expect((await client.request('GET', '/', {}, undefined, 1_000)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect((await client.request('GET', '/', {}, undefined, 1_000)).status).toBe(200);
  });

  it('reports a refused connection as such', async () => {
    const probe = createNetServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    client = createPipelinedClient(`http://127.0.0.1:${port}`);
    await expect(client.request('GET', '/', {}, undefined, 1_000)).rejects.toMatchObject({
      code: 'ECONNREFUSED',
    });
  });

  it('refuses an answer nobody asked for', async () => {
    const rogue = createNetServer((socket) => {
      socket.on('data', () =>
        socket.write(
          'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n',
        ),
      );
    });
    await new Promise<void>((resolve) => rogue.listen(0, '127.0.0.1', resolve));
    client = createPipelinedClient(`http://127.0.0.1:${(rogue.address() as AddressInfo).port}`);
    const first = await client.request('GET', '/', {}, undefined, 1_000);
    expect(first.status).toBe(200);
    // The extra answer poisoned that connection: the next request gets a fresh one, and an answer.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await client.request('GET', '/', {}, undefined, 1_000)).status).toBe(200);
    client.close();
    await new Promise((resolve) => rogue.close(resolve));
  });
});
