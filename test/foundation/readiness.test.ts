// /readyz, /healthz/delivery and /metrics as an operator's probes and Prometheus see them: delivery
// stalled (no runner, or a due send waiting too long) turns /healthz/delivery 503 with the
// contract's body while /readyz stays 200 (readiness is about this process serving), the gauge
// shows the oldest due send's wait, the stall is logged once when it starts and once when it
// ends, and METRICS_TOKEN closes /metrics to anyone without it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliveryStatus, oldestDueSeconds } from '../../backend/delivery/stall.js';
import { StallLog } from '../../backend/delivery/stall-log.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { createConversion, createSiteWith } from '../delivery/support.js';

let db: TestDatabase;
let t: TestApp;
let locked: TestApp;
const METRICS_TOKEN = 'metrics-token-0123456789abcdef';

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool, { env: { DELIVERY_STALL_SECONDS: '60' } });
  locked = await startTestApp(db.pool, { env: { METRICS_TOKEN } });
});
afterAll(async () => {
  await t.stop();
  await locked.stop();
  await db.drop();
});

async function delivery(app: TestApp) {
  const res = await fetch(`${app.url}/healthz/delivery`);
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

async function readyz(app: TestApp) {
  const res = await fetch(`${app.url}/readyz`);
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

const READY = { status: 200, body: { status: 'ready' } };

async function gauge(app: TestApp): Promise<number> {
  const text = await (await fetch(`${app.url}/metrics`)).text();
  const m = /^capigram_sends_oldest_due_seconds (\S+)$/m.exec(text);
  expect(m).not.toBeNull();
  return Number(m![1]);
}

describe('delivery in /healthz/delivery and the gauge, apart from /readyz', () => {
  it('ready with nothing due, and the gauge reads 0', async () => {
    expect(await readyz(t)).toEqual(READY);
    expect(await delivery(t)).toEqual({ status: 200, body: { status: 'ok', oldestDueSeconds: 0 } });
    expect(await gauge(t)).toBe(0);
  });

  it('a due send older than DELIVERY_STALL_SECONDS: delivery 503 stalled until it is taken; /readyz 200 throughout', async () => {
    const { siteId } = await createSiteWith(t.deps, ['meta']);
    const { sends } = await createConversion(db.pool, siteId);
    // Due for 45 s: waiting, not yet stalled (the threshold is 60 s here).
    await db.pool.query(`UPDATE sends SET next_attempt_at = now() - interval '45 seconds' WHERE id = $1`, [
      sends[0]!.sendId,
    ]);
    expect((await delivery(t)).status).toBe(200);
    expect(await gauge(t)).toBeGreaterThanOrEqual(45);

    await db.pool.query(`UPDATE sends SET next_attempt_at = now() - interval '300 seconds' WHERE id = $1`, [
      sends[0]!.sendId,
    ]);
    const stalled = await delivery(t);
    expect(stalled.status).toBe(503);
    expect(stalled.body.status).toBe('stalled');
    expect(stalled.body.oldestDueSeconds).toBeGreaterThanOrEqual(300);
    expect(await readyz(t)).toEqual(READY);
    const age = await gauge(t);
    expect(age).toBeGreaterThanOrEqual(300);
    expect(age).toBeLessThan(320);

    // In flight (claimed: its lease ends in the future) is not due, so not stalled.
    await db.pool.query(
      `UPDATE sends SET in_flight = true, next_attempt_at = now() + interval '5 seconds' WHERE id = $1`,
      [sends[0]!.sendId],
    );
    expect((await delivery(t)).status).toBe(200);
    expect(await gauge(t)).toBe(0);
    // …and a send that left the queue (sent, failed, skipped) is never due.
    await db.pool.query(
      `UPDATE sends SET status = 'sent', in_flight = false, next_attempt_at = now() - interval '1 hour' WHERE id = $1`,
      [sends[0]!.sendId],
    );
    expect(await oldestDueSeconds(db.pool)).toBe(0);
  });

  it('the oldest due send counts, across pixels', async () => {
    const { siteId } = await createSiteWith(t.deps, ['meta', 'tiktok']);
    const a = await createConversion(db.pool, siteId);
    const b = await createConversion(db.pool, siteId);
    await db.pool.query(
      // As a retry leaves them: its place in the queue and its due time alike (migration 213).
      `UPDATE sends SET next_attempt_at = now() - interval '10 seconds', queue_at = now() - interval '10 seconds' WHERE conversion_id = $1`,
      [a.conversionId],
    );
    await db.pool.query(
      `UPDATE sends SET next_attempt_at = now() - interval '90 seconds', queue_at = now() - interval '90 seconds' WHERE conversion_id = $1 AND platform = 'tiktok'`,
      [b.conversionId],
    );
    const age = await oldestDueSeconds(db.pool);
    expect(age).toBeGreaterThanOrEqual(90);
    expect(age).toBeLessThan(100);
    await db.pool.query(`UPDATE sends SET status = 'sent' WHERE conversion_id = ANY($1::uuid[])`, [
      [a.conversionId, b.conversionId],
    ]);
  });

  it('a process whose job runner is down is stalled whatever the queue says', async () => {
    let running = false;
    t.deps.worker = { running: () => running };
    try {
      const res = await delivery(t);
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ status: 'stalled', worker: 'down' });
      expect(await readyz(t)).toEqual(READY);
      running = true;
      expect(await delivery(t)).toEqual({
        status: 200,
        body: { status: 'ok', oldestDueSeconds: 0, worker: 'running' },
      });
    } finally {
      delete t.deps.worker;
    }
  });

  it('the status rule, and one log line when a stall starts and one when it ends', () => {
    expect(deliveryStatus({ oldestDueSeconds: 0, workerRunning: false, stallSeconds: 120 })).toBe('stalled');
    expect(deliveryStatus({ oldestDueSeconds: 120, workerRunning: true, stallSeconds: 120 })).toBe('ok');
    expect(deliveryStatus({ oldestDueSeconds: 121, workerRunning: null, stallSeconds: 120 })).toBe('stalled');

    const lines: string[] = [];
    const log = new StallLog({
      error: (_: unknown, msg: string) => lines.push(msg),
      info: () => undefined,
    } as never);
    const check = (delivery: 'ok' | 'stalled') =>
      log.record({ delivery, oldestDueSeconds: 0, workerRunning: null });
    check('ok');
    check('stalled');
    check('stalled');
    check('stalled');
    check('ok');
    check('ok');
    expect(lines).toEqual(['delivery is stalled: due sends are not being delivered', 'delivery resumed']);
  });
});

describe('METRICS_TOKEN', () => {
  it('without METRICS_TOKEN, /metrics is open', async () => {
    expect((await fetch(`${t.url}/metrics`)).status).toBe(200);
  });

  it('with it, /metrics needs the bearer token: 401 problem+json otherwise', async () => {
    for (const authorization of [
      undefined,
      'Bearer wrong-token-0123456789abcdef',
      `Basic ${METRICS_TOKEN}`,
      `Bearer ${METRICS_TOKEN}x`,
      'Bearer ',
    ]) {
      const res = await fetch(`${locked.url}/metrics`, { headers: authorization ? { authorization } : {} });
      expect(res.status).toBe(401);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(((await res.json()) as { code: string }).code).toBe('UNAUTHORIZED');
    }
    const ok = await fetch(`${locked.url}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('capigram_sends_oldest_due_seconds');
    // The probes stay open: an orchestrator has no token.
    expect((await fetch(`${locked.url}/readyz`)).status).toBe(200);
    expect((await fetch(`${locked.url}/healthz`)).status).toBe(200);
  });
});
