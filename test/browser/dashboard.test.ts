// The dashboard in real Chromium: the sign-in form, the session cookie under SameSite=Strict, the
// strict Content-Security-Policy (the page's own stylesheet applies, nothing is blocked), and the
// "Submit value" form that dispatches a waiting conversion.
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { TEST_ADMIN_TOKEN, startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { count, newUser, seedTenant, waitingJoin, type Tenant } from '../api/support.js';

let db: TestDatabase;
let t: TestApp;
let tenant: Tenant;
let browser: Browser;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
  tenant = await seedTenant(db.pool, t.deps.box, { platforms: ['meta', 'tiktok'] });
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

it('signs in, shows the site styled under its CSP, and submits a waiting value', async () => {
  const { conversionId } = await waitingJoin(db.pool, tenant.site, newUser());
  const page = await browser.newPage();
  const complaints: string[] = [];
  page.on('console', (m) => complaints.push(m.text()));
  page.on('pageerror', (e) => complaints.push(e.message));

  await page.goto(`${t.url}/dashboard`);
  expect(page.url()).toBe(`${t.url}/dashboard/login`);
  await page.fill('input[name=token]', TEST_ADMIN_TOKEN);
  await page.click('#token-sign-in button');
  await page.waitForURL(`${t.url}/dashboard`);
  // The inline stylesheet is allowed by its hash: the header is dark, not the browser's default.
  expect(await page.evaluate(() => getComputedStyle(document.querySelector('header')!).backgroundColor)).toBe(
    'rgb(29, 36, 48)',
  );

  await page.click(`a[href="/dashboard/sites/${tenant.site.siteId}"]`);
  await page.fill('input[name=value]', '19.99');
  await page.fill('input[name=currency]', 'usd');
  await page.click('text=Submit value');
  await page.waitForURL(/notice=value-saved/);
  expect(await page.textContent('.notice')).toContain('The value was saved');
  expect(
    await count(
      db.pool,
      `conversions WHERE id = $1 AND NOT awaiting_manual_input AND value = 19.99 AND currency = 'USD'`,
      [conversionId],
    ),
  ).toBe(1);
  expect(await count(db.pool, `sends WHERE conversion_id = $1 AND status = 'pending'`, [conversionId])).toBe(
    2,
  );
  expect(complaints).toEqual([]);
  await page.close();
});
