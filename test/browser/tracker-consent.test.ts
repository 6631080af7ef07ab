// tracker.js with data-consent="required" in real Chromium (docs/consent.md): before
// capigram('consent', 'granted') it sets no cookie and sends no request carrying an identifier, a
// join link goes to its own href, and a denial only counts the visit; after the grant the visit is
// recorded as usual and join clicks are routed. The page is on http://localhost:<port>, the app on
// 127.0.0.1: real cross-origin requests, as a visitor's browser makes them.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page, type Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addChannel } from '../../backend/domain/admin/channels.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { CHATS, startWorld, type World } from '../tracker/world.js';

const FBP = 'fb.1.1763776500000.1116446470';
const AD_QUERY = '?fbclid=IwAR_consent-1&gclid=G-consent&utm_source=fb&utm_campaign=spring';

let w: World;
let browser: Browser;
let pages: Server;
let pageOrigin: string;
let websiteId: string;
let siteId: string;

/** The page: Meta's _fbp already set, a join link, the script with data-consent="required". */
function pageHtml(path: string): string {
  // `/queued`: the page says "granted" before the script has loaded, through the queueing stub.
  const stub = path.startsWith('/queued')
    ? `<script>window.capigram=window.capigram||function(){(window.capigram.q=window.capigram.q||[]).push(arguments)};capigram('consent','granted');</script>`
    : '';
  return `<!doctype html><html><head><title>Consent</title>
<script>document.cookie = '_fbp=${FBP}; Path=/'; document.cookie = '_ttp=ttp-consent; Path=/';</script>${stub}
</head><body>
<a id="join" href="https://t.me/not_tracked" data-capigram-join><span>Join the channel</span></a>
<script async src="${w.app.url}/backend/tracker.js" data-website-id="${websiteId}" data-consent="required"></script>
</body></html>`;
}

beforeAll(async () => {
  w = await startWorld();
  ({ siteId, websiteId } = await createSite(w.db.pool, {
    accountId: w.accountId,
    name: 'Consent',
    domains: ['localhost'],
    consentMode: 'required',
  }));
  const { channelId } = await addChannel(w.app.deps, {
    siteId,
    botId: w.botId,
    telegramChannelId: String(CHATS.spare.id),
    title: 'Spare',
    isDefault: true,
  });
  await w.db.pool.query('UPDATE channels SET pool_target = 4 WHERE id = $1', [channelId]);
  await refillChannelPool(w.app.deps, channelId);
  await addPixel(w.app.deps, {
    platform: 'meta',
    siteId,
    pixelId: '1234567890',
    accessToken: 'meta-test-token',
  });
  pages = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(pageHtml(req.url ?? '/'));
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

interface Watched {
  page: Page;
  /** Every request the page made to Capigram, except for the script itself. */
  calls: Request[];
}

async function openPage(path: string): Promise<Watched> {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.route('https://t.me/**', (route) =>
    route.fulfill({ status: 200, contentType: 'text/html', body: '<p>Telegram</p>' }),
  );
  const calls: Request[] = [];
  page.on('request', (r) => {
    if (r.url().startsWith(w.app.url) && !r.url().includes('/backend/tracker.js')) calls.push(r);
  });
  await page.goto(`${pageOrigin}${path}`);
  await page.waitForFunction(
    () => typeof (window as unknown as { capigram?: unknown }).capigram === 'function',
  );
  return { page, calls };
}

async function capigramCookies(page: Page): Promise<string[]> {
  return (await page.context().cookies(pageOrigin))
    .map((c) => c.name)
    .filter((n) => n.startsWith('capigram_') || n === '_fbc');
}

async function visitsOfSite() {
  const { rows } = await w.db.pool.query<Record<string, unknown> & { id: string; consented: boolean }>(
    'SELECT * FROM visits WHERE site_id = $1 ORDER BY created_at',
    [siteId],
  );
  return rows;
}

const settle = (page: Page) => page.waitForTimeout(1_500);

describe('tracker.js with data-consent="required"', () => {
  it('before any answer: no cookie, no request, and a join link goes to its own href', async () => {
    const { page, calls } = await openPage(`/waiting${AD_QUERY}`);
    await settle(page);
    expect(await capigramCookies(page)).toEqual([]);
    expect(calls.map((r) => r.url())).toEqual([]);
    await page.click('#join span');
    await page.waitForURL('https://t.me/not_tracked');
    expect(calls.map((r) => r.url())).toEqual([]);
    await page.context().close();
  });

  it('denied: counts the visit with nothing identifying, sets no cookie; a later grant tracks it', async () => {
    const known = (await visitsOfSite()).length;
    const { page, calls } = await openPage(`/denied${AD_QUERY}`);
    await settle(page);
    expect(calls).toHaveLength(0);

    await page.evaluate(() =>
      (window as unknown as { capigram(c: string, v: string): void }).capigram('consent', 'denied'),
    );
    await expect.poll(async () => (await visitsOfSite()).length, { timeout: 10_000 }).toBe(known + 1);
    await settle(page);
    expect(await capigramCookies(page)).toEqual([]);
    expect(calls).toHaveLength(1);
    const counted = JSON.parse(calls[0]!.postData() ?? '{}') as Record<string, string>;
    expect(Object.keys(counted).sort()).toEqual(
      ['consent', 'href', 'landingPage', 'sessionId', 'tempId', 'visitRequestId', 'websiteId'].sort(),
    );
    expect(counted).toMatchObject({
      consent: 'denied',
      href: `${pageOrigin}/denied`,
      landingPage: '/denied',
    });
    const denied = (await visitsOfSite()).at(-1)!;
    expect(denied).toMatchObject({
      consented: false,
      client_ip: null,
      user_agent: null,
      fbc: null,
      fbp: null,
      gclid: null,
      ttp: null,
      utm_source: null,
      href: `${pageOrigin}/denied`,
    });
    expect(await w.count('sends WHERE visit_id = $1', [denied.id])).toBe(0);

    await page.evaluate(() =>
      (window as unknown as { capigram(c: string, v: string): void }).capigram('consent', 'granted'),
    );
    await expect.poll(async () => (await visitsOfSite()).length, { timeout: 10_000 }).toBe(known + 2);
    const cookies = Object.fromEntries(
      (await page.context().cookies(pageOrigin)).map((c) => [c.name, c.value]),
    );
    const granted = (await visitsOfSite()).at(-1)!;
    expect(granted).toMatchObject({
      consented: true,
      temp_id: cookies.capigram_tid,
      session_id: cookies.capigram_sid,
      fbc: cookies._fbc,
      fbp: FBP,
      gclid: 'G-consent',
      ttp: 'ttp-consent',
      utm_campaign: 'spring',
      client_ip: '127.0.0.1',
    });
    expect(await w.count('sends WHERE visit_id = $1', [granted.id])).toBe(1);

    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().includes('/backend/track/invite')),
      page.click('#join span'),
    ]);
    expect(response.url()).toContain('consent=granted');
    await page.waitForURL(/^https:\/\/t\.me\/\+/);
    const { rows } = await w.db.pool.query('SELECT visit_id FROM invitations WHERE invite_link = $1', [
      page.url(),
    ]);
    expect(rows).toEqual([{ visit_id: granted.id }]);
    await page.context().close();
  });

  it('granted before the script loaded (the queueing snippet): tracked at once', async () => {
    const known = (await visitsOfSite()).length;
    const { page, calls } = await openPage(`/queued${AD_QUERY}`);
    await expect.poll(async () => (await visitsOfSite()).length, { timeout: 10_000 }).toBe(known + 1);
    expect((await visitsOfSite()).at(-1)).toMatchObject({ consented: true, gclid: 'G-consent' });
    expect(JSON.parse(calls[0]!.postData() ?? '{}')).toMatchObject({ consent: 'granted' });
    expect(await capigramCookies(page)).toEqual(
      expect.arrayContaining(['capigram_tid', 'capigram_sid', '_fbc']),
    );

    // Withdrawn: Capigram's ids leave the browser and join links are left alone again.
    await page.evaluate(() =>
      (window as unknown as { capigram(c: string, v: string): void }).capigram('consent', 'denied'),
    );
    expect((await capigramCookies(page)).filter((n) => n.startsWith('capigram_'))).toEqual([]);
    const before = calls.length;
    await page.click('#join span');
    await page.waitForURL('https://t.me/not_tracked');
    expect(calls.slice(before).filter((r) => r.url().includes('/track/invite'))).toEqual([]);
    await page.context().close();
  });
});
