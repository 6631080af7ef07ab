// The operator dashboard (/dashboard): signed in with ADMIN_TOKEN, every site at a glance, one site
// in detail, and the two actions it offers (a waiting conversion's value, a failed send's retry).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueSession, SESSION_TTL_MS } from '../../backend/http/dashboard/session.js';
import { TEST_ADMIN_TOKEN, startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import {
  attributedJoin,
  count,
  insertVisit,
  newUser,
  seedTenant,
  VISIT,
  waitingJoin,
  type Tenant,
} from '../api/support.js';

let db: TestDatabase;
let t: TestApp;
let tenant: Tenant;
let rival: Tenant;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp(db.pool);
  tenant = await seedTenant(db.pool, t.deps.box, { platforms: ['meta', 'tiktok'] });
  rival = await seedTenant(db.pool, t.deps.box);
});
afterAll(async () => {
  await t.stop();
  await db.drop();
});

interface Answer {
  status: number;
  location: string | null;
  setCookie: string[];
  headers: Headers;
  text: string;
}

async function call(
  path: string,
  init: {
    method?: string;
    cookie?: string;
    form?: Record<string, string>;
    headers?: Record<string, string>;
  } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...init.headers };
  if (init.cookie !== undefined) headers.cookie = init.cookie;
  let body: string | undefined;
  if (init.form !== undefined) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(init.form).toString();
  }
  const res = await fetch(`${t.url}${path}`, {
    method: init.method ?? (body === undefined ? 'GET' : 'POST'),
    headers,
    body,
    redirect: 'manual',
  });
  return {
    status: res.status,
    location: res.headers.get('location'),
    setCookie: res.headers.getSetCookie(),
    headers: res.headers,
    text: await res.text(),
  };
}

/** Signs in through the form and returns the session cookie. */
async function signIn(): Promise<string> {
  const res = await call('/dashboard/login', { form: { token: TEST_ADMIN_TOKEN } });
  expect(res.status).toBe(303);
  const cookie = res.setCookie.find((c) => c.startsWith('capigram_admin='));
  expect(cookie).toBeDefined();
  return cookie!.split(';')[0]!;
}

/** The form token a page hands out (the same for every form of one session). */
function formTokenOf(page: string): string {
  const m = /name="_token" value="([^"]+)"/.exec(page);
  expect(m).not.toBeNull();
  return m![1]!;
}

async function conversionRow(id: string) {
  const { rows } = await db.pool.query(
    'SELECT value::float8 AS value, currency, awaiting_manual_input, capi_status FROM conversions WHERE id = $1',
    [id],
  );
  return rows[0];
}

describe('signing in', () => {
  it('sends a stranger to the sign-in page, refuses a wrong token, and lets the admin token in', async () => {
    expect(await call('/dashboard')).toMatchObject({ status: 303, location: '/dashboard/login' });
    expect((await call('/dashboard/login')).text).toContain('name="token"');

    const wrong = await call('/dashboard/login', { form: { token: `${TEST_ADMIN_TOKEN}x` } });
    expect(wrong.status).toBe(401);
    expect(wrong.setCookie).toEqual([]);
    expect(wrong.text).toContain('not the admin token');

    const res = await call('/dashboard/login', { form: { token: TEST_ADMIN_TOKEN } });
    expect(res).toMatchObject({ status: 303, location: '/dashboard' });
    const cookie = res.setCookie.find((c) => c.startsWith('capigram_admin='))!;
    expect(cookie).toMatch(/HttpOnly/i);
    expect(cookie).toMatch(/SameSite=Strict/i);
    expect(cookie).toMatch(/Path=\/dashboard/);
    expect(cookie).not.toContain(TEST_ADMIN_TOKEN);

    const home = await call('/dashboard', { cookie: cookie.split(';')[0] });
    expect(home.status).toBe(200);
    expect(home.text).toContain(tenant.site.websiteId);
    expect(home.text).toContain(rival.site.websiteId);
    expect(home.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(home.headers.get('x-frame-options')).toBe('DENY');
    expect(home.headers.get('cache-control')).toBe('no-store');
  });

  it('refuses forged, tampered, expired and foreign sessions', async () => {
    const now = Date.now();
    const good = (await signIn()).slice('capigram_admin='.length);
    const [expires, mac] = good.split('.') as [string, string];
    const forged = [
      // Made with the right token, but never opened by a sign-in.
      issueSession(TEST_ADMIN_TOKEN, now),
      'anything',
      `${expires}.${mac.slice(0, -2)}AA`,
      `${Number(expires) + 60_000}.${mac}`,
      issueSession(TEST_ADMIN_TOKEN, now - SESSION_TTL_MS - 1000),
      issueSession('another-admin-token', now),
    ];
    for (const value of forged) {
      expect(await call('/dashboard', { cookie: `capigram_admin=${value}` }), value).toMatchObject({
        status: 303,
        location: '/dashboard/login',
      });
    }
    expect((await call('/dashboard', { cookie: `capigram_admin=${good}` })).status).toBe(200);
  });

  it('takes the admin token as a bearer token for scripts, and nothing else', async () => {
    expect(
      (await call('/dashboard', { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } })).status,
    ).toBe(200);
    const wrong = await call('/dashboard', { headers: { authorization: 'Bearer not-the-token' } });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('content-type')).toContain('application/problem+json');
  });

  it('signs out: the cookie is cleared and the form token is required', async () => {
    const cookie = await signIn();
    const page = (await call('/dashboard', { cookie })).text;
    expect((await call('/dashboard/logout', { cookie, form: {} })).status).toBe(403);
    const out = await call('/dashboard/logout', { cookie, form: { _token: formTokenOf(page) } });
    expect(out).toMatchObject({ status: 303, location: '/dashboard/login' });
    expect(out.setCookie.join(';')).toMatch(/capigram_admin=;.*Max-Age=0/i);
  });

  it('signs out on the server: a copy of the cookie kept from before is refused afterwards, other sessions stay', async () => {
    const cookie = await signIn();
    const other = await signIn();
    const page = (await call('/dashboard', { cookie })).text;
    expect((await call('/dashboard/logout', { cookie, form: { _token: formTokenOf(page) } })).status).toBe(
      303,
    );
    expect(await call('/dashboard', { cookie })).toMatchObject({ status: 303, location: '/dashboard/login' });
    expect((await call('/dashboard/login', { cookie })).status).toBe(200);
    expect((await call('/dashboard', { cookie: other })).status).toBe(200);
  });
});

describe('a site', () => {
  it('shows its channels, pixels and waiting conversions, and escapes what operators typed', async () => {
    const cookie = await signIn();
    await db.pool.query(`UPDATE sites SET name = '<script>alert(1)</script> & Co' WHERE id = $1`, [
      tenant.site.siteId,
    ]);
    const user = newUser();
    const { conversionId } = await waitingJoin(db.pool, tenant.site, user);
    const page = await call(`/dashboard/sites/${tenant.site.siteId}`, { cookie });
    expect(page.status).toBe(200);
    expect(page.text).not.toContain('<script>alert(1)');
    expect(page.text).toContain('&lt;script&gt;alert(1)&lt;/script&gt; &amp; Co');
    expect(page.text).toContain('Main');
    expect(page.text).toContain('VIP');
    expect(page.text).toContain('tiktok');
    expect(page.text).toContain(conversionId);
    expect(page.text).toContain(String(user));
    // By its public websiteId too; an unknown site is a 404 page.
    expect((await call(`/dashboard/sites/${tenant.site.websiteId}`, { cookie })).status).toBe(200);
    expect((await call('/dashboard/sites/ws_nope', { cookie })).status).toBe(404);
  });

  it('counts what needs attention on the overview', async () => {
    const cookie = await signIn();
    const [site] = (await seedTenant(db.pool, t.deps.box)).sites;
    await waitingJoin(db.pool, site!, newUser());
    const home = (await call('/dashboard', { cookie })).text;
    const row = home.slice(home.indexOf(site!.websiteId));
    expect(row.slice(0, row.indexOf('</tr>'))).toContain('1 awaiting a value');
  });

  it("gives each site today's visits, joins and conversions (since midnight UTC) beside yesterday's by this time", async () => {
    const cookie = await signIn();
    const [site] = (await seedTenant(db.pool, t.deps.box)).sites;
    await waitingJoin(db.pool, site!, newUser());
    await attributedJoin(db.pool, {
      siteId: site!.siteId,
      channelId: site!.channels.main,
      telegramUserId: newUser(),
    });
    // Yesterday's visit, earlier in the day than now: not today's, but yesterday's by this time.
    const now = Date.now();
    const midnight = now - (now % 86_400_000);
    const createdAt = new Date(midnight - 86_400_000 + Math.floor((now - midnight) / 2));
    await insertVisit(db.pool, site!.siteId, { ...VISIT, createdAt });
    const home = (await call('/dashboard', { cookie })).text;
    const row = home.slice(home.indexOf(site!.websiteId));
    expect(row.slice(0, row.indexOf('</tr>'))).toContain(
      '<td class="num" data-label="today (UTC)">visits 2 · joins 1 · conversions 1<br><span class="muted">yesterday by this time: 1 · 0 · 0</span></td>',
    );
  });
});

describe('submitting a value', () => {
  it('stores the value and dispatches the conversion to every pixel', async () => {
    const cookie = await signIn();
    const { conversionId } = await waitingJoin(db.pool, tenant.site, newUser());
    const page = await call(`/dashboard/sites/${tenant.site.siteId}`, { cookie });
    const res = await call(`/dashboard/sites/${tenant.site.siteId}/conversions/${conversionId}/value`, {
      cookie,
      form: { _token: formTokenOf(page.text), value: '49.90', currency: 'eur' },
    });
    expect(res).toMatchObject({
      status: 303,
      location: `/dashboard/sites/${tenant.site.siteId}?notice=value-saved`,
    });
    expect(await conversionRow(conversionId)).toEqual({
      value: 49.9,
      currency: 'EUR',
      awaiting_manual_input: false,
      capi_status: 'pending',
    });
    const sends = await db.pool.query(
      'SELECT platform, status FROM sends WHERE conversion_id = $1 ORDER BY platform',
      [conversionId],
    );
    expect(sends.rows).toEqual([
      { platform: 'meta', status: 'pending' },
      { platform: 'tiktok', status: 'pending' },
    ]);
    expect((await call(res.location!, { cookie })).text).toContain('The value was saved');

    const again = await call(`/dashboard/sites/${tenant.site.siteId}/conversions/${conversionId}/value`, {
      cookie,
      form: { _token: formTokenOf(page.text), value: '10', currency: 'USD' },
    });
    expect(again.status).toBe(409);
    expect((await conversionRow(conversionId)).value).toBe(49.9);
  });

  it('refuses a bad value or currency, shows why, and writes nothing', async () => {
    const cookie = await signIn();
    const { conversionId } = await waitingJoin(db.pool, tenant.site, newUser());
    const token = formTokenOf((await call(`/dashboard/sites/${tenant.site.siteId}`, { cookie })).text);
    const cases: Array<[string, string, RegExp]> = [
      ['0', 'USD', /greater than 0/],
      ['-5', 'USD', /greater than 0/],
      ['abc', 'USD', /greater than 0/],
      ['1e3', 'USD', /greater than 0/],
      ['', 'USD', /greater than 0/],
      ['0.00001', 'USD', /at least 0\.0001/],
      ['10000000000000', 'USD', /at most/],
      ['10', 'XXX', /ISO 4217/],
      ['10', '', /ISO 4217/],
    ];
    for (const [value, currency, why] of cases) {
      const res = await call(`/dashboard/sites/${tenant.site.siteId}/conversions/${conversionId}/value`, {
        cookie,
        form: { _token: token, value, currency },
      });
      expect(res.status, `${value} ${currency}`).toBe(400);
      expect(res.text).toMatch(why);
    }
    expect(await conversionRow(conversionId)).toMatchObject({ value: null, awaiting_manual_input: true });
    expect(await count(db.pool, 'sends WHERE conversion_id = $1', [conversionId])).toBe(0);
  });

  it("refuses a form without this session's token (another site cannot post it)", async () => {
    const cookie = await signIn();
    const { conversionId } = await waitingJoin(db.pool, tenant.site, newUser());
    const path = `/dashboard/sites/${tenant.site.siteId}/conversions/${conversionId}/value`;
    const otherSession = await signIn();
    const otherToken = formTokenOf((await call('/dashboard', { cookie: otherSession })).text);
    const forms: Record<string, string>[] = [
      { value: '10', currency: 'USD' },
      { _token: otherToken, value: '10', currency: 'USD' },
      { _token: 'x', value: '10', currency: 'USD' },
    ];
    for (const form of forms) {
      const res = await call(path, { cookie, form });
      expect(res.status).toBe(403);
    }
    expect(await conversionRow(conversionId)).toMatchObject({ awaiting_manual_input: true });
  });

  it("cannot reach another site's conversion through this site's address", async () => {
    const cookie = await signIn();
    const theirs = await waitingJoin(db.pool, rival.site, newUser());
    const token = formTokenOf((await call(`/dashboard/sites/${tenant.site.siteId}`, { cookie })).text);
    for (const id of [theirs.conversionId, 'not-a-uuid']) {
      const res = await call(`/dashboard/sites/${tenant.site.siteId}/conversions/${id}/value`, {
        cookie,
        form: { _token: token, value: '10', currency: 'USD' },
      });
      expect(res.status).toBe(404);
    }
    expect(await conversionRow(theirs.conversionId)).toMatchObject({
      awaiting_manual_input: true,
      value: null,
    });
  });
});

describe('retrying a failed send', () => {
  it("puts it back in the queue with a fresh budget, and refuses a sent one or another site's", async () => {
    const cookie = await signIn();
    const { conversionId } = await waitingJoin(db.pool, tenant.site, newUser());
    await db.pool.query(
      'UPDATE conversions SET awaiting_manual_input = false, value = 5, currency = $2 WHERE id = $1',
      [conversionId, 'USD'],
    );
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO sends (conversion_id, pixel_id, platform, event_id, status, attempts, last_error)
       SELECT $1::uuid, p.id, p.platform, 'cnv_' || $1::text, 'failed', 8, 'HTTP 400: invalid parameter' FROM pixels p WHERE p.site_id = $2 AND p.platform = 'meta'
       RETURNING id`,
      [conversionId, tenant.site.siteId],
    );
    const sendId = rows[0]!.id;
    const page = (await call(`/dashboard/sites/${tenant.site.siteId}`, { cookie })).text;
    expect(page).toContain('HTTP 400: invalid parameter');
    const token = formTokenOf(page);

    expect(
      (
        await call(`/dashboard/sites/${rival.site.siteId}/sends/${sendId}/retry`, {
          cookie,
          form: { _token: token },
        })
      ).status,
    ).toBe(404);
    const res = await call(`/dashboard/sites/${tenant.site.siteId}/sends/${sendId}/retry`, {
      cookie,
      form: { _token: token },
    });
    expect(res).toMatchObject({
      status: 303,
      location: `/dashboard/sites/${tenant.site.siteId}?notice=send-retried`,
    });
    expect(
      (await db.pool.query('SELECT status, attempts FROM sends WHERE id = $1', [sendId])).rows[0],
    ).toEqual({ status: 'pending', attempts: 0 });

    await db.pool.query(`UPDATE sends SET status = 'sent' WHERE id = $1`, [sendId]);
    const sent = await call(`/dashboard/sites/${tenant.site.siteId}/sends/${sendId}/retry`, {
      cookie,
      form: { _token: token },
    });
    expect(sent.status).toBe(409);
    expect((await db.pool.query('SELECT status FROM sends WHERE id = $1', [sendId])).rows[0].status).toBe(
      'sent',
    );
  });
});

describe('finding a Telegram user', () => {
  it('shows their leads, joins with the signals of the visit behind them, and conversions with their sends, without IP or User-Agent', async () => {
    const cookie = await signIn();
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    await db.pool.query(
      `INSERT INTO leads (site_id, telegram_user_id, external_user_id) VALUES ($1, $2, 'crm-42')`,
      [tenant.site.siteId, user],
    );
    const { conversionId } = await waitingJoin(db.pool, tenant.site, user);
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO sends (conversion_id, pixel_id, platform, event_id, status, attempts, last_error)
       SELECT $1::uuid, p.id, p.platform, 'cnv_' || $1::text, 'failed', 3, 'HTTP 400: expired token' FROM pixels p WHERE p.site_id = $2 AND p.platform = 'meta'
       RETURNING id`,
      [conversionId, tenant.site.siteId],
    );
    expect(rows).toHaveLength(1);
    await db.pool.query(
      `UPDATE conversions SET pii_warnings = ARRAY['pii.phone was dropped: <no country>'] WHERE id = $1`,
      [conversionId],
    );

    const res = await call(`/dashboard/leads?user=${user}`, { cookie });
    expect(res.status).toBe(200);
    const page = res.text;
    expect(page).toContain(`Telegram user ${user}`);
    expect(page).toContain('crm-42');
    expect(page).toContain('Main');
    expect(page).toContain('fbc, fbp, IP, User-Agent');
    expect(page).toContain('awaiting value');
    expect(page).toContain('meta 1234567890: failed (3 attempts)');
    expect(page).toContain('HTTP 400: expired token');
    // What of the PII was not sent, escaped like every value on the page.
    expect(page).toContain('not sent: pii.phone was dropped: &lt;no country&gt;');
    expect(page).toContain(conversionId);
    expect(page).not.toContain(VISIT.clientIp);
    expect(page).not.toContain(VISIT.userAgent);
  });

  it('says why a join was not credited to a visit', async () => {
    const cookie = await signIn();
    const user = newUser();
    await db.pool.query(
      `INSERT INTO memberships (channel_id, telegram_user_id, kind, occurred_at) VALUES ($1, $2, 'join', now())`,
      [tenant.site.channels.main, user],
    );
    const page = (await call(`/dashboard/leads?user=${user}`, { cookie })).text;
    expect(page).toContain(
      '<span class="warn">no</span>: <span class="muted">not through a Capigram link: the channel&#39;s own link, search, a forward or another tool&#39;s link</span>',
    );
  });

  it('says when nothing is known, refuses what is not a user id, and is for the signed-in only', async () => {
    const cookie = await signIn();
    const unknown = await call(`/dashboard/leads?user=${newUser()}`, { cookie });
    expect(unknown.status).toBe(200);
    expect(unknown.text).toContain('Nothing is known about this user');
    for (const bad of ['', 'abc', '-5', '0', '12.5', '99999999999999999', '<b>1</b>']) {
      const res = await call(`/dashboard/leads?user=${encodeURIComponent(bad)}`, { cookie });
      expect(res.status, bad).toBe(400);
      expect(res.text).not.toContain('<b>1</b>');
    }
    expect(await call(`/dashboard/leads?user=1`)).toMatchObject({
      status: 303,
      location: '/dashboard/login',
    });
  });

  it("erases the person's data on a site from their page, only once the box is ticked, and with the form token", async () => {
    const cookie = await signIn();
    const user = newUser();
    const { visitId } = await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    await db.pool.query(
      `INSERT INTO leads (site_id, telegram_user_id, external_user_id) VALUES ($1, $2, 'crm-77')`,
      [tenant.site.siteId, user],
    );
    const { conversionId } = await waitingJoin(db.pool, tenant.site, user);
    const page = await call(`/dashboard/leads?user=${user}`, { cookie });
    const action = `/dashboard/sites/${tenant.site.siteId}/leads/${user}/erase`;
    expect(page.text).toContain(`action="${action}"`);
    expect(page.text).toMatch(/name="confirm" value="yes" required/);
    const token = formTokenOf(page.text);

    // Not confirmed, or without the token: nothing happens.
    const unticked = await call(action, { cookie, form: { _token: token } });
    expect(unticked.status).toBe(400);
    expect(unticked.text).toContain('Tick the box');
    expect((await call(action, { cookie, form: { confirm: 'yes' } })).status).toBe(403);
    expect(await count(db.pool, 'leads WHERE telegram_user_id = $1', [user])).toBe(1);

    const done = await call(action, { cookie, form: { _token: token, confirm: 'yes' } });
    expect(done.status).toBe(303);
    expect(done.location).toBe(`/dashboard/leads?user=${user}&erased=${tenant.site.siteId}`);
    const after = await call(done.location!, { cookie });
    expect(after.text).toContain('was erased');
    expect(after.text).toContain('Nothing is known about this user');
    expect(after.text).not.toContain('crm-77');
    expect(
      (await db.pool.query('SELECT client_ip, fbc FROM visits WHERE id = $1', [visitId])).rows[0],
    ).toEqual({ client_ip: null, fbc: null });
    expect(
      Number(
        (await db.pool.query('SELECT telegram_user_id FROM conversions WHERE id = $1', [conversionId]))
          .rows[0].telegram_user_id,
      ),
    ).toBeLessThan(0);
    expect(
      (await db.pool.query(`SELECT actor FROM erasures WHERE site_id = $1`, [tenant.site.siteId])).rows,
    ).toEqual([{ actor: 'dashboard' }]);

    // Again: nothing left on that site; another site's address cannot reach it either.
    const again = await call(action, { cookie, form: { _token: token, confirm: 'yes' } });
    expect(again.status).toBe(404);
    expect(again.text).toContain('erased already');
    expect(
      (
        await call(`/dashboard/sites/${tenant.site.siteId}/leads/0/erase`, {
          cookie,
          form: { _token: token, confirm: 'yes' },
        })
      ).status,
    ).toBe(400);
  });
});

describe('retrying every failed send of a site', () => {
  /** A failed send of the site's pixel on `platform` for a conversion no longer waiting. */
  async function failedSend(
    site: Tenant['site'],
    platform: 'meta' | 'tiktok',
    conversionId?: string,
  ): Promise<{ sendId: string; conversionId: string }> {
    const id = conversionId ?? (await waitingJoin(db.pool, site, newUser())).conversionId;
    await db.pool.query(
      `UPDATE conversions SET awaiting_manual_input = false, value = 5, currency = 'USD', capi_status = 'failed' WHERE id = $1`,
      [id],
    );
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO sends (conversion_id, pixel_id, platform, event_id, status, attempts, last_error)
       SELECT $1::uuid, p.id, p.platform, 'cnv_' || $1::text, 'failed', 8, 'HTTP 401: token expired' FROM pixels p WHERE p.site_id = $2 AND p.platform = $3
       RETURNING id`,
      [id, site.siteId, platform],
    );
    return { sendId: rows[0]!.id, conversionId: id };
  }

  it("puts back the failed sends of the site's active pixels only, and refreshes their conversions' status", async () => {
    const cookie = await signIn();
    const owner = await seedTenant(db.pool, t.deps.box, { platforms: ['meta', 'tiktok'] });
    const a = await failedSend(owner.site, 'meta');
    const b = await failedSend(owner.site, 'tiktok');
    const sent = await failedSend(owner.site, 'meta');
    await db.pool.query(`UPDATE sends SET status = 'sent' WHERE id = $1`, [sent.sendId]);
    const theirs = await failedSend(rival.site, 'meta');
    // A failed send of a pixel switched off stays as it is: retrying it would only skip it.
    const off = await seedTenant(db.pool, t.deps.box, { platforms: ['meta'] });
    const inactive = await failedSend(off.site, 'meta');
    await db.pool.query(`UPDATE pixels SET active = false WHERE site_id = $1`, [off.site.siteId]);

    const page = await call(`/dashboard/sites/${owner.site.siteId}`, { cookie });
    expect(page.text).toContain('Retry every failed send');
    const res = await call(`/dashboard/sites/${owner.site.siteId}/sends/retry-failed`, {
      cookie,
      form: { _token: formTokenOf(page.text) },
    });
    expect(res).toMatchObject({
      status: 303,
      location: `/dashboard/sites/${owner.site.siteId}?notice=failed-retried`,
    });

    const status = async (sendId: string) =>
      (await db.pool.query('SELECT status, attempts FROM sends WHERE id = $1', [sendId])).rows[0];
    expect(await status(a.sendId)).toEqual({ status: 'pending', attempts: 0 });
    expect(await status(b.sendId)).toEqual({ status: 'pending', attempts: 0 });
    expect(await status(sent.sendId)).toEqual({ status: 'sent', attempts: 8 });
    expect(await status(theirs.sendId)).toEqual({ status: 'failed', attempts: 8 });
    expect(
      (
        await call(`/dashboard/sites/${off.site.siteId}/sends/retry-failed`, {
          cookie,
          form: { _token: formTokenOf(page.text) },
        })
      ).status,
    ).toBe(303);
    expect(await status(inactive.sendId)).toEqual({ status: 'failed', attempts: 8 });
    for (const id of [a.conversionId, b.conversionId])
      expect((await conversionRow(id)).capi_status).toBe('pending');
    expect((await conversionRow(theirs.conversionId)).capi_status).toBe('failed');
  });

  it('needs the form token', async () => {
    const cookie = await signIn();
    const f = await failedSend(tenant.site, 'tiktok');
    expect(
      (await call(`/dashboard/sites/${tenant.site.siteId}/sends/retry-failed`, { cookie, form: {} })).status,
    ).toBe(403);
    expect((await db.pool.query('SELECT status FROM sends WHERE id = $1', [f.sendId])).rows[0].status).toBe(
      'failed',
    );
  });
});

describe('a conversion whose pixels disagree', () => {
  it('is partially sent on the site page and the user page, each send naming its pixel', async () => {
    const cookie = await signIn();
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    const {
      rows: [c],
    } = await db.pool.query<{ id: string }>(
      `INSERT INTO conversions (site_id, channel_id, telegram_user_id, event_type, value, currency, event_time, attributed_at, source, capi_status)
       VALUES ($1, $2, $3, 'Purchase', 9, 'EUR', now(), now(), 'api', 'failed') RETURNING id`,
      [tenant.site.siteId, tenant.site.channels.main, user],
    );
    await db.pool.query(
      `INSERT INTO sends (conversion_id, pixel_id, platform, event_id, status, attempts, last_error, sent_at)
       SELECT $1::uuid, p.id, p.platform, 'cnv_' || $1::text, CASE p.platform WHEN 'meta' THEN 'sent' ELSE 'failed' END, 1,
              CASE p.platform WHEN 'tiktok' THEN 'HTTP 401: bad token' END, CASE p.platform WHEN 'meta' THEN now() END
       FROM pixels p WHERE p.site_id = $2`,
      [c!.id, tenant.site.siteId],
    );
    const journey = (await call(`/dashboard/leads?user=${user}`, { cookie })).text;
    expect(journey).toContain('<td>partially sent</td>');
    expect(journey).toContain('meta 1234567890: sent');
    expect(journey).toContain('tiktok CTIKTOKPIXEL01: failed');
    const site = (await call(`/dashboard/sites/${tenant.site.siteId}`, { cookie })).text;
    expect(site).toContain('<td data-label="status">partially sent</td>');
    expect(site).toContain('<td>tiktok CTIKTOKPIXEL01</td>');
    // Once the failed pixel delivers too, the conversion is sent.
    await db.pool.query(`UPDATE sends SET status = 'sent' WHERE conversion_id = $1`, [c!.id]);
    await db.pool.query(`UPDATE conversions SET capi_status = 'sent' WHERE id = $1`, [c!.id]);
    expect((await call(`/dashboard/leads?user=${user}`, { cookie })).text).not.toContain('partially sent');
  });
});

describe('a conversion without a channel', () => {
  it('says it came through a bot entry, not that its channel was deleted', async () => {
    const bearer = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    const { conversionId } = await waitingJoin(db.pool, tenant.site, newUser());
    const rowOf = (text: string) => {
      const row = text.slice(text.lastIndexOf('<tr>', text.lastIndexOf(conversionId)));
      return row.slice(0, row.indexOf('</tr>'));
    };
    const before = await call(`/dashboard/sites/${tenant.site.siteId}`, { headers: bearer });
    expect(rowOf(before.text)).toContain('VIP');
    // A Mini App's or a bot's conversion has no channel at all.
    await db.pool.query('UPDATE conversions SET channel_id = NULL WHERE id = $1', [conversionId]);
    const after = await call(`/dashboard/sites/${tenant.site.siteId}`, { headers: bearer });
    expect(rowOf(after.text)).toContain('none (bot entry)');
    expect(rowOf(after.text)).not.toContain('deleted');
  });
});
