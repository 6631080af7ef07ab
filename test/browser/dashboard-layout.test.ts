// Every dashboard page in real Chromium at a laptop's width (1280) and a phone's (390): no word of
// a header, a heading or a button is broken across lines ("Ret ry"), measured from the layout
// (the line boxes of each word's text), not by eye, and no page is wider than the screen. With CAPIGRAM_SCREENSHOTS=docs the pages that
// reports.test.ts does not picture are written to docs/images/dashboard-<page>-<width>.png.
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { TEST_ADMIN_TOKEN, startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { insertVisit, newUser, seedTenant, waitingJoin, warmLead, type Tenant } from '../api/support.js';

let db: TestDatabase;
let t: TestApp;
let tenant: Tenant;
let browser: Browser;
let lead: number;

const WIDTHS = { laptop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } };

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
  tenant = await seedTenant(db.pool, t.deps.box, { platforms: ['meta', 'tiktok'] });
  await waitingJoin(db.pool, tenant.site, newUser());
  lead = await warmLead(db.pool, tenant);
  // The live events page with a long answer without spaces, as a platform's JSON is.
  await db.pool.query(
    `INSERT INTO sends (visit_id, pixel_id, platform, event_id, status, attempts, response_summary, sent_at, created_at, updated_at)
     SELECT $2::uuid, p.id, p.platform, 'pv-' || p.platform, 'sent', 1,
            jsonb_build_object('events_received', 1, 'fbtrace_id', repeat('AbCdEfGh', 12)), now(), now(), now()
     FROM pixels p WHERE p.site_id = $1`,
    [tenant.site.siteId, await insertVisit(db.pool, tenant.site.siteId)],
  );
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking'],
  });
});
afterAll(async () => {
  await browser?.close();
  await t.stop();
  await db.drop();
});

/** Each word of every th, button and h1–h3 whose text lies on more than one line. */
function brokenWords(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const broken: string[] = [];
    for (const el of Array.from(document.querySelectorAll('th, button, h1, h2, h3'))) {
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const text = node.textContent ?? '';
        // A hyphen is a break opportunity of its own (a domain may wrap after one): words end there.
        for (const m of text.matchAll(/[^\s-]+-?/g)) {
          const range = document.createRange();
          range.setStart(node, m.index);
          range.setEnd(node, m.index + m[0].length);
          const lines = new Set(
            Array.from(range.getClientRects())
              .filter((r) => r.width > 0)
              .map((r) => Math.round(r.bottom)),
          );
          if (lines.size > 1) broken.push(`${el.tagName.toLowerCase()}: ${m[0]}`);
        }
      }
    }
    return broken;
  });
}

it('breaks no word of a header, heading or button and is no wider than the screen on any page, at laptop and phone widths', async () => {
  const site = tenant.site.siteId;
  const pages: Record<string, string> = {
    login: '/dashboard/login',
    overview: '/dashboard',
    site: `/dashboard/sites/${site}`,
    reports: `/dashboard/sites/${site}/reports`,
    events: `/dashboard/sites/${site}/events`,
    lead: `/dashboard/leads?user=${lead}`,
    'not-found': '/dashboard/sites/no-such-site',
  };
  const found: Record<string, string[]> = {};
  for (const [widthName, viewport] of Object.entries(WIDTHS)) {
    const context = await browser.newContext({
      viewport,
      extraHTTPHeaders: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    });
    const page = await context.newPage();
    for (const [name, path] of Object.entries(pages)) {
      await page.goto(`${t.url}${path}`);
      const broken = await brokenWords(page);
      if (broken.length > 0) found[`${name} @ ${widthName}`] = broken;
      const wider = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      if (wider > 0) found[`${name} @ ${widthName}`] = [...broken, `${wider} px wider than the screen`];
      if (process.env.CAPIGRAM_SCREENSHOTS === 'docs' && name !== 'site' && name !== 'reports')
        await page.screenshot({ path: `docs/images/dashboard-${name}-${widthName}.png`, fullPage: true });
    }
    await context.close();
  }
  expect(found).toEqual({});
}, 60_000);
