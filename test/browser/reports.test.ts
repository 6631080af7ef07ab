// Every dashboard page in real Chromium at a laptop's 1366×768 and a phone's 390×844: no table
// wider than the viewport, nothing blocked by the Content-Security-Policy, and on the Reports page
// the two charts drawn by the Chart.js that Capigram serves itself. With CAPIGRAM_SCREENSHOTS=docs
// the screenshots of docs/dashboard.md are rewritten; a plain run writes them to a scratch folder.
import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_ADMIN_TOKEN, startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { scratchDir } from '../harness/scratch.js';
import { newUser, seedTenant, type Tenant } from '../api/support.js';

const IMAGES = process.env.CAPIGRAM_SCREENSHOTS === 'docs' ? 'docs/images' : scratchDir('report-screenshots');
const SIZES = [
  { name: 'laptop', width: 1366, height: 768 },
  { name: 'phone', width: 390, height: 844 },
] as const;

let db: TestDatabase;
let t: TestApp;
let tenant: Tenant;
let browser: Browser;
let user: number;

/**
 * A month of a small shop: visits from three campaigns on Meta and TikTok and untagged ones, an
 * invite click for a third of them, a join for half the clicks (a few organic joins besides), a
 * tenth of the joins leaving within days, Purchases in EUR and USD, and their sends, one failing.
 */
async function seedMonth(): Promise<void> {
  const site = tenant.site;
  await db.pool.query(
    `WITH v AS (
       INSERT INTO visits (site_id, temp_id, session_id, utm_source, utm_campaign, fbc, fbp, ttclid, client_ip, user_agent, channel_id, created_at)
       SELECT $1, gen_random_uuid(), gen_random_uuid(),
              (ARRAY['facebook', 'tiktok', 'facebook', NULL])[1 + g % 4], (ARRAY['black-friday', 'retarget', 'autumn-sale', NULL])[1 + g % 4],
              CASE WHEN g % 4 IN (0, 2) THEN 'fb.1.1.' || g END, 'fb.1.1.p' || g, CASE WHEN g % 4 = 1 THEN 'E.C.P.' || g END,
              '203.0.113.' || (g % 200), 'Mozilla/5.0', $2,
              now() - make_interval(days => (g % 30)) - make_interval(mins => g % 600)
       FROM generate_series(1, 30 * (20 + 0)) g RETURNING id, created_at
     ), clicked AS (
       SELECT id, created_at, row_number() OVER () AS n FROM v WHERE random() < 0.35
     ), inv AS (
       INSERT INTO invitations (channel_id, invite_link, visit_id, assigned_at)
       SELECT $2, 'https://t.me/+seed' || id, id, created_at + interval '1 minute' FROM clicked RETURNING visit_id, assigned_at
     )
     INSERT INTO memberships (channel_id, telegram_user_id, kind, visit_id, attributed, occurred_at)
     SELECT $2, 3000000000 + n, 'join', id, true, created_at + interval '3 minutes' FROM clicked WHERE n % 2 = 0`,
    [site.siteId, site.channels.main],
  );
  await db.pool.query(
    `INSERT INTO memberships (channel_id, telegram_user_id, kind, occurred_at)
     SELECT $1, 3100000000 + g, 'join', now() - make_interval(days => g % 30) FROM generate_series(1, 40) g`,
    [site.channels.main],
  );
  await db.pool.query(
    `INSERT INTO memberships (channel_id, telegram_user_id, kind, occurred_at)
     SELECT channel_id, telegram_user_id, 'leave', least(now(), occurred_at + make_interval(days => (telegram_user_id % 9)::int))
     FROM memberships WHERE channel_id = $1 AND kind = 'join' AND telegram_user_id % 10 = 0`,
    [site.channels.main],
  );
  await db.pool.query(
    `WITH c AS (
       INSERT INTO conversions (site_id, channel_id, telegram_user_id, visit_id, event_type, value, currency, event_time, attributed_at, received_at, source, pii_hashed, capi_status)
       SELECT $1, channel_id, telegram_user_id, visit_id, 'Purchase', 10 + (telegram_user_id % 7) * 5, CASE WHEN telegram_user_id % 3 = 0 THEN 'USD' ELSE 'EUR' END,
              occurred_at + interval '1 hour', occurred_at, least(now(), occurred_at + interval '1 hour'), 'api',
              CASE WHEN telegram_user_id % 5 < 2 THEN '{"em":"${'a'.repeat(64)}"}'::jsonb ELSE '{}'::jsonb END, 'sent'
       FROM memberships WHERE channel_id = $2 AND kind = 'join' AND telegram_user_id % 3 <> 1
       RETURNING id, received_at
     )
     INSERT INTO sends (conversion_id, pixel_id, platform, event_id, status, attempts, sent_at, created_at, updated_at, last_error)
     SELECT c.id, p.id, p.platform, 'cnv_' || c.id, CASE WHEN p.platform = 'tiktok' AND random() < 0.1 THEN 'failed' ELSE 'sent' END, 1,
            c.received_at, c.received_at, c.received_at, CASE WHEN p.platform = 'tiktok' THEN 'HTTP 401: access token expired' END
     FROM c CROSS JOIN pixels p WHERE p.site_id = $1`,
    [site.siteId, site.channels.main],
  );
  user = newUser();
  await db.pool.query(
    `INSERT INTO memberships (channel_id, telegram_user_id, kind, visit_id, attributed, occurred_at)
     SELECT $1, $2, 'join', id, true, now() FROM visits WHERE site_id = $3 LIMIT 1`,
    [site.channels.main, user, site.siteId],
  );
}

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
  tenant = await seedTenant(db.pool, t.deps.box, { platforms: ['meta', 'tiktok'] });
  await seedMonth();
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking'],
  });
  mkdirSync(IMAGES, { recursive: true });
});
afterAll(async () => {
  await browser?.close();
  await t.stop();
  await db.drop();
});

async function signedIn(width: number, height: number): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width, height } });
  const page = await context.newPage();
  await page.goto(`${t.url}/dashboard/login`);
  await page.fill('input[name=token]', TEST_ADMIN_TOKEN);
  await page.click('#token-sign-in button');
  await page.waitForURL(`${t.url}/dashboard`);
  await page.close();
  return context;
}

describe.each(SIZES)('the dashboard at $width×$height', ({ name, width, height }) => {
  it('shows every page without a table wider than the screen, and the report charts', async () => {
    const context = await signedIn(width, height);
    const pages = [
      ['sites', '/dashboard'],
      ['site', `/dashboard/sites/${tenant.site.siteId}`],
      ['reports', `/dashboard/sites/${tenant.site.siteId}/reports`],
      ['reports-campaigns', `/dashboard/sites/${tenant.site.siteId}/reports?groupBy=utm_campaign`],
      ['user', `/dashboard/leads?user=${user}`],
    ] as const;
    for (const [shot, path] of pages) {
      const page = await context.newPage();
      const complaints: string[] = [];
      page.on('console', (m) => complaints.push(m.text()));
      page.on('pageerror', (e) => complaints.push(e.message));
      const res = await page.goto(`${t.url}${path}`);
      expect(res?.status(), path).toBe(200);
      const overflow = await page.evaluate(() => {
        const vw = document.documentElement.clientWidth;
        const wide = Array.from(document.querySelectorAll('table')).filter(
          (tb) => tb.getBoundingClientRect().right > vw + 0.5,
        ).length;
        return {
          vw,
          page: document.documentElement.scrollWidth,
          wide,
          tables: document.querySelectorAll('table').length,
        };
      });
      expect(overflow.tables, path).toBeGreaterThan(0);
      expect(overflow.wide, `${path}: tables wider than the viewport`).toBe(0);
      expect(overflow.page, `${path}: page wider than the viewport`).toBeLessThanOrEqual(overflow.vw);
      if (path.includes('/reports')) {
        // Both charts drawn: Chart.js loaded under the CSP and sized its canvases.
        const charts = await page.evaluate(() =>
          ['chart-days', 'chart-funnel'].map((id) => {
            const canvas = document.getElementById(id) as HTMLCanvasElement;
            return {
              drawn:
                (window as unknown as { Chart: { getChart(c: HTMLCanvasElement): unknown } }).Chart.getChart(
                  canvas,
                ) !== undefined,
              width: canvas.width,
            };
          }),
        );
        for (const c of charts) expect(c).toEqual({ drawn: true, width: expect.any(Number) });
        expect(charts.every((c) => c.width > 100)).toBe(true);
        expect(await page.textContent('#funnel tfoot')).toContain('Total');
        // The default month by day is folded under its totals: a phone scrolls a few screens, not twenty.
        const tall = await page.evaluate(() => document.documentElement.scrollHeight);
        expect(tall, `${path}: page height`).toBeLessThan(6000);
      }
      expect(complaints, path).toEqual([]);
      if (shot === 'reports' || shot === 'site' || (shot === 'reports-campaigns' && name === 'laptop')) {
        // A phone's shot is its first screens: the whole page is a long scroll there.
        await page.screenshot({
          path: `${IMAGES}/dashboard-${shot}-${name}.png`,
          fullPage: name === 'laptop',
          clip: name === 'phone' ? { x: 0, y: 0, width, height: height * 2 } : undefined,
        });
      }
      await page.close();
    }
    await context.close();
  });
});
