import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { cookieNamed } from './support/http-client.js';
import { startSampleUpstream, type SampleUpstream } from './support/sample-upstream.js';
import { startTrackerStandIn, type TrackerStandIn } from './support/tracker-stand-in.js';
import { createForwarderKey } from '../../backend/domain/admin/forwarder-keys.js';
import { scratchDir } from '../harness/scratch.js';
import { startWorld } from '../tracker/world.js';

/**
 * The Cloudflare Worker recipe (examples/cloudflare-worker/capigram-worker.js), run as it ships
 * under Node (which has the same fetch, Request, Response and crypto globals): it must make the
 * calls the proxy makes, and prove itself to Capigram with a forwarder key.
 */
interface Worker {
  fetch(
    request: Request,
    env: Record<string, string>,
    ctx: { waitUntil(promise: Promise<unknown>): void },
  ): Promise<Response>;
}

const WORKER_FILE = new URL('../../examples/cloudflare-worker/capigram-worker.js', import.meta.url);

const SITE = 'https://shop.example.com';
const TID = '0f8fad5b-d9cb-469f-a165-70867728950e';
const SID = '7c9e6679-7425-40de-944b-e07fc1f90ae7';

let worker: Worker;
let upstream: SampleUpstream;
let tracker: TrackerStandIn;
let env: Record<string, string>;
let background: Array<Promise<unknown>>;

async function run(
  path: string,
  init: RequestInit & { headers?: Record<string, string> } = {},
): Promise<Response> {
  const request = new Request(`${SITE}${path}`, {
    ...init,
    headers: { 'cf-connecting-ip': '203.0.113.8', 'user-agent': 'WorkerUA/1', ...init.headers },
    ...(init.body === undefined ? {} : { duplex: 'half' }),
  } as RequestInit);
  const response = await worker.fetch(request, env, {
    waitUntil: (promise) => void background.push(promise),
  });
  await Promise.all(background);
  return response;
}

beforeAll(async () => {
  // Node reads .js as CommonJS here: the same text, under the name of an ES module.
  const file = join(scratchDir('worker'), 'capigram-worker.mjs');
  writeFileSync(file, readFileSync(WORKER_FILE, 'utf8'));
  worker = ((await import(pathToFileURL(file).href)) as { default: Worker }).default;
  upstream = await startSampleUpstream();
  tracker = await startTrackerStandIn();
});
afterAll(async () => {
  await Promise.all([upstream.close(), tracker.close()]);
});
beforeEach(() => {
  tracker.calls.length = 0;
  tracker.inviteAnswer = undefined;
  background = [];
  env = {
    CAPIGRAM_TRACKER_URL: `${tracker.url}/`,
    CAPIGRAM_WEBSITE_ID: 'ws_worker',
    CAPIGRAM_UPSTREAM: upstream.url,
  };
});

describe('the Cloudflare Worker recipe', () => {
  it('serves the page with Secure first-party cookies and posts track/init with the client context', async () => {
    const res = await run('/landing?fbclid=Wk-1&utm_source=fb', {
      headers: { accept: 'text/html', referer: 'https://l.facebook.com/' },
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('Sample shop');
    const setCookies = res.headers.getSetCookie();
    const tid = cookieNamed(setCookies, 'capigram_tid');
    const sid = cookieNamed(setCookies, 'capigram_sid');
    expect(tid).toMatchObject({ path: '/', sameSite: 'lax', secure: true, maxAge: 31_536_000 });
    expect(sid).toMatchObject({ path: '/', sameSite: 'lax', secure: true, maxAge: 1_800 });
    const fbc = cookieNamed(setCookies, '_fbc')?.value;
    expect(fbc).toMatch(/^fb\.1\.\d{13}\.Wk-1$/);

    const [init] = tracker.of('/backend/track/init');
    expect(init?.headers['x-capigram-client-ip']).toBe('203.0.113.8');
    expect(init?.headers['x-capigram-client-user-agent']).toBe('WorkerUA/1');
    expect(init?.headers.origin).toBe(SITE);
    expect(init?.body).toEqual({
      websiteId: 'ws_worker',
      tempId: tid?.value,
      sessionId: sid?.value,
      visitRequestId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      href: `${SITE}/landing?fbclid=Wk-1&utm_source=fb`,
      landingPage: '/landing?fbclid=Wk-1&utm_source=fb',
      referrer: 'https://l.facebook.com/',
      userAgent: 'WorkerUA/1',
      fbc,
      utmSource: 'fb',
    });
  });

  it('keeps the session, patches a late _fbp once before the visit, and keeps upstream cookies', async () => {
    const res = await run('/with-cookies', {
      headers: { accept: 'text/html', cookie: `capigram_tid=${TID}; capigram_sid=${SID}; _fbp=fb.1.1.5` },
    });
    const setCookies = res.headers.getSetCookie();
    expect(setCookies).toEqual(
      expect.arrayContaining(['shop_session=s3cr3t; Path=/; HttpOnly', 'cart=2; Path=/']),
    );
    expect(cookieNamed(setCookies, 'capigram_tid')).toBeUndefined();
    expect(cookieNamed(setCookies, 'capigram_sid')?.value).toBe(SID);
    expect(cookieNamed(setCookies, 'capigram_fbpp')?.value).toBe(TID);
    expect(tracker.calls.map((call) => call.path)).toEqual([
      '/backend/track/update-fbp',
      '/backend/track/init',
    ]);
    expect(tracker.calls[0]?.body).toEqual({ websiteId: 'ws_worker', tempId: TID, fbp: 'fb.1.1.5' });
    expect(tracker.calls[1]?.body).toMatchObject({ tempId: TID, sessionId: SID, fbp: 'fb.1.1.5' });
  });

  it('leaves assets, redirects and POSTs alone', async () => {
    const asset = await run('/app.js', { headers: { accept: '*/*' } });
    expect(await asset.text()).toBe('console.log("app")');
    expect(asset.headers.getSetCookie()).toEqual([]);
    const redirect = await run('/redirect', { headers: { accept: 'text/html' } });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get('location')).toBe('/landing');
    const posted = await run('/echo', {
      method: 'POST',
      body: 'a=1&b=2',
      headers: { 'content-type': 'text/plain' },
    });
    expect(await posted.text()).toBe('a=1&b=2');
    expect(tracker.calls).toEqual([]);
  });

  it('redirects invite clicks to the link track/invite gives, with the client headers', async () => {
    tracker.inviteAnswer = { status: 302, location: 'https://t.me/+WorkerLink' };
    env.CAPIGRAM_CHANNEL_ID = 'ch_default';
    const res = await run('/capigram/invite', {
      headers: { cookie: `capigram_tid=${TID}; capigram_sid=${SID}`, referer: `${SITE}/landing` },
    });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('https://t.me/+WorkerLink');
    expect(res.headers.get('cache-control')).toBe('no-store');
    const [call] = tracker.calls;
    expect(Object.fromEntries(call!.query)).toEqual({
      website: 'ws_worker',
      tid: TID,
      sid: SID,
      channel: 'ch_default',
    });
    expect(call?.headers).toMatchObject({
      'x-capigram-client-ip': '203.0.113.8',
      referer: `${SITE}/landing`,
      origin: SITE,
    });
  });

  it('sends invite clicks to the fallback, or a plain page, when the tracker cannot help', async () => {
    tracker.inviteAnswer = { status: 503 };
    env.CAPIGRAM_FALLBACK_URL = 'https://t.me/public_fallback';
    const fallback = await run('/capigram/invite', {
      headers: { cookie: `capigram_tid=${TID}; capigram_sid=${SID}` },
    });
    expect(fallback.headers.get('location')).toBe('https://t.me/public_fallback');
    delete env.CAPIGRAM_FALLBACK_URL;
    const page = await run('/capigram/invite', {
      headers: { cookie: `capigram_tid=${TID}; capigram_sid=${SID}` },
    });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('tap the link again');
  });

  it('redirects entry clicks into the bot with the deep link track/entry gives; without ?entry=, the default entry', async () => {
    const res = await run('/capigram/entry?entry=e_1', {
      headers: { cookie: `capigram_tid=${TID}; capigram_sid=${SID}`, referer: `${SITE}/bot` },
    });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toMatch(/^https:\/\/t\.me\/stand_in_bot\?start=StandIn\d+$/);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const [call, ...more] = tracker.calls;
    expect(more).toEqual([]);
    expect(call?.path).toBe('/backend/track/entry');
    expect(Object.fromEntries(call!.query)).toEqual({
      website: 'ws_worker',
      tid: TID,
      sid: SID,
      entry: 'e_1',
    });
    expect(call?.headers).toMatchObject({ 'x-capigram-client-ip': '203.0.113.8', referer: `${SITE}/bot` });
    expect(upstream.requests.some((r) => r.url.startsWith('/capigram/entry'))).toBe(false);

    tracker.calls.length = 0;
    env.CAPIGRAM_CHANNEL_ID = 'ch_default';
    const fresh = await run('/capigram/entry', { headers: {} });
    expect(fresh.status).toBe(302);
    expect(tracker.calls.map((c) => c.path)).toEqual(['/backend/track/init', '/backend/track/entry']);
    expect(Object.fromEntries(tracker.calls[1]!.query)).toEqual({
      website: 'ws_worker',
      tid: cookieNamed(fresh.headers.getSetCookie(), 'capigram_tid')?.value,
      sid: cookieNamed(fresh.headers.getSetCookie(), 'capigram_sid')?.value,
    });
  });

  it('sends entry clicks to the fallback when the tracker does not answer', async () => {
    env.CAPIGRAM_TRACKER_URL = 'http://127.0.0.1:9';
    env.CAPIGRAM_FALLBACK_URL = 'https://t.me/public_fallback';
    const res = await run('/capigram/entry', {
      headers: { cookie: `capigram_tid=${TID}; capigram_sid=${SID}` },
    });
    expect(res.headers.get('location')).toBe('https://t.me/public_fallback');
  });

  it("keeps an _fbc with Meta's appendix for the same click, and reports the _ttp and _scid cookies", async () => {
    const res = await run('/landing?fbclid=SAME', {
      headers: {
        accept: 'text/html',
        cookie: `capigram_tid=${TID}; capigram_sid=${SID}; _fbc=fb.1.1690000000000.SAME.AQx-y_z; _ttp=2Qx_ttp.1; _scid=abcd-scid-1`,
      },
    });
    expect(tracker.of('/backend/track/init')[0]?.body).toMatchObject({
      fbc: 'fb.1.1690000000000.SAME.AQx-y_z',
      ttp: '2Qx_ttp.1',
      scid: 'abcd-scid-1',
    });
    expect(res.headers.getSetCookie().some((c) => c.startsWith('_fbc='))).toBe(false);
  });

  it('sends its forwarder key with every tracker call when it has one, and none otherwise', async () => {
    await run('/landing', { headers: { accept: 'text/html' } });
    expect(tracker.of('/backend/track/init')[0]?.headers['x-capigram-forwarder-key']).toBeUndefined();
    env.CAPIGRAM_FORWARDER_KEY = `cgf_AAAAAAAAAAAA_${'k'.repeat(43)}`;
    tracker.calls.length = 0;
    await run('/landing', {
      headers: { accept: 'text/html', cookie: `capigram_tid=${TID}; capigram_sid=${SID}; _fbp=fb.1.1.6` },
    });
    tracker.inviteAnswer = { status: 302, location: 'https://t.me/+K' };
    await run('/capigram/invite', { headers: { cookie: `capigram_tid=${TID}; capigram_sid=${SID}` } });
    expect(tracker.calls.map((c) => c.path)).toEqual([
      '/backend/track/update-fbp',
      '/backend/track/init',
      '/backend/track/invite',
    ]);
    for (const call of tracker.calls)
      expect(call.headers['x-capigram-forwarder-key'], call.path).toBe(env.CAPIGRAM_FORWARDER_KEY);
    delete env.CAPIGRAM_FORWARDER_KEY;
  });

  it("drops a visitor's X-Capigram-* headers before the origin", async () => {
    await run('/page', {
      headers: {
        accept: 'text/html',
        'x-capigram-client-ip': '6.6.6.6',
        'X-Capigram-Forwarder-Key': 'stolen?',
      },
    });
    const seen = upstream.requests.at(-1)!.headers;
    expect(seen['x-capigram-client-ip']).toBeUndefined();
    expect(seen['x-capigram-forwarder-key']).toBeUndefined();
  });
});

describe('the Cloudflare Worker recipe with a consent cookie (docs/consent.md)', () => {
  beforeEach(() => {
    env.CAPIGRAM_CONSENT_COOKIE = 'cookie_consent';
    env.CAPIGRAM_CONSENT_REQUIRED = 'true';
  });

  it('without consent: no cookie, no _fbp patch, a count with nothing of the visitor', async () => {
    const res = await run('/landing?fbclid=IwAR_w&utm_source=w', {
      headers: {
        accept: 'text/html',
        cookie: `capigram_tid=${TID}; capigram_sid=${SID}; _fbp=fb.1.1.5`,
        referer: 'https://ref.example/?x=1',
      },
    });
    expect(res.status).toBe(200);
    expect(res.headers.getSetCookie()).toEqual([]);
    expect(tracker.calls.map((call) => call.path)).toEqual(['/backend/track/init']);
    const [call] = tracker.calls;
    expect(call!.body).toEqual({
      websiteId: 'ws_worker',
      tempId: expect.not.stringMatching(TID),
      sessionId: expect.not.stringMatching(SID),
      visitRequestId: expect.any(String),
      consent: 'denied',
      href: `${SITE}/landing`,
      landingPage: '/landing',
    });
    expect(call!.headers['x-capigram-client-ip']).toBeUndefined();
    expect(call!.headers['x-capigram-client-user-agent']).toBeUndefined();
  });

  it('an invite click without consent asks for a link with fresh ids and consent=denied, sending nothing of the visitor', async () => {
    const res = await run('/capigram/invite', {
      headers: { cookie: `capigram_tid=${TID}; capigram_sid=${SID}`, referer: `${SITE}/landing` },
    });
    expect(res.status).toBe(302);
    expect(res.headers.getSetCookie()).toEqual([]);
    expect(tracker.calls.map((call) => call.path)).toEqual(['/backend/track/invite']);
    const [call] = tracker.calls;
    expect(call!.query.get('consent')).toBe('denied');
    expect(call!.query.get('tid')).not.toBe(TID);
    expect(call!.headers['x-capigram-client-ip']).toBeUndefined();
    expect(call!.headers.referer).toBeUndefined();
  });

  it('granted: cookies and the full visit, marked granted', async () => {
    const res = await run('/landing?utm_source=w', {
      headers: { accept: 'text/html', cookie: 'cookie_consent=granted' },
    });
    expect(res.headers.getSetCookie().some((c) => c.startsWith('capigram_tid='))).toBe(true);
    const [call] = tracker.calls;
    expect(call!.body).toMatchObject({ consent: 'granted', utmSource: 'w', userAgent: 'WorkerUA/1' });
    expect(call!.headers['x-capigram-client-ip']).toBe('203.0.113.8');
  });
});

describe('the Cloudflare Worker recipe with the real backend', () => {
  it("gets the visitor's IP believed through its forwarder key, without trusting any address", async () => {
    const world = await startWorld({ env: { TRUSTED_PROXIES: 'none' } });
    try {
      const { forwarderKey } = await createForwarderKey(world.db.pool, { siteId: world.siteId });
      env = {
        CAPIGRAM_TRACKER_URL: world.app.url,
        CAPIGRAM_WEBSITE_ID: world.websiteId,
        CAPIGRAM_UPSTREAM: upstream.url,
        CAPIGRAM_FORWARDER_KEY: forwarderKey,
      };
      const res = await run('/landing?utm_source=cf', { headers: { accept: 'text/html' } });
      const tid = cookieNamed(res.headers.getSetCookie(), 'capigram_tid')?.value;
      const { rows } = await world.db.pool.query(
        'SELECT client_ip, user_agent, utm_source FROM visits WHERE temp_id = $1',
        [tid],
      );
      expect(rows).toEqual([{ client_ip: '203.0.113.8', user_agent: 'WorkerUA/1', utm_source: 'cf' }]);

      // Without the key, the same Worker's calls carry Capigram's view of the caller instead.
      delete env.CAPIGRAM_FORWARDER_KEY;
      const unkeyed = await run('/landing?utm_source=nokey', { headers: { accept: 'text/html' } });
      const tid2 = cookieNamed(unkeyed.headers.getSetCookie(), 'capigram_tid')?.value;
      const { rows: plain } = await world.db.pool.query('SELECT client_ip FROM visits WHERE temp_id = $1', [
        tid2,
      ]);
      expect(plain).toEqual([{ client_ip: '127.0.0.1' }]);
    } finally {
      await world.close();
    }
  });
});
