import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { startTestApp, type TestApp } from '../harness/app.js';

let db: TestDatabase;
let t: TestApp;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
});
afterAll(async () => {
  await t.stop();
  await db.drop();
});

async function problem(res: Response) {
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  return (await res.json()) as { code: string; status: number; title: string; type: string; detail?: string };
}

describe('health', () => {
  it('healthz and readyz answer 200 on a migrated database', async () => {
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
    const r = await fetch(`${t.url}/readyz`);
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ status: 'ready' });
  });

  it('metrics count requests by route pattern', async () => {
    await fetch(`${t.url}/healthz`);
    const text = await (await fetch(`${t.url}/metrics`)).text();
    expect(text).toMatch(/capigram_http_requests_total\{method="GET",route="\/healthz",status="200"\} \d+/);
    expect(text).toContain('capigram_http_request_duration_seconds_bucket');
  });

  it('every response carries a request id, and a caller-supplied one is echoed', async () => {
    const r = await fetch(`${t.url}/healthz`, { headers: { 'x-request-id': 'abc-123' } });
    expect(r.headers.get('x-request-id')).toBe('abc-123');
    const r2 = await fetch(`${t.url}/healthz`);
    expect(r2.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('error model', () => {
  it('unknown route → 404 problem+json', async () => {
    const res = await fetch(`${t.url}/no/such/route`);
    expect(res.status).toBe(404);
    const p = await problem(res);
    expect(p).toMatchObject({
      status: 404,
      code: 'NOT_FOUND',
      type: 'https://capigram.dev/errors/not-found',
    });
  });

  it('oversized body → 413 PAYLOAD_TOO_LARGE, never 500', async () => {
    const res = await fetch(`${t.url}/api/v1/events/conversion`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ pad: 'x'.repeat(200_000) }),
    });
    expect(res.status).toBe(413);
    expect((await problem(res)).code).toBe('PAYLOAD_TOO_LARGE');
  });

  // Without a Content-Length the limit cannot be read off the headers: the bytes are counted.
  const postChunked = (bytes: number) =>
    fetch(`${t.url}/api/v1/events/conversion`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: new ReadableStream<Uint8Array>({
        start(controller) {
          for (let sent = 0; sent < bytes; sent += 16_384)
            controller.enqueue(new Uint8Array(Math.min(16_384, bytes - sent)).fill(0x20));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);

  it('an oversized chunked body (no Content-Length) → 413 PAYLOAD_TOO_LARGE', async () => {
    const res = await postChunked(200_000);
    expect(res.status).toBe(413);
    expect((await problem(res)).code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('a chunked body within the limit passes the limit', async () => {
    // No API key: the request gets as far as authentication.
    expect((await postChunked(1_000)).status).toBe(401);
  });

  it('readyz answers 503 UNAVAILABLE when the database is gone', async () => {
    const other = await createTestDatabase();
    const t2 = await startTestApp(other.pool);
    await other.drop();
    const res = await fetch(`${t2.url}/readyz`);
    expect(res.status).toBe(503);
    expect((await problem(res)).code).toBe('UNAVAILABLE');
    await t2.stop();
  });
});

/** Sends raw bytes and reads the whole answer (the server closes the connection after it). */
function raw(request: string): Promise<string> {
  const { port } = new URL(t.url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => socket.end(request));
    let answer = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}

describe("requests Node's HTTP parser refuses", () => {
  it.each([
    [
      'headers over 16 KB',
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      431,
      'HEADERS_TOO_LARGE',
    ],
    ['a malformed request line', 'GET /healthz HTTP/9\r\nHost: x\r\n\r\n', 400, 'VALIDATION_FAILED'],
    [
      'a control character in a header',
      'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0001b\r\n\r\n',
      400,
      'VALIDATION_FAILED',
    ],
  ])('%s → problem+json %i %s, then the connection closes', async (_what, request, status, code) => {
    const answer = await raw(request);
    const [head = '', body = ''] = answer.split('\r\n\r\n');
    expect(head.split('\r\n')[0]).toBe(
      `HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : 'Bad Request'}`,
    );
    expect(head).toMatch(/\r\nContent-Type: application\/problem\+json\r\n/);
    expect(head).toMatch(/\r\nConnection: close/);
    expect(JSON.parse(body)).toMatchObject({
      status,
      code,
      type: expect.stringContaining('https://capigram.dev/errors/'),
    });
  });
});

describe('errors raised by framework middleware', () => {
  it('maps client errors of any status to problem+json, never 500', async () => {
    const { HTTPException } = await import('hono/http-exception');
    const { toApiError } = await import('../../backend/http/errors.js');
    for (const status of [400, 405, 406, 415, 422] as const) {
      const { apiError, unexpected } = toApiError(new HTTPException(status, { message: 'x' }));
      expect(unexpected).toBe(false);
      expect(apiError.status).toBeLessThan(500);
    }
    expect(toApiError(new HTTPException(415)).apiError.detail).toMatch(/Content-Type/);
    expect(toApiError(new Error('boom')).unexpected).toBe(true);
  });

  it('maps text PostgreSQL cannot store (a NUL that got past a schema) to 400, not 500', async () => {
    const { toApiError } = await import('../../backend/http/errors.js');
    for (const code of ['22021', '22P05']) {
      const { apiError, unexpected } = toApiError(
        Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), { code }),
      );
      expect(unexpected).toBe(false);
      expect([apiError.status, apiError.code]).toEqual([400, 'VALIDATION_FAILED']);
    }
    expect(toApiError(Object.assign(new Error('x'), { code: '23505' })).unexpected).toBe(true);
  });
});
