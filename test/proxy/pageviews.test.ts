import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ClockedCookieJar, cookieNamed, NAVIGATION_ACCEPT, send } from './support/http-client.js';
import { startRig, WEBSITE_ID, type ProxyRig } from './support/proxy-rig.js';
import { HOME_HTML } from './support/sample-upstream.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const MINUTE = 60_000;

let rig: ProxyRig;

beforeAll(async () => {
  rig = await startRig();
});
afterAll(async () => {
  await rig.close();
});
beforeEach(async () => {
  // A test that checks one call may leave another (an init behind its fbp patch) still on its way.
  await rig.settle();
  rig.tracker.calls.length = 0;
  rig.tracker.mode = 'up';
});

describe('a first visit', () => {
  it('serves the page as the origin did, sets both cookies and posts track/init with the client context', async () => {
    const res = await rig.navigate(
      '/landing?utm_source=fb&utm_campaign=spring%20sale&gclid=G-1&ttclid=T-1&ScCid=S-1',
      {
        referer: 'https://l.facebook.com/',
      },
    );
    expect(res.status).toBe(200);
    expect(res.text).toBe(HOME_HTML);

    const tid = cookieNamed(res.setCookies, 'capigram_tid');
    const sid = cookieNamed(res.setCookies, 'capigram_sid');
    expect(tid?.value).toMatch(UUID);
    expect(sid?.value).toMatch(UUID);
    expect(tid).toMatchObject({ path: '/', sameSite: 'lax', maxAge: 31_536_000 });
    expect(sid).toMatchObject({ path: '/', sameSite: 'lax', maxAge: 1_800 });
    expect(tid?.secure).toBeUndefined();
    expect(tid?.httpOnly).toBeUndefined();
    expect(tid?.domain).toBeUndefined();
    expect(sid?.expires?.getTime()).toBe(Math.floor((rig.clock.now() + 30 * MINUTE) / 1000) * 1000);

    const [init] = await rig.tracker.waitFor('/backend/track/init');
    const host = new URL(rig.proxy.url).host;
    expect(init?.method).toBe('POST');
    expect(init?.headers['x-capigram-client-ip']).toBe('127.0.0.1');
    expect(init?.headers['x-capigram-client-user-agent']).toBe(
      'Mozilla/5.0 (X11; Linux x86_64) TestBrowser/1.0',
    );
    expect(init?.headers.origin).toBe(`http://${host}`);
    expect(init?.headers['content-type']).toBe('application/json');
    expect(init?.body).toEqual({
      websiteId: WEBSITE_ID,
      tempId: tid?.value,
      sessionId: sid?.value,
      visitRequestId: expect.stringMatching(UUID),
      href: `http://${host}/landing?utm_source=fb&utm_campaign=spring%20sale&gclid=G-1&ttclid=T-1&ScCid=S-1`,
      landingPage: '/landing?utm_source=fb&utm_campaign=spring%20sale&gclid=G-1&ttclid=T-1&ScCid=S-1',
      referrer: 'https://l.facebook.com/',
      userAgent: 'Mozilla/5.0 (X11; Linux x86_64) TestBrowser/1.0',
      gclid: 'G-1',
      ttclid: 'T-1',
      sccid: 'S-1',
      utmSource: 'fb',
      utmCampaign: 'spring sale',
    });
  });

  it("reads Google's iOS click ids (gbraid, wbraid) from the landing URL", async () => {
    await rig.navigate('/landing?gbraid=0AAAAA-gb_1&wbraid=CjkKC-wb_2');
    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init?.body).toMatchObject({ gbraid: '0AAAAA-gb_1', wbraid: 'CjkKC-wb_2' });
    expect(init?.body).not.toHaveProperty('gclid');
  });

  it('leaves out a query value with a NUL (%00), which the tracker would refuse, and keeps the rest', async () => {
    await rig.navigate('/landing?utm_source=a%00b&utm_medium=cpc&gclid=G%00');
    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init?.body).toMatchObject({
      landingPage: '/landing?utm_source=a%00b&utm_medium=cpc&gclid=G%00',
      utmMedium: 'cpc',
    });
    expect(init?.body).not.toHaveProperty('utmSource');
    expect(init?.body).not.toHaveProperty('gclid');
  });

  it('reports the browser behind a trusted hop: its X-Forwarded-For, -Host and -Proto (then cookies are Secure)', async () => {
    const res = await rig.navigate('/page', {
      'x-forwarded-for': '198.51.100.23',
      'x-forwarded-host': 'shop.example.com',
      'x-forwarded-proto': 'https',
    });
    expect(cookieNamed(res.setCookies, 'capigram_tid')?.secure).toBe(true);
    expect(cookieNamed(res.setCookies, 'capigram_sid')?.secure).toBe(true);
    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init?.headers['x-capigram-client-ip']).toBe('198.51.100.23');
    expect(init?.headers.origin).toBe('https://shop.example.com');
    expect(init?.body?.href).toBe('https://shop.example.com/page');
  });

  it('builds href from the Host the browser asked for', async () => {
    await rig.navigate('/page?x=1', { host: 'landing.example.org' });
    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init?.body?.href).toBe('http://landing.example.org/page?x=1');
  });

  it('leaves out a User-Agent header it was not given', async () => {
    await send(`${rig.proxy.url}/page`, { headers: { accept: 'text/html' } });
    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init?.headers['x-capigram-client-user-agent']).toBeUndefined();
    expect(init?.body?.userAgent).toBeUndefined();
  });
});

describe('the session', () => {
  it('is kept by a pageview within 30 minutes, slides with each one, and is replaced after 30 idle minutes', async () => {
    const jar = new ClockedCookieJar(rig.clock.now);
    const visit = async () => {
      const before = rig.tracker.of('/backend/track/init').length;
      const res = await rig.navigate('/page', { cookie: jar.header() });
      jar.store(res.setCookies);
      const calls = await rig.tracker.waitFor('/backend/track/init', before + 1);
      return { res, body: calls[before]?.body };
    };

    const first = await visit();
    const tid = jar.get('capigram_tid');
    const sid = jar.get('capigram_sid');
    expect(first.body).toMatchObject({ tempId: tid, sessionId: sid });

    rig.clock.advance(29 * MINUTE);
    const second = await visit();
    expect(second.body).toMatchObject({ tempId: tid, sessionId: sid });
    expect(second.body?.visitRequestId).not.toBe(first.body?.visitRequestId);
    expect(cookieNamed(second.res.setCookies, 'capigram_tid')).toBeUndefined();
    expect(cookieNamed(second.res.setCookies, 'capigram_sid')?.value).toBe(sid);

    // 58 minutes after the first pageview, but only 29 after the last one: still the same session.
    rig.clock.advance(29 * MINUTE);
    expect((await visit()).body).toMatchObject({ tempId: tid, sessionId: sid });

    rig.clock.advance(31 * MINUTE);
    const afterIdle = await visit();
    expect(afterIdle.body?.tempId).toBe(tid);
    expect(afterIdle.body?.sessionId).toMatch(UUID);
    expect(afterIdle.body?.sessionId).not.toBe(sid);
    expect(jar.get('capigram_sid')).toBe(afterIdle.body?.sessionId);
  });

  it('replaces ids that are not UUIDs', async () => {
    const res = await rig.navigate('/page', { cookie: 'capigram_tid=forged; capigram_sid=1234' });
    const tid = cookieNamed(res.setCookies, 'capigram_tid')?.value;
    expect(tid).toMatch(UUID);
    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init?.body?.tempId).toBe(tid);
    expect(init?.body?.sessionId).toMatch(UUID);
  });
});

describe('fbc', () => {
  it('is built from fbclid byte for byte and stored as _fbc', async () => {
    const fbclid = 'IwAR2F4-_xYz%2Bq0~AbC';
    const res = await rig.navigate(`/landing?fbclid=${fbclid}&utm_source=facebook`);
    const expected = `fb.1.${rig.clock.now()}.${fbclid}`;
    expect(cookieNamed(res.setCookies, '_fbc')).toMatchObject({
      value: expected,
      path: '/',
      maxAge: 7_776_000,
    });
    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init?.body?.fbc).toBe(expected);
  });

  it('keeps an _fbc that records the same fbclid', async () => {
    const res = await rig.navigate('/landing?fbclid=SAME', { cookie: '_fbc=fb.1.1690000000000.SAME' });
    expect(cookieNamed(res.setCookies, '_fbc')).toBeUndefined();
    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init?.body?.fbc).toBe('fb.1.1690000000000.SAME');
  });

  it('replaces an _fbc from an older click', async () => {
    await rig.navigate('/landing?fbclid=NEWER', { cookie: '_fbc=fb.1.1690000000000.OLDER' });
    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init?.body?.fbc).toBe(`fb.1.${rig.clock.now()}.NEWER`);
  });

  it("keeps an _fbc with Meta's appendix for the same click, and reports the _ttp and _scid cookies", async () => {
    const res = await rig.navigate('/landing?fbclid=SAME', {
      cookie: '_fbc=fb.1.1690000000000.SAME.AQx-y_z; _ttp=2Qx_ttp.1; _scid=abcd-scid-1',
    });
    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init?.body).toMatchObject({
      fbc: 'fb.1.1690000000000.SAME.AQx-y_z',
      ttp: '2Qx_ttp.1',
      scid: 'abcd-scid-1',
    });
    expect(res.setCookies.some((c) => c.startsWith('_fbc='))).toBe(false);
  });

  it('reports an existing _fbc and _fbp without a click', async () => {
    await rig.navigate('/page', {
      cookie: '_fbc=fb.1.1690000000000.KEPT; _fbp=fb.1.1690000000000.987654321',
    });
    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init?.body).toMatchObject({ fbc: 'fb.1.1690000000000.KEPT', fbp: 'fb.1.1690000000000.987654321' });
  });
});

describe('the _fbp patch', () => {
  it('is posted once, before the next visit, when _fbp appears for a browser whose visits lacked it', async () => {
    const jar = new ClockedCookieJar(rig.clock.now);
    jar.store((await rig.navigate('/page', { cookie: jar.header() })).setCookies);
    const [first] = await rig.tracker.waitFor('/backend/track/init');
    expect(first?.body?.fbp).toBeUndefined();

    jar.set('_fbp', 'fb.1.1717236000000.1122334455');
    const second = await rig.navigate('/page', { cookie: jar.header() });
    jar.store(second.setCookies);
    const [patch] = await rig.tracker.waitFor('/backend/track/update-fbp');
    const inits = await rig.tracker.waitFor('/backend/track/init', 2);
    expect(patch?.body).toEqual({
      websiteId: WEBSITE_ID,
      tempId: jar.get('capigram_tid'),
      fbp: 'fb.1.1717236000000.1122334455',
    });
    expect(patch?.headers['x-capigram-client-ip']).toBe('127.0.0.1');
    expect(rig.tracker.calls.indexOf(patch!)).toBeLessThan(rig.tracker.calls.indexOf(inits[1]!));
    expect(inits[1]?.body?.fbp).toBe('fb.1.1717236000000.1122334455');
    expect(jar.get('capigram_fbpp')).toBe(jar.get('capigram_tid'));

    await rig.navigate('/page', { cookie: jar.header() });
    await rig.tracker.waitFor('/backend/track/init', 3);
    expect(rig.tracker.of('/backend/track/update-fbp')).toHaveLength(1);
  });

  it('is not needed when the first visit already carried _fbp', async () => {
    const res = await rig.navigate('/page', { cookie: '_fbp=fb.1.1.42' });
    await rig.tracker.waitFor('/backend/track/init');
    expect(cookieNamed(res.setCookies, 'capigram_fbpp')?.value).toBe(
      cookieNamed(res.setCookies, 'capigram_tid')?.value,
    );
    expect(rig.tracker.of('/backend/track/update-fbp')).toHaveLength(0);
  });

  it('ignores a marker left by another browser id', async () => {
    const tid = '0f8fad5b-d9cb-469f-a165-70867728950e';
    await rig.navigate('/page', {
      cookie: `capigram_tid=${tid}; capigram_sid=7c9e6679-7425-40de-944b-e07fc1f90ae7; _fbp=fb.1.1.42; capigram_fbpp=6ba7b810-9dad-41d1-80b4-00c04fd430c8`,
    });
    const [patch] = await rig.tracker.waitFor('/backend/track/update-fbp');
    expect(patch?.body?.tempId).toBe(tid);
  });
});

describe('requests that are not pageviews', () => {
  const cases: Array<[string, string, Record<string, string>, string?]> = [
    ['an asset', '/app.js', { accept: '*/*' }],
    ['an asset requested with an HTML Accept', '/app.js', { accept: NAVIGATION_ACCEPT }],
    ['a JSON call', '/api/data', { accept: 'application/json' }],
    ['a Chromium prefetch', '/page', { accept: NAVIGATION_ACCEPT, 'sec-purpose': 'prefetch' }],
    ['a Chromium prerender', '/page', { accept: NAVIGATION_ACCEPT, 'sec-purpose': 'prefetch;prerender' }],
    ['a legacy prefetch', '/page', { accept: NAVIGATION_ACCEPT, purpose: 'prefetch' }],
    ['a Firefox prefetch', '/page', { accept: NAVIGATION_ACCEPT, 'x-moz': 'prefetch' }],
    [
      'an iframe',
      '/page',
      { accept: NAVIGATION_ACCEPT, 'sec-fetch-dest': 'iframe', 'sec-fetch-mode': 'navigate' },
    ],
    [
      'a fetch() of HTML',
      '/page',
      { accept: 'text/html', 'sec-fetch-dest': 'empty', 'sec-fetch-mode': 'cors' },
    ],
    ['a HEAD', '/page', { accept: NAVIGATION_ACCEPT }, 'HEAD'],
    ['a POST form', '/echo', { accept: NAVIGATION_ACCEPT }, 'POST'],
  ];

  it.each(cases)('%s posts nothing and sets no cookie', async (_name, path, headers, method) => {
    const res = await send(`${rig.proxy.url}${path}`, { method: method ?? 'GET', headers });
    expect(res.status).toBeLessThan(300);
    expect(res.setCookies).toEqual([]);
    // A real pageview afterwards is the first call the tracker sees.
    await rig.navigate('/page');
    await rig.tracker.waitFor('/backend/track/init');
    expect(rig.tracker.calls).toHaveLength(1);
  });

  it.each([
    ['a redirect', '/redirect', 302],
    ['a missing page', '/nope', 404],
  ])('%s keeps the cookies but is not a visit', async (_name, path, status) => {
    const res = await rig.navigate(path);
    expect(res.status).toBe(status);
    expect(cookieNamed(res.setCookies, 'capigram_sid')).toBeDefined();
    await rig.navigate('/page');
    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init?.body?.landingPage).toBe('/page');
    expect(rig.tracker.calls).toHaveLength(1);
  });

  it('a real navigation with Sec-Fetch headers is one', async () => {
    await rig.navigate('/page', { 'sec-fetch-dest': 'document', 'sec-fetch-mode': 'navigate' });
    expect(await rig.tracker.waitFor('/backend/track/init')).toHaveLength(1);
  });
});
