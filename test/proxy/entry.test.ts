// The proxy's entry path beside its invite path: GET /capigram/entry[?entry=ID] becomes a
// redirect to the bot deep link track/entry hands out, with the browser's ids and client headers,
// a visit recorded first for a browser without a session, and the fallback when Capigram does not answer in time.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { cookieNamed, send } from './support/http-client.js';
import { startRig, WEBSITE_ID, type ProxyRig } from './support/proxy-rig.js';

const TID = '0f8fad5b-d9cb-469f-a165-70867728950e';
const SID = '7c9e6679-7425-40de-944b-e07fc1f90ae7';
const BROWSER = { cookie: `capigram_tid=${TID}; capigram_sid=${SID}`, 'user-agent': 'EntryTester/1.0' };

describe('entry clicks through the proxy', () => {
  let rig: ProxyRig;
  beforeAll(async () => {
    rig = await startRig({ fallbackUrl: 'https://t.me/fallback_bot', inviteTimeoutMs: 1000 });
  });
  afterAll(async () => {
    await rig.close();
  });
  beforeEach(() => {
    rig.tracker.calls.length = 0;
    rig.tracker.mode = 'up';
  });

  it('call track/entry with the browser ids, the named entry and the client headers, and redirect to the deep link', async () => {
    const res = await send(`${rig.proxy.url}/capigram/entry?entry=e_1`, {
      headers: { ...BROWSER, 'x-forwarded-for': '203.0.113.60', referer: 'http://shop.example.com/landing' },
    });
    expect(res.status).toBe(302);
    expect(res.headers.location).toMatch(/^https:\/\/t\.me\/stand_in_bot\?start=StandIn\d+$/);
    expect(rig.upstream.requests.filter((r) => r.url.startsWith('/capigram/entry'))).toEqual([]);
    const [call, ...more] = rig.tracker.calls;
    expect(more).toEqual([]);
    expect(call?.path).toBe('/backend/track/entry');
    expect(Object.fromEntries(call!.query)).toEqual({
      website: WEBSITE_ID,
      tid: TID,
      sid: SID,
      entry: 'e_1',
    });
    expect(call?.headers['x-capigram-client-ip']).toBe('203.0.113.60');
    expect(call?.headers['x-capigram-client-user-agent']).toBe('EntryTester/1.0');
    expect(call?.headers.referer).toBe('http://shop.example.com/landing');
  });

  it('without ?entry= asks for the site’s default entry', async () => {
    await send(`${rig.proxy.url}/capigram/entry`, { headers: BROWSER });
    expect(rig.tracker.calls[0]?.query.has('entry')).toBe(false);
  });

  it('record a visit first when the browser has no session yet', async () => {
    const res = await send(`${rig.proxy.url}/capigram/entry`, { headers: { 'user-agent': 'Fresh/1.0' } });
    expect(res.status).toBe(302);
    const tid = cookieNamed(res.setCookies, 'capigram_tid')?.value;
    expect(rig.tracker.calls.map((c) => c.path)).toEqual(['/backend/track/init', '/backend/track/entry']);
    expect(rig.tracker.calls[1]?.query.get('tid')).toBe(tid);
  });

  it('send the visitor to the fallback when Capigram does not answer in time', async () => {
    rig.tracker.mode = 'stalled';
    const res = await send(`${rig.proxy.url}/capigram/entry`, { headers: BROWSER });
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('https://t.me/fallback_bot');
  });
});
