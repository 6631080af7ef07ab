import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../harness/app.js';
import { clientIp, initBody, ORIGIN, startWorld, type World } from './world.js';

/** The TRACKER_RATE_LIMIT_* variables reach the limiter through the parsed configuration. */
let w: World;
let unlimited: TestApp;
beforeAll(async () => {
  w = await startWorld({ env: { TRACKER_RATE_LIMIT_INIT: '3', TRACKER_RATE_LIMIT_BURST: '0' } });
  unlimited = await startTestApp(w.db.pool, { env: { ...w.fakes.env, TRACKER_RATE_LIMIT_INIT: '0' } });
});
afterAll(async () => {
  await unlimited.stop();
  await w.close();
});

const send = (url: string, ip: string) =>
  fetch(`${url}/backend/track/init`, {
    method: 'POST',
    headers: { origin: ORIGIN, 'x-capigram-client-ip': ip },
    body: JSON.stringify(initBody(w)),
  });

describe('rate-limit configuration', () => {
  it('TRACKER_RATE_LIMIT_INIT=3 with no burst: the fourth init in a minute is refused, and nothing is written for it', async () => {
    const ip = clientIp();
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await send(w.app.url, ip)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    const { rows } = await w.db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM visits WHERE client_ip = $1',
      [ip],
    );
    expect(rows[0]!.n).toBe(3);
  });

  it('TRACKER_RATE_LIMIT_INIT=0 turns the init limit off', async () => {
    const ip = clientIp();
    const statuses = await Promise.all(
      Array.from({ length: 12 }, () => send(unlimited.url, ip).then((r) => r.status)),
    );
    expect(statuses).toEqual(Array(12).fill(200));
  });
});
