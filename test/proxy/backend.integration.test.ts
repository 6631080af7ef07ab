import { randomBytes, randomInt } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { startProxyServer, type RunningProxy } from '../../proxy/server.js';
import { startWorld, type World } from '../tracker/world.js';
import {
  ClockedCookieJar,
  cookieNamed,
  NAVIGATION_ACCEPT,
  send,
  type SimpleResponse,
} from './support/http-client.js';
import { capturingLogger, manualClock } from './support/proxy-rig.js';
import { HOME_HTML, startSampleUpstream, type SampleUpstream } from './support/sample-upstream.js';

/**
 * The proxy in front of a sample origin, reporting to the real Capigram backend on a real
 * PostgreSQL (the site's domain is example.com, so the proxy serves shop.example.com).
 */
const SITE_HOST = 'shop.example.com';
const UA = 'Mozilla/5.0 (Linux; Android 14) ProxyIntegration/1.0';
const MINUTE = 60_000;

let world: World;
let upstream: SampleUpstream;
let proxy: RunningProxy;
const clock = manualClock(Date.now());

interface VisitRow {
  id: string;
  temp_id: string;
  session_id: string;
  client_ip: string | null;
  user_agent: string | null;
  href: string | null;
  landing_page: string | null;
  fbc: string | null;
  fbp: string | null;
  utm_source: string | null;
}

async function visitsOf(tempId: string | undefined): Promise<VisitRow[]> {
  const { rows } = await world.db.pool.query<VisitRow>(
    `SELECT id, temp_id, session_id, client_ip, user_agent, href, landing_page, fbc, fbp, utm_source
       FROM visits WHERE site_id = $1 AND temp_id = $2 ORDER BY created_at, id`,
    [world.siteId, tempId],
  );
  return rows;
}

/** Tracking runs beside the page: wait until the backend has recorded what we expect. */
async function eventually<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 5_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A visitor with its own IP (the rate limits are per IP) and a cookie jar on the test's clock. */
function visitor() {
  const ip = `198.51.100.${randomInt(1, 255)}`;
  const jar = new ClockedCookieJar(clock.now);
  const go = async (path: string, headers: Record<string, string> = {}): Promise<SimpleResponse> => {
    const res = await send(`${proxy.url}${path}`, {
      headers: {
        host: SITE_HOST,
        accept: NAVIGATION_ACCEPT,
        'user-agent': UA,
        'x-forwarded-for': ip,
        cookie: jar.header(),
        ...headers,
      },
    });
    jar.store(res.setCookies);
    return res;
  };
  return { ip, jar, go };
}

beforeAll(async () => {
  world = await startWorld({ poolTarget: 3 });
  await refillChannelPool(world.app.deps, world.channels.main);
  upstream = await startSampleUpstream();
  proxy = await startProxyServer(
    {
      upstream: upstream.url,
      tracker: world.app.url,
      websiteId: world.websiteId,
      fallbackUrl: 'https://t.me/fallback_channel',
      logger: capturingLogger().logger,
      now: clock.now,
    },
    { host: '127.0.0.1', port: 0 },
  );
});

afterAll(async () => {
  await proxy?.stop({ drainMs: 2_000 });
  await upstream?.close();
  await world?.close();
});

describe('the proxy with the real backend', () => {
  it('records a first visit with both cookies set and the IP and User-Agent the proxy saw', async () => {
    const v = visitor();
    const res = await v.go('/landing?utm_source=facebook&gclid=G-int');
    expect(res.status).toBe(200);
    expect(res.text).toBe(HOME_HTML);
    const tid = v.jar.get('capigram_tid');
    const sid = v.jar.get('capigram_sid');
    expect(tid).toBeDefined();
    expect(sid).toBeDefined();

    const [visit] = await eventually(
      () => visitsOf(tid),
      (rows) => rows.length === 1,
    );
    expect(visit).toMatchObject({
      temp_id: tid,
      session_id: sid,
      client_ip: v.ip,
      user_agent: UA,
      href: `http://${SITE_HOST}/landing?utm_source=facebook&gclid=G-int`,
      landing_page: '/landing?utm_source=facebook&gclid=G-int',
      utm_source: 'facebook',
    });
  });

  it('keeps the session for a pageview within 30 minutes and starts a new one after 30 idle minutes', async () => {
    const v = visitor();
    // Each visit recorded before the next pageview, as minutes apart they would be: the rows'
    // order is the order the tracker stored them in, and calls in flight together may swap.
    const recorded = (n: number) =>
      eventually(
        () => visitsOf(v.jar.get('capigram_tid')),
        (r) => r.length === n,
      );
    await v.go('/page');
    await recorded(1);
    clock.advance(29 * MINUTE);
    await v.go('/page');
    await recorded(2);
    clock.advance(31 * MINUTE);
    await v.go('/page');
    const rows = await recorded(3);
    expect(rows).toHaveLength(3);
    expect(rows[1]?.session_id).toBe(rows[0]?.session_id);
    expect(rows[2]?.session_id).not.toBe(rows[0]?.session_id);
    expect(rows[2]?.session_id).toBe(v.jar.get('capigram_sid'));
  });

  it('turns fbclid into the right fbc', async () => {
    const v = visitor();
    await v.go('/landing?fbclid=IwAR_Integration-Click~42');
    const [visit] = await eventually(
      () => visitsOf(v.jar.get('capigram_tid')),
      (rows) => rows.length === 1,
    );
    expect(visit?.fbc).toBe(`fb.1.${clock.now()}.IwAR_Integration-Click~42`);
    expect(v.jar.get('_fbc')).toBe(visit?.fbc);
  });

  it('patches a later _fbp into the visit that went without it, once', async () => {
    const v = visitor();
    await v.go('/landing');
    const [first] = await eventually(
      () => visitsOf(v.jar.get('capigram_tid')),
      (rows) => rows.length === 1,
    );
    expect(first?.fbp).toBeNull();

    const before = await updateFbpCalls();
    v.jar.set('_fbp', 'fb.1.1717236000000.24681357');
    await v.go('/page');
    const rows = await eventually(
      () => visitsOf(v.jar.get('capigram_tid')),
      (r) => r.length === 2 && r[0]?.fbp !== null,
    );
    expect(rows.map((row) => row.fbp)).toEqual([
      'fb.1.1717236000000.24681357',
      'fb.1.1717236000000.24681357',
    ]);

    await v.go('/page');
    await eventually(
      () => visitsOf(v.jar.get('capigram_tid')),
      (r) => r.length === 3,
    );
    expect((await updateFbpCalls()) - before).toBe(1);
  });

  it('redirects an invite click to a pooled link assigned to the visit', async () => {
    const v = visitor();
    await v.go('/landing');
    const [visit] = await eventually(
      () => visitsOf(v.jar.get('capigram_tid')),
      (rows) => rows.length === 1,
    );
    const { rows: pool } = await world.db.pool.query<{ invite_link: string }>(
      'SELECT invite_link FROM invitations WHERE channel_id = $1 AND visit_id IS NULL',
      [world.channels.main],
    );
    expect(pool.length).toBeGreaterThan(0);

    const res = await v.go('/capigram/invite', { referer: `http://${SITE_HOST}/landing` });
    expect(res.status).toBe(302);
    expect(pool.map((row) => row.invite_link)).toContain(res.headers.location);
    const { rows: held } = await world.db.pool.query<{ invite_link: string; channel_id: string }>(
      'SELECT invite_link, channel_id FROM invitations WHERE visit_id = $1',
      [visit?.id],
    );
    expect(held).toEqual([{ invite_link: res.headers.location, channel_id: world.channels.main }]);
  });

  it("keeps the upstream's Set-Cookie beside its own", async () => {
    const res = await visitor().go('/with-cookies');
    expect(res.setCookies).toEqual(
      expect.arrayContaining(['shop_session=s3cr3t; Path=/; HttpOnly', 'cart=2; Path=/']),
    );
    expect(cookieNamed(res.setCookies, 'capigram_sid')).toBeDefined();
  });

  it('passes a POST body and a WebSocket through', async () => {
    const body = randomBytes(64 * 1024);
    const posted = await send(`${proxy.url}/echo`, { method: 'POST', headers: { host: SITE_HOST }, body });
    expect(posted.status).toBe(201);
    expect(posted.body.equals(body)).toBe(true);

    const socket = await new Promise<Socket>((resolve, reject) => {
      const req = httpRequest(`${proxy.url}/ws`, {
        agent: false,
        headers: {
          connection: 'Upgrade',
          upgrade: 'websocket',
          'sec-websocket-key': randomBytes(16).toString('base64'),
          'sec-websocket-version': '13',
        },
      });
      req.on('upgrade', (_res, upgraded) => resolve(upgraded));
      req.on('response', () => reject(new Error('no upgrade')));
      req.on('error', reject);
      req.end();
    });
    const echoed = await new Promise<string>((resolve) => {
      socket.once('data', (data: Buffer) => resolve(data.toString()));
      socket.write('hello over ws');
    });
    socket.destroy();
    expect(echoed).toBe('hello over ws');
  });

  // Last: it stops the backend.
  it('with the backend stopped, serves pages with the same status and body, and sends invite clicks to the fallback', async () => {
    const v = visitor();
    const up = await v.go('/landing?fbclid=abc');
    await world.app.stop();
    const down = await v.go('/landing?fbclid=abc');
    expect(down.status).toBe(up.status);
    expect(down.text).toBe(up.text);
    const missing = await v.go('/missing');
    expect(missing.status).toBe(404);
    const invite = await v.go('/capigram/invite');
    expect(invite.status).toBe(302);
    expect(invite.headers.location).toBe('https://t.me/fallback_channel');
  });
});

async function updateFbpCalls(): Promise<number> {
  const metric = await world.app.deps.metrics.httpRequests.get();
  return metric.values
    .filter((value) => value.labels.route === '/backend/track/update-fbp' && value.labels.status === '200')
    .reduce((sum, value) => sum + value.value, 0);
}
