// tracker.js entry links in a real Chromium: <a data-entry="ENTRY_ID"> goes through track/entry
// to the bot's deep link with a payload of this click's visit; an empty data-entry takes the
// site's default entry; the link's own href when Capigram cannot answer.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addEntry } from '../../backend/domain/admin/entries.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { startWorld, type World } from '../tracker/world.js';

let w: World;
let browser: Browser;
let pages: Server;
let pageOrigin: string;
let siteId: string;
let websiteId: string;
let appEntry: string;

function pageHtml(): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>Landing</title></head><body>
<a id="bot" href="https://t.me/own_href_bot" data-entry=""><span>Open the bot</span></a>
<a id="app" href="https://t.me/own_href_bot/app" data-entry="${appEntry}"><span>Open the app</span></a>
<script async src="${w.app.url}/backend/tracker.js" data-website-id="${websiteId}"></script>
</body></html>`;
}

beforeAll(async () => {
  w = await startWorld();
  ({ siteId, websiteId } = await createSite(w.db.pool, {
    accountId: w.accountId,
    name: 'Local',
    domains: ['localhost'],
  }));
  await addEntry(w.db.pool, { siteId, botId: w.botId });
  appEntry = (await addEntry(w.db.pool, { siteId, botId: w.botId, kind: 'app', app: 'shopapp' })).entryId;
  pages = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(pageHtml());
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

async function landedPage(): Promise<{ page: Page; visitId: string }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.route('https://t.me/**', (route) =>
    route.fulfill({ status: 200, contentType: 'text/html', body: '<p>Telegram</p>' }),
  );
  const known = (await w.db.pool.query('SELECT id FROM visits WHERE site_id = $1', [siteId])).rowCount ?? 0;
  await page.goto(`${pageOrigin}/landing?fbclid=IwAR_entry`);
  await expect
    .poll(
      async () => (await w.db.pool.query('SELECT id FROM visits WHERE site_id = $1', [siteId])).rowCount,
      { timeout: 10_000 },
    )
    .toBe(known + 1);
  const { rows } = await w.db.pool.query<{ id: string }>(
    'SELECT id FROM visits WHERE site_id = $1 ORDER BY created_at DESC LIMIT 1',
    [siteId],
  );
  return { page, visitId: rows[0]!.id };
}

describe('tracker.js entry links in Chromium', () => {
  it('an empty data-entry goes to the bot with a payload of this visit (the site’s default entry)', async () => {
    const { page, visitId } = await landedPage();
    await page.click('#bot span');
    await page.waitForURL(/^https:\/\/t\.me\/capigram_test_bot\?start=[A-Za-z0-9_-]+$/);
    const payload = new URL(page.url()).searchParams.get('start');
    const { rows } = await w.db.pool.query('SELECT visit_id FROM entry_clicks WHERE payload = $1', [payload]);
    expect(rows).toEqual([{ visit_id: visitId }]);
    await page.context().close();
  });

  it('data-entry="ID" goes to that entry: the Mini App', async () => {
    const { page } = await landedPage();
    await page.click('#app span');
    await page.waitForURL(/^https:\/\/t\.me\/capigram_test_bot\/shopapp\?startapp=[A-Za-z0-9_-]+$/);
    await page.context().close();
  });

  it('goes to the link’s own href when Capigram is unreachable', async () => {
    const { page } = await landedPage();
    await page.route('**/backend/track/entry**', (route) => route.abort('connectionrefused'));
    await page.click('#bot span');
    await page.waitForURL('https://t.me/own_href_bot');
    await page.context().close();
  });
});
