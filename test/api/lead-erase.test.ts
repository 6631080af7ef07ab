// DELETE /api/v1/leads/{telegramUserId}: a person's data erased on one site, in one transaction.
import { beforeAll, describe, expect, it } from 'vitest';
import { retrySend } from '../../backend/delivery/admin.js';
import { ERASED_SKIP_REASON } from '../../backend/domain/erasure/erase-lead.js';
import {
  CONVERSION_PERSON_FIELDS,
  LEAD_PERSON_FIELDS,
  VISIT_RAW_FIELDS,
} from '../../backend/domain/erasure/fields.js';
import type { TestDatabase } from '../harness/db.js';
import type { TestApp } from '../harness/app.js';
import {
  type ApiClient,
  apiWorld,
  attributedJoin,
  count,
  newUser,
  seedTenant,
  type Tenant,
} from './support.js';

const world = apiWorld({ tenant: { sites: 2, platforms: ['meta', 'tiktok'] } });
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;
let rival: Tenant;

beforeAll(async () => {
  ({ db, t, api, tenant } = world);
  rival = await seedTenant(db.pool, t.deps.box);
});

// Spelled out here rather than read from fields.ts: the test fails if a field drops off the list.
const VISIT_COLUMNS = [
  'client_ip',
  'user_agent',
  'href',
  'landing_page',
  'referrer',
  'fbc',
  'fbp',
  'gclid',
  'gbraid',
  'wbraid',
  'ttclid',
  'sccid',
  'ttp',
  'scid',
];
const FULL_VISIT = `client_ip = '198.51.100.9', user_agent = 'Mozilla/5.0 Erase', href = 'https://shop.example.com/l?email=a@b.c&gclid=G1',
  landing_page = 'https://shop.example.com/l', referrer = 'https://news.example.org/a', fbc = 'fb.1.1.fbc', fbp = 'fb.1.1.fbp',
  gclid = 'G1', gbraid = 'GB1', wbraid = 'WB1', ttclid = 'TT1', sccid = 'SC1', ttp = 'TTP1', scid = 'SCID1', utm_source = 'meta', utm_campaign = 'spring'`;

/** A person with everything Capigram can hold about them on the tenant's first site. */
async function person() {
  const user = newUser();
  const site = tenant.site;
  const { visitId } = await attributedJoin(db.pool, {
    siteId: site.siteId,
    channelId: site.channels.main,
    telegramUserId: user,
  });
  await db.pool.query(`UPDATE visits SET ${FULL_VISIT} WHERE id = $1`, [visitId]);
  // A second page view of the same browser, not linked to anything else.
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO visits (site_id, temp_id, session_id, client_ip, user_agent, href, fbp)
     SELECT site_id, temp_id, gen_random_uuid(), '198.51.100.9', 'Mozilla/5.0 Erase', 'https://shop.example.com/p2', 'fb.1.1.fbp' FROM visits WHERE id = $1 RETURNING id`,
    [visitId],
  );
  const sameBrowser = rows[0]!.id;
  const first = await api.post(
    '/events/conversion',
    {
      telegramUserId: user,
      eventType: 'Lead',
      channelId: site.channels.main,
      externalUserId: 'crm-42',
      pii: { email: 'ann@example.com', phone: '+44 20 7946 0958', firstName: 'Ann', lastName: 'Lee' },
      clientIp: '198.51.100.10',
      userAgent: 'Mozilla/5.0 Api',
      eventSourceUrl: 'https://shop.example.com/thanks',
    },
    { key: site.siteKey },
  );
  const purchase = await api.post(
    '/events/conversion',
    {
      telegramUserId: user,
      eventType: 'Purchase',
      value: 30,
      currency: 'EUR',
      channelId: site.channels.main,
      pii: { email: 'ann@example.com' },
    },
    { key: site.siteKey },
  );
  expect(first.status).toBe(201);
  expect(purchase.status).toBe(201);
  const conversions = [first.body.conversionId as string, purchase.body.conversionId as string];
  return { user, visitId, sameBrowser, conversions };
}

/** What a report sums on a site: none of it may change when a person is erased. */
async function totals(siteId: string) {
  const { rows } = await db.pool.query(
    `SELECT (SELECT count(*)::int FROM visits WHERE site_id = $1) AS visits,
            (SELECT count(*)::int FROM visits WHERE site_id = $1 AND utm_source = 'meta') AS meta_visits,
            (SELECT count(*)::int FROM memberships m JOIN channels ch ON ch.id = m.channel_id WHERE ch.site_id = $1 AND m.kind = 'join' AND m.attributed) AS attributed_joins,
            (SELECT count(*)::int FROM conversions WHERE site_id = $1) AS conversions,
            (SELECT count(DISTINCT telegram_user_id)::int FROM conversions WHERE site_id = $1) AS converting_users,
            (SELECT count(*)::int FROM leads WHERE site_id = $1) AS leads,
            (SELECT COALESCE(sum(value), 0)::text FROM conversions WHERE site_id = $1) AS value,
            (SELECT count(*)::int FROM sends x JOIN pixels p ON p.id = x.pixel_id WHERE p.site_id = $1) AS sends`,
    [siteId],
  );
  return rows[0];
}

describe('erasure', () => {
  it('erases every listed field, table by table, keeps report totals and answers 404 afterwards', async () => {
    const p = await person();
    const bystander = await person();
    // One of the person's sends was delivered already, one failed: the first stays, the second is cancelled.
    const { rows: sends } = await db.pool.query<{ id: string }>(
      'SELECT id FROM sends WHERE conversion_id = $1 ORDER BY id',
      [p.conversions[0]],
    );
    expect(sends.length).toBe(2);
    await db.pool.query(`UPDATE sends SET status = 'sent', sent_at = now() WHERE id = $1`, [sends[0]!.id]);
    await db.pool.query(`UPDATE sends SET status = 'failed', last_error = 'boom' WHERE id = $1`, [
      sends[1]!.id,
    ]);
    const before = await totals(tenant.site.siteId);

    const res = await fetch(`${t.url}/api/v1/leads/${p.user}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${tenant.site.siteKey}` },
    });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');

    // visits: both the attributed visit and the other page view of the same browser.
    const { rows: visits } = await db.pool.query(`SELECT * FROM visits WHERE id = ANY($1::uuid[])`, [
      [p.visitId, p.sameBrowser],
    ]);
    expect(visits.length).toBe(2);
    for (const v of visits) {
      for (const col of [...VISIT_COLUMNS, ...Object.keys(VISIT_RAW_FIELDS)])
        expect(v[col], `visits.${col}`).toBeNull();
      expect(v.utm_source).toBe(p.visitId === v.id ? 'meta' : null); // campaigns stay
    }
    // The browser is no longer findable by its id: a later visit of it is a stranger.
    const {
      rows: [bystanderVisit],
    } = await db.pool.query('SELECT temp_id FROM visits WHERE id = $1', [bystander.visitId]);
    expect(
      await count(db.pool, 'visits WHERE temp_id = (SELECT temp_id FROM visits WHERE id = $1)', [p.visitId]),
    ).toBe(2);
    expect(visits[0]!.temp_id).not.toBe(bystanderVisit.temp_id);

    // conversions: PII digests, external id, raw context; the Telegram user id replaced.
    const { rows: conv } = await db.pool.query(`SELECT * FROM conversions WHERE id = ANY($1::uuid[])`, [
      p.conversions,
    ]);
    expect(conv.length).toBe(2);
    for (const c of conv) {
      expect(c.pii_hashed).toEqual({});
      for (const col of [
        'external_user_id',
        'client_ip',
        'user_agent',
        'event_source_url',
        'api_visit_override',
      ])
        expect(c[col], `conversions.${col}`).toBeNull();
      for (const col of Object.keys(CONVERSION_PERSON_FIELDS)) expect([null, {}]).toContainEqual(c[col]);
      expect(Number(c.telegram_user_id)).toBeLessThan(0);
    }
    expect(conv.find((c) => c.event_type === 'Purchase')!.value).toBe(30);
    // leads, memberships, invitations: no row names the user any more.
    expect(await count(db.pool, 'leads WHERE telegram_user_id = $1', [p.user])).toBe(0);
    expect(await count(db.pool, 'conversions WHERE telegram_user_id = $1', [p.user])).toBe(0);
    expect(await count(db.pool, 'memberships WHERE telegram_user_id = $1', [p.user])).toBe(0);
    expect(await count(db.pool, 'invitations WHERE used_by = $1', [p.user])).toBe(0);
    const { rows: lead } = await db.pool.query(
      `SELECT * FROM leads WHERE site_id = $1 AND telegram_user_id = $2`,
      [tenant.site.siteId, conv[0]!.telegram_user_id],
    );
    expect(lead.length).toBe(1);
    for (const col of ['external_user_id', ...Object.keys(LEAD_PERSON_FIELDS)])
      expect(lead[0]![col]).toBeNull();

    // sends: the delivered one stays, every other one is cancelled with the reason, and stays so.
    const { rows: after } = await db.pool.query<{ id: string; status: string; skip_reason: string | null }>(
      'SELECT id, status, skip_reason FROM sends WHERE conversion_id = ANY($1::uuid[]) ORDER BY id',
      [p.conversions],
    );
    expect(after.find((s) => s.id === sends[0]!.id)).toMatchObject({ status: 'sent', skip_reason: null });
    const cancelled = after.filter((s) => s.id !== sends[0]!.id);
    expect(cancelled.length).toBe(3);
    for (const s of cancelled)
      expect(s).toMatchObject({ status: 'skipped', skip_reason: ERASED_SKIP_REASON });
    await expect(retrySend(db.pool, cancelled[0]!.id)).rejects.toThrow(/erased/);
    const { rows: statuses } = await db.pool.query(
      'SELECT capi_status FROM conversions WHERE id = ANY($1::uuid[]) ORDER BY id',
      [p.conversions],
    );
    expect(statuses.map((s) => s.capi_status).sort()).toEqual(['sent', 'skipped']);

    // Report totals are what they were, distinct users included.
    expect(await totals(tenant.site.siteId)).toEqual(before);

    // The bystander on the same site keeps everything.
    const {
      rows: [kept],
    } = await db.pool.query('SELECT client_ip, fbc, href FROM visits WHERE id = $1', [bystander.visitId]);
    expect(kept).toEqual({
      client_ip: '198.51.100.9',
      fbc: 'fb.1.1.fbc',
      href: 'https://shop.example.com/l?email=a@b.c&gclid=G1',
    });
    expect((await api.get(`/leads/${bystander.user}`, { key: tenant.site.siteKey })).status).toBe(200);

    // The audit row says who, where, when and how much, and nothing that identifies the person.
    const { rows: audit } = await db.pool.query('SELECT * FROM erasures WHERE site_id = $1', [
      tenant.site.siteId,
    ]);
    expect(audit).toEqual([
      expect.objectContaining({
        account_id: tenant.accountId,
        actor: `api-key:${tenant.site.siteKeyId}`,
        leads: 1,
        visits: 2,
        conversions: 2,
        memberships: 1,
        invitations: 1,
        sends_cancelled: 3,
      }),
    ]);
    const text = JSON.stringify(audit[0]);
    for (const identifier of [String(p.user), p.visitId, ...p.conversions, 'crm-42', '198.51.100'])
      expect(text).not.toContain(identifier);

    // Idempotent: the lead is gone for GET, and a second erasure is a 404 that changes nothing.
    expect((await api.get(`/leads/${p.user}`, { key: tenant.site.siteKey })).body).toMatchObject({
      status: 404,
      code: 'LEAD_NOT_FOUND',
    });
    const again = await api.delete(`/leads/${p.user}`, { key: tenant.site.siteKey });
    expect(again).toMatchObject({ status: 404, body: { code: 'LEAD_NOT_FOUND' } });
    expect(again.headers.get('content-type')).toContain('application/problem+json');
    expect(await count(db.pool, 'erasures')).toBe(1);
  });

  it("refuses another tenant's lead, and a site key another site's, without erasing anything", async () => {
    const p = await person();
    expect((await api.delete(`/leads/${p.user}`, { key: rival.accountKey })).body.code).toBe(
      'LEAD_NOT_FOUND',
    );
    expect(
      (await api.delete(`/leads/${p.user}?siteId=${tenant.site.siteId}`, { key: rival.accountKey })).body
        .code,
    ).toBe('UNKNOWN_WEBSITE');
    expect((await api.delete(`/leads/${p.user}`, { key: rival.site.siteKey })).status).toBe(404);
    expect((await api.delete(`/leads/${p.user}`, { key: tenant.sites[1]!.siteKey })).status).toBe(404);
    expect(
      (await api.delete(`/leads/${p.user}?siteId=${tenant.site.siteId}`, { key: tenant.sites[1]!.siteKey }))
        .body.code,
    ).toBe('FORBIDDEN');
    expect((await api.delete(`/leads/${p.user}`, {})).status).toBe(401);
    expect(await count(db.pool, 'visits WHERE id = $1 AND client_ip IS NOT NULL', [p.visitId])).toBe(1);
    expect((await api.get(`/leads/${p.user}`, { key: tenant.site.siteKey })).status).toBe(200);
    // The account's own key erases it (the one site the user is on).
    expect((await api.delete(`/leads/${p.user}`, { key: tenant.accountKey })).status).toBe(204);
    expect((await api.get(`/leads/${p.user}`, { key: tenant.accountKey })).status).toBe(404);
  });

  it('an account key names the site when the user is known on several; each site is erased on its own', async () => {
    const user = newUser();
    for (const s of tenant.sites) {
      expect(
        (
          await api.post(
            '/events/conversion',
            { telegramUserId: user, eventType: 'Lead', channelId: s.channels.main, fbp: 'fb.1.1.1' },
            { key: s.siteKey },
          )
        ).status,
      ).toBe(201);
    }
    expect((await api.delete(`/leads/${user}`, { key: tenant.accountKey })).body.code).toBe('SITE_REQUIRED');
    expect(
      (await api.delete(`/leads/${user}?websiteId=${tenant.sites[1]!.websiteId}`, { key: tenant.accountKey }))
        .status,
    ).toBe(204);
    expect((await api.get(`/leads/${user}`, { key: tenant.sites[0]!.siteKey })).status).toBe(200);
    expect((await api.get(`/leads/${user}`, { key: tenant.sites[1]!.siteKey })).status).toBe(404);
    // Now only one site knows the user: the account key needs no site.
    expect((await api.delete(`/leads/${user}`, { key: tenant.accountKey })).status).toBe(204);
  });

  it('a later event for the same user starts a new lead that inherits nothing', async () => {
    const p = await person();
    expect((await api.delete(`/leads/${p.user}`, { key: tenant.site.siteKey })).status).toBe(204);
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: p.user, eventType: 'Lead', channelId: tenant.site.channels.main },
      { key: tenant.site.siteKey },
    );
    expect(res.status).toBe(201);
    expect(res.body.deduplicated).toBe(false);
    const lead = await api.get(`/leads/${p.user}`, { key: tenant.site.siteKey });
    expect(lead.body.conversions).toHaveLength(1);
    expect(lead.body.externalUserId).toBeUndefined();
  });

  it("runs in turn with the same user's events (the lead lock): every answer is 201 or 204, and what the erasure saw is gone", async () => {
    const p = await person();
    const events = Array.from({ length: 12 }, (_, i) =>
      api.post(
        '/events/conversion',
        {
          telegramUserId: p.user,
          eventType: 'Custom',
          customEventName: `e${i}`,
          channelId: tenant.site.channels.main,
          pii: { email: `x${i}@example.com` },
        },
        { key: tenant.site.siteKey },
      ),
    );
    const erase = api.delete(`/leads/${p.user}`, { key: tenant.site.siteKey });
    const answers = await Promise.all([...events, erase]);
    expect(answers.slice(0, -1).map((a) => a.status)).toEqual(Array(12).fill(201));
    expect(answers.at(-1)!.status).toBe(204);
    // Events the erasure came after are anonymised; those after it start a new lead: no row that
    // still names the user holds a digest from before the erasure.
    const { rows } = await db.pool.query(
      `SELECT custom_event_name, pii_hashed FROM conversions WHERE site_id = $1 AND telegram_user_id = $2`,
      [tenant.site.siteId, p.user],
    );
    for (const r of rows) expect(r.custom_event_name).toMatch(/^e\d+$/);
    const { rows: erased } = await db.pool.query(
      `SELECT count(*)::int AS n FROM conversions WHERE id = ANY($1::uuid[]) AND telegram_user_id < 0 AND pii_hashed = '{}'`,
      [p.conversions],
    );
    expect(erased[0].n).toBe(2);
  });

  it('is malformed input a 400, never a 500', async () => {
    expect((await api.delete('/leads/0', { key: tenant.site.siteKey })).body.code).toBe('VALIDATION_FAILED');
    expect((await api.delete('/leads/-5', { key: tenant.site.siteKey })).body.code).toBe('VALIDATION_FAILED');
    expect((await api.delete('/leads/12?siteId=%00', { key: tenant.accountKey })).status).toBe(400);
  });
});
