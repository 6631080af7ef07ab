import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { startProxyServer, type RunningProxy } from '../../proxy/server.js';
import { startWorld, type World } from '../tracker/world.js';
import { capturingLogger } from './support/proxy-rig.js';
import { startSampleUpstream, type SampleUpstream } from './support/sample-upstream.js';

const CHROMIUM = '/usr/bin/chromium';
/** The site's domain is example.com; Chromium resolves this host to the proxy. */
const SITE = 'http://shop.example.com';

interface VisitRow {
  id: string;
  temp_id: string;
  session_id: string;
  fbc: string | null;
  fbp: string | null;
  user_agent: string | null;
  client_ip: string | null;
}

/** Real Chromium through the proxy to the real backend: cookies in its jar, the invite redirect followed. */
describe('a Chromium visitor', () => {
  let world: World;
  let upstream: SampleUpstream;
  let proxy: RunningProxy;
  let browser: Browser;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium`);
    world = await startWorld({ poolTarget: 2 });
    await refillChannelPool(world.app.deps, world.channels.main);
    upstream = await startSampleUpstream();
    proxy = await startProxyServer(
      {
        upstream: upstream.url,
        tracker: world.app.url,
        websiteId: world.websiteId,
        logger: capturingLogger().logger,
      },
      { host: '127.0.0.1', port: 0 },
    );
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--headless',
        '--disable-gpu',
        '--disable-background-networking',
        `--host-resolver-rules=MAP shop.example.com ${new URL(proxy.url).host}`,
        '--disable-features=HttpsUpgrades',
      ],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await proxy?.stop({ drainMs: 2_000 });
    await upstream?.close();
    await world?.close();
  });

  /** The browser's visits, once `done` says the backend has caught up (tracking runs beside the page). */
  async function visitsOf(
    tempId: string | undefined,
    done: (rows: VisitRow[]) => boolean,
  ): Promise<VisitRow[]> {
    const deadline = Date.now() + 5_000;
    for (;;) {
      const { rows } = await world.db.pool.query<VisitRow>(
        'SELECT id, temp_id, session_id, fbc, fbp, user_agent, client_ip FROM visits WHERE site_id = $1 AND temp_id = $2 ORDER BY created_at',
        [world.siteId, tempId],
      );
      if (done(rows) || Date.now() > deadline) return rows;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  it('gets first-party cookies on landing, a recorded visit, and lands on its invite link after clicking join', async () => {
    const context = await browser.newContext({ userAgent: 'CapigramBrowserTest/1.0 Chrome' });
    const page = await context.newPage();

    const landing = await page.goto(`${SITE}/landing?fbclid=BrowserClick_1&utm_source=facebook`);
    expect(landing?.status()).toBe(200);
    expect(await page.title()).toBe('Sample shop');

    const cookies = Object.fromEntries((await context.cookies()).map((cookie) => [cookie.name, cookie]));
    expect(cookies.capigram_tid?.value).toMatch(/^[0-9a-f-]{36}$/);
    expect(cookies.capigram_sid?.value).toMatch(/^[0-9a-f-]{36}$/);
    expect(cookies.capigram_sid).toMatchObject({
      domain: 'shop.example.com',
      path: '/',
      sameSite: 'Lax',
      httpOnly: false,
      secure: false,
    });
    const nowSeconds = Date.now() / 1000;
    expect(cookies.capigram_sid!.expires).toBeGreaterThan(nowSeconds + 29 * 60);
    expect(cookies.capigram_sid!.expires).toBeLessThan(nowSeconds + 31 * 60);
    expect(cookies.capigram_tid!.expires).toBeGreaterThan(nowSeconds + 364 * 86_400);
    expect(cookies._fbc?.value).toMatch(/^fb\.1\.\d{13}\.BrowserClick_1$/);

    const tid = cookies.capigram_tid?.value;
    const [visit] = await visitsOf(tid, (rows) => rows.length === 1);
    expect(visit).toMatchObject({
      session_id: cookies.capigram_sid?.value,
      fbc: cookies._fbc?.value,
      user_agent: 'CapigramBrowserTest/1.0 Chrome',
      client_ip: '127.0.0.1',
      fbp: null,
    });

    // The pixel would now write _fbp; the click patches it into the visit.
    await page.evaluate(() => {
      // biome-ignore lint/suspicious/noDocumentCookie: the page's own pixel writing its cookie is what is simulated
      document.cookie = '_fbp=fb.1.1717236000000.555666777; path=/';
    });
    // Telegram itself is out of reach offline: that Chromium asked for the invite link, as the
    // redirect of its click on the proxy's invite path, is what counts.
    const [telegram] = await Promise.all([
      page.waitForRequest((request) => request.url().startsWith('https://t.me/+')),
      page.click('#join', { noWaitAfter: true }),
    ]);
    expect(telegram.redirectedFrom()?.url()).toBe(`${SITE}/capigram/invite`);
    expect(telegram.isNavigationRequest()).toBe(true);

    const { rows: held } = await world.db.pool.query<{ invite_link: string }>(
      'SELECT invite_link FROM invitations WHERE visit_id = $1',
      [visit?.id],
    );
    expect(held.map((row) => row.invite_link)).toEqual([telegram.url()]);
    const after = await visitsOf(tid, (rows) => rows[0]?.fbp !== null);
    expect(after.map((row) => [row.id, row.fbp])).toEqual([[visit?.id, 'fb.1.1717236000000.555666777']]);
    await context.close();
  });
});
