// tracker.js in real Chromium: a page on http://localhost:<port> (a site whose domain is
// `localhost`) loads the script from the app on 127.0.0.1, so every call is a real cross-origin
// browser request with CORS, cookies and navigation as a visitor's browser makes them.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addChannel } from '../../backend/domain/admin/channels.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { CHATS, startWorld, type World } from '../tracker/world.js';

const FBP = 'fb.1.1763776500000.1116446470';

let w: World;
let browser: Browser;
let pages: Server;
let pageOrigin: string;
let websiteId: string;
let siteId: string;
let channelId: string;

function pageHtml(): string {
  return `<!doctype html><html><head><title>Landing</title></head><body>
<a id="join" href="https://t.me/not_tracked" data-capigram-join><span>Join the channel</span></a>
<script async src="${w.app.url}/backend/tracker.js" data-website-id="${websiteId}"></script>
<script>setTimeout(function () { document.cookie = '_fbp=${FBP}; Path=/'; }, 1200);</script>
</body></html>`;
}

/** A page with a Meta pixel stub (recording its calls), TikTok's and Snapchat's cookies, and the fbq option. */
function pixelPageHtml(): string {
  return `<!doctype html><html><head><title>Pixel</title>
<script>
  document.cookie = '_ttp=2Qx_browser-ttp; Path=/';
  document.cookie = '_scid=browser-scid-01; Path=/';
  window.fbqCalls = [];
  window.fbq = function () { window.fbqCalls.push(Array.prototype.slice.call(arguments)); };
</script></head><body>
<script async src="${w.app.url}/backend/tracker.js" data-website-id="${websiteId}" data-fbq-pageview></script>
</body></html>`;
}

beforeAll(async () => {
  w = await startWorld();
  ({ siteId, websiteId } = await createSite(w.db.pool, {
    accountId: w.accountId,
    name: 'Local',
    domains: ['localhost'],
  }));
  ({ channelId } = await addChannel(w.app.deps, {
    siteId,
    botId: w.botId,
    telegramChannelId: String(CHATS.spare.id),
    title: 'Spare',
    isDefault: true,
  }));
  await w.db.pool.query('UPDATE channels SET pool_target = 3 WHERE id = $1', [channelId]);
  await refillChannelPool(w.app.deps, channelId);
  await addPixel(w.app.deps, {
    platform: 'meta',
    siteId,
    pixelId: '1234567890',
    accessToken: 'meta-test-token',
  });
  pages = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(req.url?.startsWith('/pixel') ? pixelPageHtml() : pageHtml());
  });
  await new Promise<void>((ok) => pages.listen(0, '127.0.0.1', ok));
  pageOrigin = `http://localhost:${(pages.address() as AddressInfo).port}`;
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await new Promise<void>((ok) => (pages ? pages.close(() => ok()) : ok()));
  await w?.close();
});

interface VisitRow {
  id: string;
  temp_id: string;
  session_id: string;
  visit_request_id: string | null;
  href: string;
  landing_page: string;
  fbc: string | null;
  fbp: string | null;
  utm_source: string | null;
  user_agent: string | null;
  client_ip: string | null;
}

async function visitsOfSite(): Promise<VisitRow[]> {
  const { rows } = await w.db.pool.query<VisitRow>(
    'SELECT * FROM visits WHERE site_id = $1 ORDER BY created_at',
    [siteId],
  );
  return rows;
}

async function newPage(): Promise<Page> {
  const context = await browser.newContext();
  const page = await context.newPage();
  // Nothing leaves the machine: Telegram's link opens a stand-in page.
  await page.route('https://t.me/**', (route) =>
    route.fulfill({ status: 200, contentType: 'text/html', body: '<p>Telegram</p>' }),
  );
  return page;
}

describe('tracker.js in Chromium', () => {
  it('sets the cookies, records the visit, patches a late _fbp and routes the join click', async () => {
    const page = await newPage();
    const before = Date.now();
    await page.goto(`${pageOrigin}/landing?fbclid=IwAR_browser-1&utm_source=fb&gbraid=0AAA-browser_1`);

    await expect.poll(async () => (await visitsOfSite()).length, { timeout: 10_000 }).toBe(1);
    const cookies = Object.fromEntries((await page.context().cookies(pageOrigin)).map((c) => [c.name, c]));
    const tid = cookies.capigram_tid!;
    const sid = cookies.capigram_sid!;
    expect(tid.value).toMatch(/^[0-9a-f-]{36}$/);
    expect(tid.expires * 1000 - before).toBeGreaterThan(364 * 86_400_000);
    expect(sid.expires * 1000 - before).toBeGreaterThan(29 * 60_000);
    expect(sid.expires * 1000 - before).toBeLessThan(31 * 60_000);
    expect(tid).toMatchObject({ path: '/', sameSite: 'Lax', secure: false, httpOnly: false });
    expect(cookies._fbc?.value).toMatch(/^fb\.1\.\d{13}\.IwAR_browser-1$/);

    const [visit] = await visitsOfSite();
    expect(visit).toMatchObject({
      temp_id: tid.value,
      session_id: sid.value,
      href: `${pageOrigin}/landing?fbclid=IwAR_browser-1&utm_source=fb&gbraid=0AAA-browser_1`,
      landing_page: '/landing?fbclid=IwAR_browser-1&utm_source=fb&gbraid=0AAA-browser_1',
      fbc: cookies._fbc!.value,
      utm_source: 'fb',
      gbraid: '0AAA-browser_1',
      client_ip: '127.0.0.1',
    });
    expect(visit!.visit_request_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(visit!.user_agent).toMatch(/Chrome/);
    expect(visit!.fbp).toBeNull();

    // The page's stand-in for Meta's pixel writes _fbp 1.2 s after load.
    await expect.poll(async () => (await visitsOfSite())[0]!.fbp, { timeout: 10_000 }).toBe(FBP);

    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().includes('/backend/track/invite')),
      page.click('#join span'),
    ]);
    // A plain click asks for the link as JSON, then goes there.
    expect(response.status()).toBe(200);
    expect(response.headers()['content-type']).toContain('application/json');
    await page.waitForURL(/^https:\/\/t\.me\/\+/);
    const { rows } = await w.db.pool.query('SELECT visit_id FROM invitations WHERE invite_link = $1', [
      page.url(),
    ]);
    expect(rows).toEqual([{ visit_id: visit!.id }]);
    await page.context().close();
  });

  it('retries a failed init with the same visitRequestId, recording one visit', async () => {
    const page = await newPage();
    const bodies: { visitRequestId: string }[] = [];
    let failures = 1;
    await page.route('**/backend/track/init', async (route) => {
      bodies.push(JSON.parse(route.request().postData() ?? '{}') as { visitRequestId: string });
      if (failures-- > 0) await route.abort('connectionreset');
      else await route.continue();
    });
    const known = (await visitsOfSite()).length;
    await page.goto(`${pageOrigin}/second`);
    await expect.poll(async () => (await visitsOfSite()).length, { timeout: 10_000 }).toBe(known + 1);
    expect(bodies).toHaveLength(2);
    expect(bodies[1]!.visitRequestId).toBe(bodies[0]!.visitRequestId);
    const latest = (await visitsOfSite()).at(-1)!;
    expect(latest.visit_request_id).toBe(bodies[0]!.visitRequestId);
    await page.context().close();
  });

  describe('a join click when Capigram cannot hand out a link', () => {
    it("goes to the link's own href when Capigram is unreachable", async () => {
      const page = await newPage();
      await page.goto(`${pageOrigin}/down`);
      await page.route('**/backend/track/invite**', (route) => route.abort('connectionrefused'));
      await page.click('#join span');
      await page.waitForURL('https://t.me/not_tracked');
      await page.context().close();
    });

    it.each([400, 403, 404, 429, 500, 503])(
      "goes to the link's own href when Capigram answers %i",
      async (status) => {
        const page = await newPage();
        await page.goto(`${pageOrigin}/refused-${status}`);
        await page.route('**/backend/track/invite**', (route) =>
          route.fulfill({
            status,
            contentType: 'application/problem+json',
            headers: { 'access-control-allow-origin': pageOrigin },
            body: '{"code":"X"}',
          }),
        );
        await page.click('#join span');
        await page.waitForURL('https://t.me/not_tracked');
        await page.context().close();
      },
    );

    it("goes to the link's own href when Capigram does not answer in time", async () => {
      const page = await newPage();
      await page.goto(`${pageOrigin}/slow`);
      await page.route('**/backend/track/invite**', () => undefined); // never answered
      const t0 = Date.now();
      await page.click('#join span');
      await page.waitForURL('https://t.me/not_tracked', { timeout: 10_000 });
      expect(Date.now() - t0).toBeGreaterThanOrEqual(3_500);
      await page.context().close();
    });

    it("a real refusal (a channel that is not the site's: the docs' own placeholder) sends the visitor to the own href too", async () => {
      const page = await newPage();
      await page.goto(`${pageOrigin}/landing`);
      await page.evaluate(() => document.getElementById('join')!.setAttribute('data-channel', 'CHANNEL_ID'));
      const [response] = await Promise.all([
        page.waitForResponse((r) => r.url().includes('/backend/track/invite')),
        page.click('#join span'),
      ]);
      expect(response.status()).toBe(404);
      await page.waitForURL('https://t.me/not_tracked');
      await page.context().close();
    });
  });
});

// Last: it adds a visit of its own, which the tests above count.
describe('tracker.js with a Meta pixel on the page', () => {
  it("reads _ttp and _scid, and fires the page's fbq PageView with the server PageView's event id", async () => {
    const page = await newPage();
    await page.goto(`${pageOrigin}/pixel`);
    await page.waitForFunction(
      () => (window as unknown as { fbqCalls: unknown[] }).fbqCalls.length > 0,
      undefined,
      { timeout: 10_000 },
    );
    const calls = await page.evaluate(() => (window as unknown as { fbqCalls: unknown[] }).fbqCalls);
    // `window.capigram` is the page's command function (docs/consent.md), carrying the visit.
    const exposed = await page.evaluate(() => {
      const { visitId, pageViewEventId } = (
        window as unknown as { capigram: { visitId: string; pageViewEventId: string } }
      ).capigram;
      return { visitId, pageViewEventId };
    });
    const { rows } = await w.db.pool.query<{ id: string; ttp: string | null; scid: string | null }>(
      "SELECT id, ttp, scid FROM visits WHERE site_id = $1 AND landing_page = '/pixel'",
      [siteId],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ ttp: '2Qx_browser-ttp', scid: 'browser-scid-01' });
    const { rows: sends } = await w.db.pool.query<{ event_id: string }>(
      "SELECT event_id FROM sends WHERE visit_id = $1 AND platform = 'meta'",
      [rows[0]!.id],
    );
    expect(exposed).toEqual({ visitId: rows[0]!.id, pageViewEventId: sends[0]!.event_id });
    expect(calls).toEqual([['track', 'PageView', {}, { eventID: sends[0]!.event_id }]]);
    await page.context().close();
  });
});
