import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRig, WEBSITE_ID, type ProxyRig } from './support/proxy-rig.js';

const CHROMIUM = '/usr/bin/chromium';
const INVITE = 'https://t.me/+BrowserInvite42';

/** Real Chromium through the proxy: the cookies land in its jar and the invite redirect is followed. */
describe('a Chromium visitor', () => {
  let rig: ProxyRig;
  let browser: Browser;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium`);
    rig = await startRig({ trackerTimeoutMs: 2_000, inviteTimeoutMs: 3_000 });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await rig?.close();
  });

  it('gets first-party cookies on landing, a tracked visit, and lands on the invite link after clicking join', async () => {
    const context = await browser.newContext({ userAgent: 'CapigramBrowserTest/1.0 Chrome' });
    const page = await context.newPage();
    rig.tracker.inviteAnswer = { status: 302, location: INVITE };

    const landing = await page.goto(`${rig.proxy.url}/landing?fbclid=BrowserClick_1&utm_source=facebook`);
    expect(landing?.status()).toBe(200);
    expect(await page.title()).toBe('Sample shop');

    const cookies = Object.fromEntries((await context.cookies()).map((cookie) => [cookie.name, cookie]));
    expect(cookies.capigram_tid?.value).toMatch(/^[0-9a-f-]{36}$/);
    expect(cookies.capigram_sid?.value).toMatch(/^[0-9a-f-]{36}$/);
    expect(cookies.capigram_sid).toMatchObject({ domain: '127.0.0.1', path: '/', sameSite: 'Lax', httpOnly: false, secure: false });
    expect(cookies.capigram_sid!.expires - cookies.capigram_tid!.expires).toBeLessThan(0);
    expect(cookies._fbc?.value).toBe(`fb.1.${rig.clock.now()}.BrowserClick_1`);

    const [init] = await rig.tracker.waitFor('/backend/track/init');
    expect(init?.body).toMatchObject({
      websiteId: WEBSITE_ID,
      tempId: cookies.capigram_tid?.value,
      sessionId: cookies.capigram_sid?.value,
      fbc: cookies._fbc?.value,
      utmSource: 'facebook',
      userAgent: 'CapigramBrowserTest/1.0 Chrome',
    });
    expect(init?.headers['x-capigram-client-ip']).toBe('127.0.0.1');

    // The pixel would now write _fbp; the click should patch it in.
    await page.evaluate(() => {
      document.cookie = '_fbp=fb.1.1717236000000.555666777; path=/';
    });
    // The machine is offline, so Telegram itself cannot load: that Chromium asked for the invite
    // link, as the redirect of its click on the proxy's invite path, is what counts.
    const [telegram] = await Promise.all([page.waitForRequest(INVITE), page.click('#join', { noWaitAfter: true })]);
    expect(telegram.redirectedFrom()?.url()).toBe(`${rig.proxy.url}/capigram/invite`);
    expect(telegram.isNavigationRequest()).toBe(true);

    const [invite] = await rig.tracker.waitFor('/backend/track/invite');
    expect(Object.fromEntries(invite!.query)).toEqual({
      website: WEBSITE_ID,
      tid: cookies.capigram_tid?.value,
      sid: cookies.capigram_sid?.value,
    });
    const [patch] = await rig.tracker.waitFor('/backend/track/update-fbp');
    expect(patch?.body).toEqual({ websiteId: WEBSITE_ID, tempId: cookies.capigram_tid?.value, fbp: 'fb.1.1717236000000.555666777' });
    // The favicon and other subresources were not pageviews.
    expect(rig.tracker.of('/backend/track/init')).toHaveLength(1);
    await context.close();
  });
});
