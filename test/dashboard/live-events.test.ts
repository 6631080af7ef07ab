// The live events view: per pixel, the last events sent with their time, name, status and the
// platform's answer, newest first, reloading itself; nothing of the person shown.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerOf } from '../../backend/domain/dashboard/live-events.js';
import { TEST_ADMIN_TOKEN, startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { insertVisit, seedTenant, type Tenant } from '../api/support.js';

let db: TestDatabase;
let t: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
  tenant = await seedTenant(db.pool, t.deps.box, { platforms: ['meta', 'tiktok'] });
  const site = tenant.site.siteId;
  const visitId = await insertVisit(db.pool, site, { clientIp: '198.51.100.23', createdAt: new Date() });
  const {
    rows: [c],
  } = await db.pool.query<{ id: string }>(
    `INSERT INTO conversions (site_id, telegram_user_id, visit_id, event_type, event_time, attributed_at, source)
     VALUES ($1, 4242, $2, 'Purchase', now(), now(), 'api') RETURNING id`,
    [site, visitId],
  );
  // Meta: a PageView sent a minute ago, then the Purchase sent now; TikTok refused the Purchase.
  await db.pool.query(
    `INSERT INTO sends (visit_id, pixel_id, platform, event_id, status, attempts, response_summary, sent_at, created_at, updated_at)
     SELECT $1, p.id, p.platform, 'pv-1', 'sent', 1, '{"events_received":1,"fbtrace_id":"AbCdEf"}', now() - interval '1 minute', now() - interval '1 minute', now() - interval '1 minute'
     FROM pixels p WHERE p.site_id = $2 AND p.platform = 'meta'`,
    [visitId, site],
  );
  await db.pool.query(
    `INSERT INTO sends (conversion_id, pixel_id, platform, event_id, status, attempts, last_error, response_summary, sent_at, created_at, updated_at)
     SELECT $1, p.id, p.platform, 'purchase-1', CASE p.platform WHEN 'meta' THEN 'sent' ELSE 'failed' END, 1,
            CASE p.platform WHEN 'tiktok' THEN 'HTTP 401: access token expired' END,
            CASE p.platform WHEN 'meta' THEN '{"events_received":1,"fbtrace_id":"XyZ"}'::jsonb END,
            CASE p.platform WHEN 'meta' THEN now() END, now(), now()
     FROM pixels p WHERE p.site_id = $2`,
    [c!.id, site],
  );
});
afterAll(async () => {
  await t.stop();
  await db.drop();
});

const get = (path: string) =>
  fetch(`${t.url}${path}`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });

describe('the live events view', () => {
  it("lists each pixel's last events newest first, with status and the platform's answer, and reloads itself", async () => {
    const res = await get(`/dashboard/sites/${tenant.site.siteId}/events`);
    expect(res.status).toBe(200);
    expect(res.headers.get('refresh')).toBe('10');
    expect(res.headers.get('content-security-policy')).not.toContain('script-src');
    const page = await res.text();
    const meta = page.slice(page.indexOf('<h2>meta'), page.indexOf('<h2>tiktok'));
    const tiktok = page.slice(page.indexOf('<h2>tiktok'));
    expect(meta.indexOf('Purchase')).toBeGreaterThan(0);
    expect(meta.indexOf('Purchase')).toBeLessThan(meta.indexOf('PageView'));
    expect(meta).toContain('&quot;fbtrace_id&quot;:&quot;XyZ&quot;');
    expect(tiktok).toContain('HTTP 401: access token expired');
    expect(tiktok).toMatch(/class="warn">failed</);
    // Nothing of the person: not their IP, not their Telegram id.
    expect(page).not.toContain('198.51.100.23');
    expect(page).not.toContain('4242');
  });

  it('is linked from the site page', async () => {
    const page = await (await get(`/dashboard/sites/${tenant.site.siteId}`)).text();
    expect(page).toContain(`href="/dashboard/sites/${tenant.site.siteId}/events"`);
  });
});

describe('answerOf', () => {
  it.each([
    [{ status: 'sent', last_error: null, skip_reason: null, response_summary: { ok: 1 } }, '{"ok":1}'],
    [
      { status: 'failed', last_error: 'HTTP 400: bad', skip_reason: null, response_summary: null },
      'HTTP 400: bad',
    ],
    [
      { status: 'skipped', last_error: null, skip_reason: 'no consent', response_summary: null },
      'no consent',
    ],
    [{ status: 'pending', last_error: null, skip_reason: null, response_summary: null }, null],
    [
      { status: 'failed', last_error: 'x'.repeat(400), skip_reason: null, response_summary: null },
      `${'x'.repeat(299)}…`,
    ],
  ])('%o answers %s', (row, answer) => {
    expect(answerOf(row)).toBe(answer);
  });
});
