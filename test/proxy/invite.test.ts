import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { cookieNamed, send } from './support/http-client.js';
import { startRig, WEBSITE_ID, type ProxyRig } from './support/proxy-rig.js';

const TID = '0f8fad5b-d9cb-469f-a165-70867728950e';
const SID = '7c9e6679-7425-40de-944b-e07fc1f90ae7';
const BROWSER = { cookie: `capigram_tid=${TID}; capigram_sid=${SID}`, 'user-agent': 'InviteTester/2.0' };

describe('invite clicks', () => {
  let rig: ProxyRig;

  beforeAll(async () => {
    rig = await startRig({ channel: 'ch_default' });
  });
  afterAll(async () => {
    await rig.close();
  });
  beforeEach(() => {
    rig.tracker.calls.length = 0;
    rig.tracker.mode = 'up';
    rig.tracker.inviteAnswer = undefined;
  });

  it('call track/invite with the browser ids and client headers and redirect to the link it gave', async () => {
    rig.tracker.inviteAnswer = { status: 302, location: 'https://t.me/+AbCdEf123' };
    const res = await send(`${rig.proxy.url}/capigram/invite`, {
      headers: { ...BROWSER, 'x-forwarded-for': '203.0.113.50', referer: 'http://shop.example.com/landing' },
    });
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('https://t.me/+AbCdEf123');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(rig.upstream.requests.filter((r) => r.url.startsWith('/capigram/invite'))).toEqual([]);

    expect(rig.tracker.calls).toHaveLength(1);
    const [call] = rig.tracker.calls;
    expect(call?.method).toBe('GET');
    expect(call?.path).toBe('/backend/track/invite');
    expect(Object.fromEntries(call!.query)).toEqual({
      website: WEBSITE_ID,
      tid: TID,
      sid: SID,
      channel: 'ch_default',
    });
    expect(call?.headers['x-capigram-client-ip']).toBe('203.0.113.50');
    expect(call?.headers['x-capigram-client-user-agent']).toBe('InviteTester/2.0');
    expect(call?.headers.referer).toBe('http://shop.example.com/landing');
    expect(call?.headers.origin).toBe(`http://${new URL(rig.proxy.url).host}`);
    // The click is activity: the session slides.
    expect(cookieNamed(res.setCookies, 'capigram_sid')).toMatchObject({ value: SID, maxAge: 1_800 });
    expect(cookieNamed(res.setCookies, 'capigram_tid')).toBeUndefined();
  });

  it('take the channel from ?channel=', async () => {
    await send(`${rig.proxy.url}/capigram/invite?channel=ch_vip`, { headers: BROWSER });
    expect(rig.tracker.calls[0]?.query.get('channel')).toBe('ch_vip');
  });

  it('ask for the channel the link names even when it is too long, never silently for the default one', async () => {
    const named = 'a'.repeat(300);
    await send(`${rig.proxy.url}/capigram/invite?channel=${named}`, { headers: BROWSER });
    expect(rig.tracker.calls[0]?.query.get('channel')).toBe(named);
  });

  it('record a visit first when the browser has no session yet, then invite with the new ids', async () => {
    const res = await send(`${rig.proxy.url}/capigram/invite`, {
      headers: { 'user-agent': 'Fresh/1.0', referer: 'https://t.co/x' },
    });
    expect(res.status).toBe(302);
    const tid = cookieNamed(res.setCookies, 'capigram_tid')?.value;
    const sid = cookieNamed(res.setCookies, 'capigram_sid')?.value;
    expect(rig.tracker.calls.map((call) => call.path)).toEqual([
      '/backend/track/init',
      '/backend/track/invite',
    ]);
    expect(rig.tracker.calls[0]?.body).toMatchObject({
      websiteId: WEBSITE_ID,
      tempId: tid,
      sessionId: sid,
      referrer: 'https://t.co/x',
    });
    expect(rig.tracker.calls[1]?.query.get('tid')).toBe(tid);
    expect(rig.tracker.calls[1]?.query.get('sid')).toBe(sid);
  });

  it('patch a late _fbp beside the click, once', async () => {
    const res = await send(`${rig.proxy.url}/capigram/invite`, {
      headers: { ...BROWSER, cookie: `${BROWSER.cookie}; _fbp=fb.1.1.777` },
    });
    expect(res.status).toBe(302);
    const [patch] = await rig.tracker.waitFor('/backend/track/update-fbp');
    expect(patch?.body).toEqual({ websiteId: WEBSITE_ID, tempId: TID, fbp: 'fb.1.1.777' });
    expect(cookieNamed(res.setCookies, 'capigram_fbpp')?.value).toBe(TID);
  });

  it('never follow the tracker redirect themselves', async () => {
    rig.tracker.inviteAnswer = { status: 302, location: `${rig.upstream.url}/page` };
    const before = rig.upstream.requests.length;
    const res = await send(`${rig.proxy.url}/capigram/invite`, { headers: BROWSER });
    expect(res.headers.location).toBe(`${rig.upstream.url}/page`);
    expect(rig.upstream.requests.length).toBe(before);
  });

  it('leave other methods on the invite path to the upstream', async () => {
    const res = await send(`${rig.proxy.url}/capigram/invite`, {
      method: 'POST',
      headers: BROWSER,
      body: 'x',
    });
    expect(res.status).toBe(404);
    expect(rig.tracker.calls).toHaveLength(0);
  });
});

describe('invite clicks when the tracker cannot help', () => {
  let rig: ProxyRig;

  beforeAll(async () => {
    rig = await startRig({ fallbackUrl: 'https://t.me/public_channel' });
  });
  afterAll(async () => {
    await rig.close();
  });
  afterEach(() => {
    rig.tracker.mode = 'up';
    rig.tracker.inviteAnswer = undefined;
  });

  it.each([
    ['a refusal', { status: 404 }],
    ['a redirect without Location', { status: 302 }],
    ['a redirect to a script URL', { status: 302, location: 'javascript:alert(1)' }],
    ['a server error', { status: 503 }],
  ])('go to the fallback URL on %s', async (_name, answer) => {
    rig.tracker.inviteAnswer = answer;
    const res = await send(`${rig.proxy.url}/capigram/invite`, { headers: BROWSER });
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('https://t.me/public_channel');
  });

  it('go to the fallback URL, within the invite timeout, when the tracker stalls', async () => {
    rig.tracker.mode = 'stalled';
    const started = performance.now();
    const res = await send(`${rig.proxy.url}/capigram/invite`, { headers: BROWSER });
    expect(res.headers.location).toBe('https://t.me/public_channel');
    expect(performance.now() - started).toBeLessThan(1_500);
    expect(rig.logs.some((line) => line.op === 'invite' && line.level === 40)).toBe(true);
  });

  it('keep a fresh browser (visit first, then invite) within one invite timeout when the tracker stalls', async () => {
    rig.tracker.mode = 'stalled';
    rig.tracker.calls.length = 0;
    const started = performance.now();
    const res = await send(`${rig.proxy.url}/capigram/invite`);
    expect(res.headers.location).toBe('https://t.me/public_channel');
    expect(performance.now() - started).toBeLessThan(900);
    expect(rig.tracker.calls.map((call) => call.path)).toEqual(['/backend/track/init']);
  });
});

describe('invite clicks with the tracker down and no fallback', () => {
  it('get a plain friendly page, not an error', async () => {
    const rig = await startRig();
    await rig.tracker.close();
    try {
      const res = await send(`${rig.proxy.url}/capigram/invite`, { headers: BROWSER });
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.text).toContain('Please go back and tap the link again');
      expect(res.text).not.toMatch(/capigram|error|ECONNREFUSED/i);
    } finally {
      await rig.proxy.stop();
      await rig.upstream.close();
    }
  });

  it('use a custom invite path', async () => {
    const rig = await startRig({ invitePath: '/join' });
    try {
      const res = await send(`${rig.proxy.url}/join?channel=c1`, { headers: BROWSER });
      expect(res.status).toBe(302);
      expect(rig.tracker.calls.map((call) => call.path)).toEqual(['/backend/track/invite']);
      expect((await send(`${rig.proxy.url}/capigram/invite`, { headers: BROWSER })).status).toBe(404);
    } finally {
      await rig.close();
    }
  });
});
