// Teams in real Chromium, at a laptop's and a phone's width: a user arrives by the invitation
// link and sets a password, signs out and in again by e-mail, and sees what the role allows: a
// site-scoped viewer sees its one site with no form that changes anything and no audit log; an
// admin submits a value; the admin token's owner reads who did it in the audit log.
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addUser, type Role } from '../../backend/domain/admin/users.js';
import { TEST_ADMIN_TOKEN, startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { newUser, seedTenant, waitingJoin, type Tenant } from '../api/support.js';

let db: TestDatabase;
let t: TestApp;
let tenant: Tenant;
let rival: Tenant;
let browser: Browser;
const PASSWORD = 'a long team password';

const SIZES = [
  { name: 'laptop', width: 1366, height: 768 },
  { name: 'phone', width: 390, height: 844 },
];

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
  tenant = await seedTenant(db.pool, t.deps.box, { sites: 2 });
  rival = await seedTenant(db.pool, t.deps.box);
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking'],
  });
});
afterAll(async () => {
  await browser?.close();
  await t?.stop();
  await db?.drop();
});

async function invite(email: string, role: Role, scope: { siteId?: string; accountId?: string }) {
  return (await addUser(db.pool, { email, role, ...scope }, { publicUrl: t.url, now: new Date() })).inviteUrl;
}

/** Fails on anything wider than the screen, and on a console complaint (a CSP refusal, say). */
async function fits(page: Page): Promise<void> {
  const m = await page.evaluate(() => ({
    vw: document.documentElement.clientWidth,
    page: document.documentElement.scrollWidth,
  }));
  expect(m.page, page.url()).toBeLessThanOrEqual(m.vw);
}

describe.each(SIZES)('teams at $width×$height', ({ name, width, height }) => {
  it('a site viewer arrives by invitation, signs in by e-mail and sees one site, read-only', async () => {
    await waitingJoin(db.pool, tenant.site, newUser());
    const email = `viewer.${name}@example.com`;
    const link = await invite(email, 'viewer', { siteId: tenant.site.siteId });
    const context = await browser.newContext({ viewport: { width, height } });
    const page = await context.newPage();
    const complaints: string[] = [];
    // The 404 and 403 this test asks for are logged as failed loads: anything else is a complaint.
    page.on('console', (m) => {
      if (!m.text().startsWith('Failed to load resource')) complaints.push(m.text());
    });
    page.on('pageerror', (e) => complaints.push(e.message));

    await page.goto(link);
    expect(await page.textContent('main')).toContain(email);
    await fits(page);
    await page.fill('input[name=password]', PASSWORD);
    await page.fill('input[name=confirm]', PASSWORD);
    await page.click('#set-password button');
    await page.waitForURL(`${t.url}/dashboard`);
    const sites = await page.textContent('main');
    expect(sites).toContain(tenant.site.websiteId);
    expect(sites).not.toContain(tenant.sites[1]!.websiteId);
    expect(sites).not.toContain(rival.site.websiteId);
    await fits(page);

    await page.click(`a[href="/dashboard/sites/${tenant.site.siteId}"]`);
    expect(await page.textContent('main')).toContain('Awaiting a value');
    expect(await page.locator('text=Submit value').count()).toBe(0);
    await fits(page);

    // Another site, typed in: as if it did not exist.
    const hidden = await page.goto(`${t.url}/dashboard/sites/${rival.site.siteId}`);
    expect(hidden?.status()).toBe(404);
    const audit = await page.goto(`${t.url}/dashboard/audit`);
    expect(audit?.status()).toBe(403);

    // The link is spent.
    expect((await page.goto(link))?.status()).toBe(404);

    await page.goto(`${t.url}/dashboard`);
    await page.click('text=Sign out');
    await page.waitForURL(`${t.url}/dashboard/login`);
    await page.fill('input[name=email]', email.toUpperCase());
    await page.fill('input[name=password]', PASSWORD);
    await page.click('#user-sign-in button');
    await page.waitForURL(`${t.url}/dashboard`);
    await fits(page);
    expect(complaints).toEqual([]);
    await context.close();
  });

  it('an account admin submits a value, and the admin token reads who did it in the audit log', async () => {
    const { conversionId } = await waitingJoin(db.pool, tenant.sites[1]!, newUser());
    const email = `admin.${name}@example.com`;
    const context = await browser.newContext({ viewport: { width, height } });
    const page = await context.newPage();
    await page.goto(await invite(email, 'admin', { accountId: tenant.accountId }));
    await page.fill('input[name=password]', PASSWORD);
    await page.fill('input[name=confirm]', PASSWORD);
    await page.click('#set-password button');
    await page.waitForURL(`${t.url}/dashboard`);
    expect(await page.textContent('main')).toContain(tenant.sites[1]!.websiteId);
    await page.click(`a[href="/dashboard/sites/${tenant.sites[1]!.siteId}"]`);
    await page.fill('input[name=value]', '25');
    await page.fill('input[name=currency]', 'EUR');
    await page.click('text=Submit value');
    await page.waitForURL(/notice=value-saved/);
    await context.close();

    const owner = await browser.newContext({ viewport: { width, height } });
    const op = await owner.newPage();
    await op.goto(`${t.url}/dashboard/login`);
    await op.fill('input[name=token]', TEST_ADMIN_TOKEN);
    await op.click('#token-sign-in button');
    await op.waitForURL(`${t.url}/dashboard`);
    await op.click('a[href="/dashboard/audit"]');
    const row = op.locator('#audit tr', { hasText: conversionId });
    expect(await row.count()).toBe(1);
    expect(await row.textContent()).toContain(email);
    expect(await row.textContent()).toContain('conversion.value');
    await fits(op);
    await owner.close();
  });
});
