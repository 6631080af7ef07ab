// The dashboard's Reports page and its CSV, without a browser: the numbers, the range and channel
// chosen, the page's own Content-Security-Policy and the script files it is allowed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_ADMIN_TOKEN, startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { attributedJoin, newUser, seedTenant, type Tenant } from '../api/support.js';

let db: TestDatabase;
let t: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
  tenant = await seedTenant(db.pool, t.deps.box, { platforms: ['meta', 'tiktok'] });
  const at = new Date(Date.UTC(2026, 9, 10, 12));
  const { visitId } = await attributedJoin(db.pool, {
    siteId: tenant.site.siteId,
    channelId: tenant.site.channels.main,
    telegramUserId: newUser(),
    occurredAt: at,
    visit: { createdAt: at, fbc: 'fb.1.1.x' },
  });
  await db.pool.query(`UPDATE visits SET utm_campaign = '=HYPERLINK("x")' WHERE id = $1`, [visitId]);
  await db.pool.query(
    `INSERT INTO conversions (site_id, channel_id, telegram_user_id, visit_id, event_type, value, currency, event_time, attributed_at, received_at, source)
     VALUES ($1, $2, 1, $3, 'Purchase', 12.5, 'EUR', $4, $4, $4, 'api'), ($1, $2, 1, $3, 'Purchase', 3, 'USD', $4, $4, $4, 'api')`,
    [tenant.site.siteId, tenant.site.channels.main, visitId, at],
  );
});
afterAll(async () => {
  await t.stop();
  await db.drop();
});

const get = (path: string) =>
  fetch(`${t.url}${path}`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });

describe('the Reports page', () => {
  it('shows the funnel of the range, with its own policy allowing only its script files', async () => {
    const res = await get(`/dashboard/sites/${tenant.site.siteId}/reports?from=2026-10-10&to=2026-10-11`);
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("default-src 'none'");
    expect(csp).not.toContain('unsafe');
    const page = await res.text();
    expect(page).toMatch(
      /<tfoot><tr><td data-label="">Total<\/td><td class="num" data-label="visits">1<\/td>/,
    );
    expect(page).toContain('12.5 EUR · 3 USD');
    // Two days: the rows are shown open, under their totals.
    expect(page).toContain('<details id="funnel-rows" open><summary>The 2 rows by day</summary>');
    expect(page).toContain('Total: 1 visits · 1 invite clicks (click rate 100.0 %)');
    // Beside the two days before, which had nothing.
    expect(page).toContain(
      'Against 2026-10-08 to 2026-10-09: <span>visits 1 <span class="muted">(0, new)</span></span>',
    );
    const after = await (
      await get(`/dashboard/sites/${tenant.site.siteId}/reports?from=2026-10-12&to=2026-10-13`)
    ).text();
    expect(after).toContain(
      'Against 2026-10-10 to 2026-10-11: <span>visits 0 <span class="muted">(1, −100 %)</span></span>',
    );
    // Shortcuts keep the grouping chosen.
    expect(page).toMatch(
      new RegExp(
        `<a href="/dashboard/sites/${tenant.site.siteId}/reports\\?from=\\d{4}-\\d{2}-01&to=\\d{4}-\\d{2}-\\d{2}&groupBy=day">this month</a>`,
      ),
    );
    const month = await (
      await get(`/dashboard/sites/${tenant.site.siteId}/reports?from=2026-10-01&to=2026-10-30`)
    ).text();
    // A month by day is folded: on a phone each row is a card.
    expect(month).toContain('<details id="funnel-rows"><summary>The 30 rows by day</summary>');
    expect(page).toContain('<script src="/dashboard/assets/chart.umd.min.js"></script>');
    expect(page).not.toMatch(/<script>/);
    // The data block is JSON a script reads, not one that runs.
    const data = JSON.parse(
      /<script type="application\/json" id="report-data">(.*?)<\/script>/s.exec(page)![1]!,
    );
    expect(data.days).toEqual(['2026-10-10', '2026-10-11']);
    expect(data.funnel).toEqual({ visits: 1, inviteClicks: 1, joins: 1, retained: 1, conversions: 2 });
    // Other pages keep the policy with no script at all.
    expect(
      (await get(`/dashboard/sites/${tenant.site.siteId}`)).headers.get('content-security-policy'),
    ).not.toContain('script-src');
  });

  it("shows each pixel's health: last success, last error with its reason, the last 24 hours by status", async () => {
    const {
      rows: [c],
    } = await db.pool.query<{ id: string }>(
      `INSERT INTO conversions (site_id, telegram_user_id, event_type, event_time, attributed_at, source) VALUES ($1, 7, 'Lead', now(), now(), 'api') RETURNING id`,
      [tenant.site.siteId],
    );
    await db.pool.query(
      `INSERT INTO sends (conversion_id, pixel_id, platform, event_id, status, attempts, last_error, sent_at, created_at, updated_at)
       SELECT $1, p.id, p.platform, 'e' || p.platform, CASE p.platform WHEN 'meta' THEN 'sent' ELSE 'failed' END, 1,
              CASE p.platform WHEN 'tiktok' THEN 'HTTP 401: access token expired' END, now() - interval '2 hours', now() - interval '2 hours', now() - interval '2 hours'
       FROM pixels p WHERE p.site_id = $2`,
      [c!.id, tenant.site.siteId],
    );
    const page = await (await get(`/dashboard/sites/${tenant.site.siteId}/reports`)).text();
    const health = page.slice(page.indexOf('<h2>Pixel health</h2>'));
    expect(health).toMatch(
      /<td data-label="pixel">meta 1234567890<\/td>\s*<td data-label="last success">2 h ago<\/td>\s*<td data-label="last error"><span class="muted">none in 30 days<\/span><\/td>\s*<td class="num" data-label="last 24 h">1 sent · 0 failed · 0 skipped<\/td>/,
    );
    expect(health).toMatch(
      /tiktok CTIKTOKPIXEL01<\/td>\s*<td data-label="last success"><span class="warn">none in 30 days<\/span><\/td>\s*<td data-label="last error">2 h ago: <span class="warn">HTTP 401: access token expired<\/span><\/td>\s*<td class="num" data-label="last 24 h">0 sent · 1 failed · 0 skipped<\/td>/,
    );
  });

  it('serves Chart.js and its own script as JavaScript, nothing else', async () => {
    const chart = await get('/dashboard/assets/chart.umd.min.js');
    expect(chart.status).toBe(200);
    expect(chart.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(await chart.text()).toMatch(/Chart\.js v4\./);
    expect((await get('/dashboard/assets/reports.js')).status).toBe(200);
    expect((await get('/dashboard/assets/..%2Fpackage.json')).status).toBe(404);
  });

  it('downloads the table as CSV, a column per currency, formulas neutralised', async () => {
    const res = await get(
      `/dashboard/sites/${tenant.site.siteId}/reports.csv?from=2026-10-10&to=2026-10-11&groupBy=utm_campaign`,
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(res.headers.get('content-disposition')).toMatch(
      /^attachment; filename="funnel-.*-2026-10-10-2026-10-11-utm_campaign\.csv"$/,
    );
    expect((await res.text()).split('\r\n')).toEqual([
      'utm_campaign,visits,invite_clicks,joins,attributed_joins,organic_joins,leaves,retained,conversions,value_EUR,value_USD',
      `"'=HYPERLINK(""x"")",1,1,1,1,0,0,1,2,12.5,3`,
      'total,1,1,1,1,0,0,1,2,12.5,3',
      '',
    ]);
  });

  it('filters by channel, and answers 400 for a range or channel it cannot show', async () => {
    const vip = await (
      await get(
        `/dashboard/sites/${tenant.site.siteId}/reports.csv?from=2026-10-10&to=2026-10-10&channelId=${tenant.site.channels.second}`,
      )
    ).text();
    expect(vip.split('\r\n')[2]).toBe('total,0,0,0,0,0,0,0,0');
    for (const q of [
      'from=2026-10-12&to=2026-10-10',
      'groupBy=week',
      'from=2026-02-30',
      `channelId=${tenant.site.channels.main}x`,
    ]) {
      const res = await get(`/dashboard/sites/${tenant.site.siteId}/reports?${q}`);
      expect(res.status, q).toBe(400);
    }
    expect((await get('/dashboard/sites/no-such-site/reports')).status).toBe(404);
  });
});
