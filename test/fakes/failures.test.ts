// The shared base, observed from a client with fetch: every failure kind, latency, the log,
// waitFor, reset, and that close() never hangs on a request left unanswered.
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { FailureKind } from './base.js';
import { call } from './client.js';
import { DEFAULT_BOT, startTelegram, type TelegramFake } from './telegram.js';

let tg: TelegramFake;
const getMe = (timeoutMs?: number) => call(`${tg.url}/bot${DEFAULT_BOT.token}/getMe`, { timeoutMs });

beforeAll(async () => {
  tg = await startTelegram();
});
afterAll(() => tg.close());
beforeEach(() => tg.reset());

describe('failure injection', () => {
  it('status: a 5xx in the platform shape, then normal service', async () => {
    tg.failNext(1, { type: 'status', status: 500 });
    const res = await getMe();
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ ok: false, error_code: 500, description: 'Internal Server Error' });
    expect((await getMe()).status).toBe(200);
  });

  it('status with gateway: an HTML page, not JSON', async () => {
    tg.failNext(1, { type: 'status', status: 503, gateway: true });
    const res = await getMe();
    expect(res.status).toBe(503);
    expect(res.headers.get('content-type')).toBe('text/html');
    expect(res.body).toContain('503 Service Unavailable');
  });

  it('rateLimit and invalidToken: the platform answers', async () => {
    tg.failNext(1, { type: 'rateLimit', retryAfterSec: 9 }).failNext(1, { type: 'invalidToken' });
    expect((await getMe()).body.parameters).toEqual({ retry_after: 9 });
    expect((await getMe()).status).toBe(401);
  });

  it('timeout: no answer until the client gives up; the attempt is logged', async () => {
    tg.failNext(1, { type: 'timeout' });
    const started = performance.now();
    const error = await getMe(150).catch((e: unknown) => e);
    expect((error as Error).name).toBe('TimeoutError');
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    expect(tg.received[0]).toMatchObject({ injected: 'timeout', status: undefined });
    expect((await getMe()).status).toBe(200);
  });

  it('reset: the socket is destroyed and fetch fails', async () => {
    tg.failNext(1, { type: 'reset' });
    await expect(getMe()).rejects.toThrow(/fetch failed/);
    expect(tg.received.map((r) => r.injected)).toEqual(['reset']);
  });

  it('failNext counts: two failures, then success, three attempts logged', async () => {
    tg.failNext(2, { type: 'status', status: 502 });
    const statuses = [(await getMe()).status, (await getMe()).status, (await getMe()).status];
    expect(statuses).toEqual([502, 502, 200]);
    expect(tg.received.filter((r) => r.injected).length).toBe(2);
  });

  it('failRate: reproducible for a seed, different for another, off with p = 0', async () => {
    const kinds: FailureKind[] = [
      { type: 'status', status: 500 },
      { type: 'rateLimit', retryAfterSec: 1 },
    ];
    const run = async (seed: number) => {
      tg.reset();
      tg.failRate(0.5, kinds, seed);
      const out: number[] = [];
      for (let i = 0; i < 16; i++) out.push((await getMe()).status);
      return out;
    };
    const a = await run(7);
    expect(await run(7)).toEqual(a);
    expect(await run(8)).not.toEqual(a);
    expect(a).toContain(200);
    expect(a.some((s) => s !== 200)).toBe(true);
    tg.failRate(0, []);
    expect((await getMe()).status).toBe(200);
  });

  it('latencyMs delays every answer; reset restores it', async () => {
    tg.latencyMs = 120;
    const started = performance.now();
    await getMe();
    expect(performance.now() - started).toBeGreaterThanOrEqual(110);
    tg.reset();
    expect(tg.latencyMs).toBe(0);
  });
});

describe('log, waitFor and reset', () => {
  it('records method, path, query, headers, body and arrival times', async () => {
    const before = Date.now();
    await call(`${tg.url}/bot${DEFAULT_BOT.token}/getChat?chat_id=-1001000000001`, {
      json: { x: 1 },
      headers: { 'x-probe': 'yes' },
    });
    const [r] = tg.received;
    expect(r).toMatchObject({
      method: 'POST',
      path: `/bot${DEFAULT_BOT.token}/getChat`,
      query: { chat_id: '-1001000000001' },
      body: { x: 1 },
      status: 200,
    });
    expect(r?.headers['x-probe']).toBe('yes');
    expect(r?.receivedAtEpochMs).toBeGreaterThanOrEqual(before);
    expect(r?.receivedAt).toBeLessThanOrEqual(performance.now());
  });

  it('waitFor resolves once a later request satisfies the predicate', async () => {
    setTimeout(() => void getMe(), 50);
    const log = await tg.waitFor((l) => l.some((r) => r.status === 200), 2000);
    expect(log).toHaveLength(1);
  });

  it('waitFor rejects with a message naming the fake and what it saw', async () => {
    await getMe();
    await expect(tg.waitFor((l) => l.length >= 2, 100)).rejects.toThrow(
      /telegram fake: waitFor timed out after 100 ms; received 1 request/,
    );
  });

  it('reset clears the log and pending failures', async () => {
    tg.failNext(3, { type: 'status', status: 500 });
    await getMe();
    tg.reset();
    expect(tg.received).toEqual([]);
    expect((await getMe()).status).toBe(200);
  });
});

describe('close', () => {
  it('returns promptly with a request hung by a timeout failure, and the client sees the socket close', async () => {
    const fake = await startTelegram();
    fake.failNext(1, { type: 'timeout' });
    const pending = call(`${fake.url}/bot${DEFAULT_BOT.token}/getMe`, { timeoutMs: 5000 }).catch(
      (e: unknown) => e,
    );
    await fake.waitFor((l) => l.length === 1);
    const started = performance.now();
    await fake.close();
    expect(performance.now() - started).toBeLessThan(1000);
    const error = (await pending) as Error;
    expect(error.message).toMatch(/fetch failed/);
  });
});
