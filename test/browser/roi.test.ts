// The ROI page in real Chromium at a laptop's 1366×768 and a phone's 390×844: both charts drawn by
// the Chart.js Capigram serves, nothing blocked by the Content-Security-Policy, no table wider than
// the screen, money per currency, the warnings. With CAPIGRAM_SCREENSHOTS=docs the screenshots of
// docs/spend.md are rewritten; a plain run writes them to a scratch folder.
import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedTenant, type Tenant } from '../api/support.js';
import { TEST_ADMIN_TOKEN, startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { scratchDir } from '../harness/scratch.js';

const IMAGES = process.env.CAPIGRAM_SCREENSHOTS === 'docs' ? 'docs/images' : scratchDir('roi-screenshots');
const SIZES = [
  { name: 'laptop', width: 1366, height: 768 },
  { name: 'phone', width: 390, height: 844 },
] as const;

let db: TestDatabase;
let t: TestApp;
let tenant: Tenant;
let browser: Browser;

/**
 * A month of four campaigns with spend: three Meta ones (EUR) reached by `utm_id`, by
 * `fb_campaign_id` and by name, a TikTok one (USD) by `tt_campaign_id`; a Meta campaign that spends
 * with no visit, visits of a campaign key with no spend; joins for a fifth of the visits, a tenth
 * of them leaving within days, Purchases in EUR and USD.
 */
async function seedMonth(): Promise<void> {
  const site = tenant.site;
  const sources: Record<string, string> = {};
  for (const [platform, currency] of [
    ['meta', 'EUR'],
    ['tiktok', 'USD'],
  ] as const) {
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO spend_sources (site_id, platform, account_ref, credentials, currency, time_zone) VALUES ($1, $2, $3, 'sealed', $4, 'UTC') RETURNING id`,
      [site.siteId, platform, `acct-${platform}`, currency],
    );
    sources[platform] = rows[0]!.id;
  }
  await db.pool.query(
    `INSERT INTO spend_daily (source_id, day, campaign_id, campaign_name, currency, spend, impressions, clicks)
     SELECT c.source, current_date - d, c.id, c.name, c.currency, c.base + (d % 5) * 3, 2000, 60 + d % 20
     FROM generate_series(0, 29) d,
          (VALUES ($1::uuid, '120210000000001', 'Black Friday', 'EUR', 40),
                  ($1::uuid, '120210000000002', 'Retarget', 'EUR', 15),
                  ($1::uuid, '120210000000003', 'Autumn sale', 'EUR', 25),
                  ($1::uuid, '120210000000004', 'Lookalike', 'EUR', 10),
                  ($2::uuid, '1790000000000001', 'Video', 'USD', 30)) c (source, id, name, currency, base)`,
    [sources.meta, sources.tiktok],
  );
  await db.pool.query(
    `WITH v AS (
       INSERT INTO visits (site_id, temp_id, session_id, landing_page, utm_campaign, fbc, ttclid, channel_id, created_at)
       SELECT $1, gen_random_uuid(), gen_random_uuid(),
              'https://shop.example.com/l?' || (ARRAY['utm_id=120210000000001', 'fb_campaign_id=120210000000002', 'utm_campaign=Autumn%20sale',
                                                      'tt_campaign_id=1790000000000001', 'utm_id=555', 'ref=x'])[1 + g % 6],
              (ARRAY[NULL, NULL, 'Autumn sale', NULL, NULL, NULL])[1 + g % 6],
              CASE WHEN g % 6 IN (0, 1, 2, 4) THEN 'fb.1.1.' || g END, CASE WHEN g % 6 = 3 THEN 'E.C.P.' || g END, $2,
              now() - make_interval(days => (g % 30)) - make_interval(mins => g % 600)
       FROM generate_series(1, 1200) g RETURNING id, created_at
     )
     INSERT INTO memberships (channel_id, telegram_user_id, kind, visit_id, attributed, occurred_at)
     SELECT $2, 3200000000 + row_number() OVER (), 'join', id, true, created_at + interval '3 minutes'
     FROM v WHERE random() < 0.2`,
    [site.siteId, site.channels.main],
  );
  await db.pool.query(
    `INSERT INTO memberships (channel_id, telegram_user_id, kind, occurred_at)
     SELECT channel_id, telegram_user_id, 'leave', least(now(), occurred_at + make_interval(days => (telegram_user_id % 9)::int))
     FROM memberships WHERE channel_id = $1 AND kind = 'join' AND telegram_user_id % 10 = 0`,
    [site.channels.main],
  );
  await db.pool.query(
    `INSERT INTO conversions (site_id, channel_id, telegram_user_id, visit_id, event_type, value, currency, event_time, attributed_at, received_at, source)
     SELECT $1, channel_id, telegram_user_id, visit_id, 'Purchase', 20 + (telegram_user_id % 7) * 5,
            CASE WHEN telegram_user_id % 4 = 0 THEN 'USD' ELSE 'EUR' END, occurred_at, occurred_at, least(now(), occurred_at + interval '1 hour'), 'api'
     FROM memberships WHERE channel_id = $2 AND kind = 'join' AND telegram_user_id % 3 = 0`,
    [site.siteId, site.channels.main],
  );
}

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
  tenant = await seedTenant(db.pool, t.deps.box);
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

describe.each(SIZES)('the ROI page at $width×$height', ({ name, width, height }) => {
  it('draws both charts, fits the screen, keeps currencies apart and shows the warnings', async () => {
    const context = await signedIn(width, height);
    const page = await context.newPage();
    const complaints: string[] = [];
    page.on('console', (m) => complaints.push(m.text()));
    page.on('pageerror', (e) => complaints.push(e.message));
    const res = await page.goto(`${t.url}/dashboard/sites/${tenant.site.siteId}/roi`);
    expect(res?.status()).toBe(200);
    const layout = await page.evaluate(() => {
      const vw = document.documentElement.clientWidth;
      return {
        vw,
        page: document.documentElement.scrollWidth,
        wide: Array.from(document.querySelectorAll('table')).filter(
          (tb) => tb.getBoundingClientRect().right > vw + 0.5,
        ).length,
        charts: ['chart-spend', 'chart-cost'].map((id) => {
          const canvas = document.getElementById(id) as HTMLCanvasElement;
          const chart = (
            window as unknown as {
              Chart: {
                getChart(c: HTMLCanvasElement): { data: { datasets: { label: string }[] } } | undefined;
              };
            }
          ).Chart.getChart(canvas);
          return { width: canvas.width, series: chart?.data.datasets.map((s) => s.label) ?? null };
        }),
      };
    });
    expect(layout.wide).toBe(0);
    expect(layout.page).toBeLessThanOrEqual(layout.vw);
    // One series per currency, never one of mixed money.
    expect(layout.charts[0]!.series).toEqual(['spend EUR', 'spend USD', 'value EUR', 'value USD', 'joins']);
    expect(layout.charts[1]!.series).toEqual(['cost per join EUR', 'cost per join USD']);
    for (const c of layout.charts) expect(c.width).toBeGreaterThan(100);
    const text = (await page.textContent('body')) ?? '';
    expect(text).toContain('Black Friday');
    expect(text).toContain('Autumn sale');
    expect(text).toMatch(/Lookalike.*spent [\d,.]+ EUR and has no visits/s);
    expect(text).toMatch(/visits carry campaign 555/);
    const total = (await page.textContent('#roi tfoot')) ?? '';
    expect(total).toMatch(/[\d,.]+ EUR · [\d,.]+ USD/);
    expect(complaints).toEqual([]);
    await page.screenshot({
      path: `${IMAGES}/dashboard-roi-${name}.png`,
      fullPage: name === 'laptop',
      clip: name === 'phone' ? { x: 0, y: 0, width, height: height * 2 } : undefined,
    });
    await page.close();
    await context.close();
  });
});
