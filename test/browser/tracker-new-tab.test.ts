// tracker.js join links that open a new tab (target="_blank", as the demo's landing page has
// them) in a real Chromium: the new tab ends on the invite link, or on the link's own href when
// Capigram is down, answers 502, stalls or refuses the channel, never on an error page or blank.
// And the page's `load` event while the tracker's host stalls: never held by the tracker.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addChannel } from '../../backend/domain/admin/channels.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { CHATS, startWorld, type World } from '../tracker/world.js';

const OWN = 'https://t.me/not_tracked';

let w: World;
let browser: Browser;
let pages: Server;
/** The tracker's host when it stalls: connections are accepted and never answered. */
let stalled: TcpServer;
const stalledSockets = new Set<Socket>();
let stalledUrl: string;
let pageOrigin: string;
let websiteId: string;

const joinLinks = `<a id="join" href="${OWN}" target="_blank" data-capigram-join><span>Join</span></a>
<a id="wrong" href="${OWN}" target="_blank" data-capigram-join data-channel="CHANNEL_ID">Join VIP</a>`;

/** The loader of docs/tracker-script.md ("Copy, paste"), read from the page itself. */
function loaderSnippet(trackerUrl: string): string {
  const md = readDocs();
  const block = /```html\n(<script>\n[\s\S]*?<\/script>)\n/.exec(md);
  if (!block) throw new Error('docs/tracker-script.md has no loader <script> block');
  return block[1]!
    .replaceAll('https://capigram.example.net', trackerUrl)
    .replaceAll('ws_XXXXXXXXXXXXXXXX', websiteId);
}

function readDocs(): string {
  return readFileSync(new URL('../../docs/tracker-script.md', import.meta.url), 'utf8');
}

function pageHtml(path: string): string {
  const head = '<!doctype html><html><head><meta charset="utf-8"><title>Landing</title></head><body>';
  // A picture served at once, so that `load` has something to wait for besides the tracker.
  const img = '<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" alt="">';
  if (path.startsWith('/loader-stalled'))
    return `${head}${joinLinks}${img}${loaderSnippet(stalledUrl)}</body></html>`;
  if (path.startsWith('/loader')) return `${head}${joinLinks}${img}${loaderSnippet(w.app.url)}</body></html>`;
  return `${head}${joinLinks}${img}<script async src="${w.app.url}/backend/tracker.js" data-website-id="${websiteId}"></script></body></html>`;
}

beforeAll(async () => {
  w = await startWorld();
  let siteId: string;
  ({ siteId, websiteId } = await createSite(w.db.pool, {
    accountId: w.accountId,
    name: 'Local',
    domains: ['localhost'],
  }));
  const { channelId } = await addChannel(w.app.deps, {
    siteId,
    botId: w.botId,
    telegramChannelId: String(CHATS.spare.id),
    title: 'Spare',
    isDefault: true,
  });
  await w.db.pool.query('UPDATE channels SET pool_target = 3 WHERE id = $1', [channelId]);
  await refillChannelPool(w.app.deps, channelId);
  pages = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(pageHtml(req.url ?? '/'));
  });
  await new Promise<void>((ok) => pages.listen(0, '127.0.0.1', ok));
  pageOrigin = `http://localhost:${(pages.address() as AddressInfo).port}`;
  stalled = createTcpServer((socket) => {
    stalledSockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => stalledSockets.delete(socket));
  });
  await new Promise<void>((ok) => stalled.listen(0, '127.0.0.1', ok));
  stalledUrl = `http://127.0.0.1:${(stalled.address() as AddressInfo).port}`;
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  for (const socket of stalledSockets) socket.destroy();
  await new Promise<void>((ok) => (stalled ? stalled.close(() => ok()) : ok()));
  await new Promise<void>((ok) => (pages ? pages.close(() => ok()) : ok()));
  await w?.close();
});

/** A fresh visitor; Telegram's pages (in any tab of theirs) are a stand-in, nothing leaves the machine. */
async function visitor(): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext();
  await context.route('https://t.me/**', (route) =>
    route.fulfill({ status: 200, contentType: 'text/html', body: '<title>Telegram</title><p>Telegram</p>' }),
  );
  return { context, page: await context.newPage() };
}

/** Clicks a link and answers the tab it opened once that tab has gone somewhere other than blank. */
async function clickIntoNewTab(page: Page, selector: string): Promise<Page> {
  const [tab] = await Promise.all([page.waitForEvent('popup'), page.click(selector)]);
  await tab.waitForURL((url) => url.protocol !== 'about:', { timeout: 10_000 });
  return tab;
}

describe('a join link with target="_blank"', () => {
  it("opens the visit's own invite link in the new tab, the page staying where it was", async () => {
    const { context, page } = await visitor();
    await page.goto(`${pageOrigin}/landing`);
    await page.waitForFunction(
      () => (window as unknown as { capigram?: { visitId: string | null } }).capigram?.visitId,
    );
    const tab = await clickIntoNewTab(page, '#join span');
    expect(tab.url()).toMatch(/^https:\/\/t\.me\/\+/);
    expect(await tab.evaluate(() => window.opener)).toBeNull();
    expect(page.url()).toBe(`${pageOrigin}/landing`);
    const { rows } = await w.db.pool.query('SELECT 1 FROM invitations WHERE invite_link = $1', [tab.url()]);
    expect(rows).toHaveLength(1);
    await context.close();
  });

  const failures: [string, (page: Page) => Promise<unknown>][] = [
    [
      'the backend is down',
      (page) => page.route('**/backend/track/invite**', (r) => r.abort('connectionrefused')),
    ],
    [
      'a proxy in front answers 502',
      (page) =>
        page.route('**/backend/track/invite**', (r) =>
          r.fulfill({ status: 502, contentType: 'text/html', body: '<h1>502 Bad Gateway</h1>' }),
        ),
    ],
  ];
  it.each(failures)("opens the link's own href in the new tab when %s", async (_, fail) => {
    const { context, page } = await visitor();
    await page.goto(`${pageOrigin}/landing`);
    await fail(page);
    const tab = await clickIntoNewTab(page, '#join span');
    expect(tab.url()).toBe(OWN);
    expect(await tab.title()).toBe('Telegram');
    await context.close();
  });

  it("opens the link's own href in the new tab when Capigram stalls, within the script's 4 s", async () => {
    const { context, page } = await visitor();
    await page.goto(`${pageOrigin}/landing`);
    await page.route('**/backend/track/invite**', () => undefined); // never answered
    const t0 = Date.now();
    const [tab] = await Promise.all([page.waitForEvent('popup'), page.click('#join span')]);
    // Meanwhile the tab says what it waits for instead of staying blank.
    await expect
      .poll(() => tab.evaluate(() => document.body?.textContent ?? ''))
      .toContain('Opening Telegram');
    await tab.waitForURL(OWN, { timeout: 10_000 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(3_500);
    expect(Date.now() - t0).toBeLessThan(8_000);
    await context.close();
  });

  it("opens the link's own href when its data-channel is not one of the site's (a real 404)", async () => {
    const { context, page } = await visitor();
    await page.goto(`${pageOrigin}/landing`);
    const [response, tab] = await Promise.all([
      page.waitForResponse((r) => r.url().includes('/backend/track/invite')),
      clickIntoNewTab(page, '#wrong'),
    ]);
    expect(response.status()).toBe(404);
    expect(tab.url()).toBe(OWN);
    await context.close();
  });
});

/** When the page's `load` fired (ms after navigation start), or null when it had not within `capMs`. */
async function loadAfter(page: Page, path: string, capMs: number): Promise<number | null> {
  await page.goto(`${pageOrigin}${path}`, { waitUntil: 'commit' });
  return page.evaluate(
    (cap) =>
      new Promise<number | null>((done) => {
        const fired = () =>
          done((performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming).loadEventStart);
        if (document.readyState === 'complete') fired();
        else addEventListener('load', () => setTimeout(fired));
        setTimeout(() => done(null), cap);
      }),
    capMs,
  );
}

describe("the page's load event", () => {
  it('is not held by a track/init that never answers', async () => {
    const { context, page } = await visitor();
    await page.route('**/backend/track/init', () => undefined); // never answered
    const loaded = await loadAfter(page, '/landing-init-stalled', 3_000);
    expect(loaded).not.toBeNull();
    expect(loaded!).toBeLessThan(1_500);
    await context.close();
  });

  it("is not held by the documented loader while the tracker's host stalls, and join links keep their href", async () => {
    const { context, page } = await visitor();
    const loaded = await loadAfter(page, '/loader-stalled', 3_000);
    expect(loaded).not.toBeNull();
    expect(loaded!).toBeLessThan(1_500);
    // The script never ran: the link is the page's own, and opens as the page wrote it.
    const [tab] = await Promise.all([page.waitForEvent('popup'), page.click('#join span')]);
    await tab.waitForURL(OWN);
    await context.close();
  });

  it('the documented loader still tracks a page whose tracker answers', async () => {
    const { context, page } = await visitor();
    await page.goto(`${pageOrigin}/loader`);
    await page.waitForFunction(
      () => (window as unknown as { capigram?: { visitId: string | null } }).capigram?.visitId,
    );
    const tab = await clickIntoNewTab(page, '#join span');
    expect(tab.url()).toMatch(/^https:\/\/t\.me\/\+/);
    await context.close();
  });
});
