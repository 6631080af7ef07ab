import { randomInt } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addEntry } from '../../backend/domain/admin/entries.js';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { startWorld, type World } from '../tracker/world.js';
import { cookieNamed, NAVIGATION_ACCEPT, send } from './support/http-client.js';
import { startNginx, type RunningNginx } from './support/nginx.js';
import { startSampleUpstream, type SampleUpstream } from './support/sample-upstream.js';
import { startTrackerStandIn, type TrackerStandIn } from './support/tracker-stand-in.js';

/**
 * examples/nginx/ in a real nginx with njs (Debian's packages), in front of a sample origin:
 * reporting to the real Capigram backend, and with a Capigram that accepts connections and never
 * answers, where pages must not wait for it.
 */
const SITE_HOST = 'shop.example.com';
const UA = 'Mozilla/5.0 (X11; Linux x86_64) NginxRecipe/1.0';

let world: World;
let origin: SampleUpstream;
let stalledTracker: TrackerStandIn;
let withBackend: RunningNginx;
let withStalled: RunningNginx;
let entryId: string;

beforeAll(async () => {
  [world, origin, stalledTracker] = await Promise.all([
    startWorld({ poolTarget: 2 }),
    startSampleUpstream(),
    startTrackerStandIn(),
  ]);
  stalledTracker.mode = 'stalled';
  await refillChannelPool(world.app.deps, world.channels.main);
  ({ entryId } = await addEntry(world.db.pool, { siteId: world.siteId, botId: world.botId }));
  [withBackend, withStalled] = await Promise.all([
    startNginx({ tracker: world.app.url, websiteId: world.websiteId, origin: origin.url }),
    startNginx({
      tracker: stalledTracker.url,
      websiteId: world.websiteId,
      origin: origin.url,
      fallback: 'https://t.me/fallback_channel',
    }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([withBackend?.close(), withStalled?.close()]);
  await Promise.all([world?.close(), origin?.close(), stalledTracker?.close()]);
});

const visitorHeaders = (ip: string, extra: Record<string, string> = {}) => ({
  host: SITE_HOST,
  accept: NAVIGATION_ACCEPT,
  'user-agent': UA,
  'x-forwarded-for': ip,
  ...extra,
});

async function eventually<T>(read: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('the nginx recipe with the real backend', () => {
  it('starts from the files as shipped, with no load_module of its own (Debian loads the njs module)', () => {
    expect(withBackend.errorLog()).not.toMatch(/\[emerg\]|\[error\]/);
  });

  it("sets the cookies, reports the visit with the visitor's IP and page, and hands out an invite link of that visit", async () => {
    const ip = `198.51.100.${randomInt(1, 255)}`;
    const page = await send(`${withBackend.url}/landing?utm_source=nginx&fbclid=IwAR_nginx`, {
      headers: visitorHeaders(ip, { cookie: '_ttp=2Qx_ttp.1; _scid=abcd-scid-1' }),
    });
    expect(page.status).toBe(200);
    expect(page.text).toContain('Sample shop');
    const tid = cookieNamed(page.setCookies, 'capigram_tid')?.value;
    const sid = cookieNamed(page.setCookies, 'capigram_sid')?.value;
    expect(tid).toMatch(/^[0-9a-f-]{36}$/);
    expect(cookieNamed(page.setCookies, '_fbc')?.value).toMatch(/^fb\.1\.\d{13}\.IwAR_nginx$/);
    const visits = await eventually(
      async () =>
        (
          await world.db.pool.query(
            'SELECT id, href, landing_page, client_ip, user_agent, utm_source, fbc, ttp, scid FROM visits WHERE temp_id = $1',
            [tid],
          )
        ).rows,
      (rows) => rows.length === 1,
    );
    expect(visits).toEqual([
      expect.objectContaining({
        href: `http://${SITE_HOST}/landing?utm_source=nginx&fbclid=IwAR_nginx`,
        landing_page: '/landing?utm_source=nginx&fbclid=IwAR_nginx',
        client_ip: ip,
        user_agent: UA,
        utm_source: 'nginx',
        ttp: '2Qx_ttp.1',
        scid: 'abcd-scid-1',
      }),
    ]);
    // The origin saw the page under its own path, whatever nginx did inside.
    expect(origin.requests.at(-1)!.url).toBe('/landing?utm_source=nginx&fbclid=IwAR_nginx');

    const invite = await send(`${withBackend.url}/capigram/invite`, {
      headers: visitorHeaders(ip, {
        cookie: `capigram_tid=${tid}; capigram_sid=${sid}`,
        referer: `http://${SITE_HOST}/landing`,
      }),
    });
    expect(invite.status).toBe(302);
    const { rows } = await world.db.pool.query('SELECT visit_id FROM invitations WHERE invite_link = $1', [
      invite.headers.location,
    ]);
    expect(rows).toEqual([{ visit_id: visits[0]!.id }]);
  });

  it('an entry click goes into the bot with a payload of a visit recorded first for a new browser', async () => {
    const res = await send(`${withBackend.url}/capigram/entry?entry=${entryId}`, {
      headers: visitorHeaders(`198.51.100.${randomInt(1, 255)}`, { referer: `http://${SITE_HOST}/bot` }),
    });
    expect(res.status, res.text).toBe(302);
    expect(res.headers['cache-control']).toBe('no-store');
    const payload = /^https:\/\/t\.me\/\w+\?start=([\w-]+)$/.exec(res.headers.location ?? '')?.[1];
    expect(payload, res.headers.location).toBeDefined();
    const tid = cookieNamed(res.setCookies, 'capigram_tid')?.value;
    const { rows } = await world.db.pool.query(
      'SELECT c.entry_id, v.temp_id FROM entry_clicks c JOIN visits v ON v.id = c.visit_id WHERE c.payload = $1',
      [payload],
    );
    expect(rows).toEqual([{ entry_id: entryId, temp_id: tid }]);
    // Only njs answered: the origin never saw the click.
    expect(origin.requests.some((r) => r.url.startsWith('/capigram/entry'))).toBe(false);
  });

  it('assets are passed straight through, reported nowhere', async () => {
    const before = (await world.db.pool.query('SELECT count(*)::int AS n FROM visits')).rows[0].n;
    const res = await send(`${withBackend.url}/app.js`, { headers: { host: SITE_HOST, accept: '*/*' } });
    expect(res.status).toBe(200);
    await new Promise((r) => setTimeout(r, 200));
    expect((await world.db.pool.query('SELECT count(*)::int AS n FROM visits')).rows[0].n).toBe(before);
  });

  it("drops a visitor's X-Capigram-* headers before the origin", async () => {
    await send(`${withBackend.url}/page`, {
      headers: visitorHeaders('198.51.100.7', {
        'x-capigram-client-ip': '6.6.6.6',
        'x-capigram-client-user-agent': 'forged',
      }),
    });
    const seen = origin.requests.at(-1)!.headers;
    expect(seen['x-capigram-client-ip']).toBeUndefined();
    expect(seen['x-capigram-client-user-agent']).toBeUndefined();
  });
});

/** Page load times (ms) of `n` sequential navigations, on fresh connections or on one kept-alive connection. */
async function loadTimes(base: string, n: number, keepAlive: boolean): Promise<number[]> {
  const agent = keepAlive ? new Agent({ keepAlive: true, maxSockets: 1 }) : undefined;
  const times: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      await new Promise<void>((ok, fail) => {
        const req = httpRequest(
          `${base}/page?n=${i}`,
          { agent: agent ?? false, headers: visitorHeaders('198.51.100.9') },
          (res) => {
            res.resume();
            res.on('end', ok);
            res.on('error', fail);
          },
        );
        req.on('error', fail);
        req.end();
      });
      times.push(performance.now() - t0);
    }
  } finally {
    agent?.destroy();
  }
  return times;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

describe('the nginx recipe while Capigram stalls', () => {
  it('serves pages within 50 ms of the origin alone, on fresh and on kept-alive connections', async () => {
    const direct = median(await loadTimes(origin.url, 8, true));
    for (const keepAlive of [false, true]) {
      const times = await loadTimes(withStalled.url, 8, keepAlive);
      expect(
        median(times) - direct,
        `keepAlive=${keepAlive}: ${times.map(Math.round).join(', ')} ms against ${Math.round(direct)} ms direct`,
      ).toBeLessThan(50);
      expect(Math.max(...times), `keepAlive=${keepAlive}`).toBeLessThan(500);
    }
    // Every page asked Capigram beside it: the last mirrors may still be on their way.
    expect((await stalledTracker.waitFor('/backend/track/init', 16)).length).toBeGreaterThanOrEqual(16);
  });

  it('sends an invite click to the fallback after js_fetch_timeout', async () => {
    const t0 = performance.now();
    const res = await send(`${withStalled.url}/capigram/invite`, {
      headers: visitorHeaders('198.51.100.10'),
    });
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('https://t.me/fallback_channel');
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  it('sends an entry click to the fallback too', async () => {
    const cookie =
      'capigram_tid=0f8fad5b-d9cb-469f-a165-70867728950e; capigram_sid=7c9e6679-7425-40de-944b-e07fc1f90ae7';
    const res = await send(`${withStalled.url}/capigram/entry?entry=e_1`, {
      headers: visitorHeaders('198.51.100.11', { cookie }),
    });
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('https://t.me/fallback_channel');
    const [call] = stalledTracker.of('/backend/track/entry');
    expect(Object.fromEntries(call!.query)).toMatchObject({
      tid: '0f8fad5b-d9cb-469f-a165-70867728950e',
      sid: '7c9e6679-7425-40de-944b-e07fc1f90ae7',
      entry: 'e_1',
    });
  });
});
