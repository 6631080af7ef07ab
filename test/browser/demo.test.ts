// The demo clicked through in real Chromium, as a newcomer would: `npm run demo`'s landing page
// (tracker.js), "Join the channel" (the sandbox's Telegram opens in a new tab, through Capigram's
// invite redirect), "Join channel" there (a real chat_member update to the webhook), then the
// dashboard's page of that Telegram user shows the attributed join and its conversion sent to the
// four simulated platforms. Every page carries the sandbox banner. The screenshots are the README's.
import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { spawnService, type ServiceProcess } from '../harness/process.js';
import { scratchDir } from '../harness/scratch.js';

// The README's screenshots are rewritten only when asked (`CAPIGRAM_SCREENSHOTS=docs npx vitest run
// test/browser/demo.test.ts`): a plain test run must not leave the work tree changed.
const IMAGES = process.env.CAPIGRAM_SCREENSHOTS === 'docs' ? 'docs/images' : scratchDir('demo-screenshots');
let demo: ServiceProcess;
let browser: Browser;
let urls: { landing: string; dashboard: string; log: string; token: string };

beforeAll(async () => {
  demo = spawnService('backend/sandbox/demo-main.ts', {
    DATA_DIR: scratchDir('demo-browser'),
    PORT: '0',
    SANDBOX_PORT: '0',
    DATABASE_URL: '',
  });
  await demo.waitFor(/ready in \d+ ms/, 30_000);
  const out = demo.output();
  const [, landing] = /landing page: +(\S+)/.exec(out)!;
  const [, dashboard, token] = /dashboard: +(\S+) +\(admin token: (\S+)\)/.exec(out)!;
  const [, log] = /sandbox log: +(\S+)/.exec(out)!;
  urls = { landing: landing!, dashboard: dashboard!, log: log!, token: token! };
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking'],
  });
  mkdirSync(IMAGES, { recursive: true });
});
afterAll(async () => {
  await browser?.close();
  if (demo && demo.child.exitCode === null) {
    demo.child.kill('SIGTERM');
    await demo.exit();
  }
});

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: `${IMAGES}/${name}.png`, fullPage: true });
}

it('landing page → join in the sandbox Telegram → the dashboard shows the attributed conversion', async () => {
  const context = await browser.newContext({ viewport: { width: 1100, height: 700 } });
  const page = await context.newPage();
  const complaints: string[] = [];
  page.on('pageerror', (e) => complaints.push(e.message));

  await page.goto(urls.landing);
  expect(await page.textContent('#sandbox-banner')).toContain('SANDBOX');
  // tracker.js has recorded the visit: Meta's PageView reached the sandbox.
  const log = await context.newPage();
  await expect
    .poll(
      async () =>
        (await log.goto(`${urls.log}.json?source=meta`))!
          .json()
          .then((b: { entries: { kind: string }[] }) => b.entries.map((e) => e.kind)),
      { timeout: 10_000 },
    )
    .toContain('PageView');
  await shot(page, 'demo-landing');

  const [telegram] = await Promise.all([context.waitForEvent('page'), page.click('#join')]);
  await telegram.waitForURL(/\/telegram\/join\//);
  expect(await telegram.textContent('#sandbox-banner')).toContain('SANDBOX');
  await shot(telegram, 'demo-telegram');
  await telegram.click('#join');
  expect(await telegram.textContent('#joined')).toContain('You joined Capigram Sandbox channel');
  expect(await telegram.textContent('body')).toContain('HTTP 200');

  // The dashboard, signed in with the printed admin token, then the lead page the sandbox links to.
  const leadUrl = (await telegram.getAttribute('#lead', 'href'))!;
  await telegram.goto(urls.dashboard);
  await telegram.fill('input[name=token]', urls.token);
  await telegram.click('#token-sign-in button');
  await telegram.waitForURL(urls.dashboard);
  expect(await telegram.textContent('#sandbox-banner')).toContain('SANDBOX');
  await expect
    .poll(
      async () => {
        await telegram.goto(leadUrl);
        return telegram.textContent('body');
      },
      { timeout: 15_000 },
    )
    // Each send names its pixel ("meta 100000000000001: sent").
    .toMatch(/meta \S+: sent[\s\S]*tiktok \S+: sent|tiktok \S+: sent[\s\S]*meta \S+: sent/);
  const body = (await telegram.textContent('body'))!;
  expect(body).toContain('Subscribe');
  for (const platform of ['meta', 'tiktok', 'snapchat', 'google'])
    expect(body).toMatch(new RegExp(`${platform} \\S+: sent`));
  // The join is attributed to the visit, whose click ids the table lists.
  expect(await telegram.textContent('h2:has-text("Joins and leaves") + table td:nth-child(5)')).toBe('yes');
  await shot(telegram, 'demo-dashboard-lead');

  await log.goto(urls.log);
  expect(await log.textContent('table')).toContain('Subscribe');
  await shot(log, 'demo-sandbox-log');
  expect(complaints).toEqual([]);
  await context.close();
}, 60_000);
