// Signal fidelity end to end, through the real worker to the strict fakes: browserless business
// events sent as non-website events, phones read only in a known country, one identity per lead,
// TikTok's _ttp and Snapchat's _scid, and the Meta PageView's event id handed to the page.
import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Fakes } from '../fakes/index.js';
import type { TestDatabase } from '../harness/db.js';
import type { TestApp } from '../harness/app.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { updateSite } from '../../backend/domain/admin/sites.js';
import { leadJourney } from '../../backend/domain/dashboard/lead-journey.js';
import { recordConversion } from '../../backend/domain/outbox/conversion-record.js';
import { withTx } from '../../backend/db/pool.js';
import {
  type ApiClient,
  apiWorld,
  insertVisit,
  META_PIXEL,
  newUser,
  type Tenant,
  TIKTOK_PIXEL,
} from './support.js';

const SNAP_PIXEL = 'snap-pixel-signal';
const world = apiWorld({ tenant: { platforms: ['meta', 'tiktok'], sites: 2 }, fakes: true });
let fakes: Fakes;
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

beforeAll(async () => {
  ({ db, t, api, tenant, fakes } = world);
  for (const s of tenant.sites)
    await addPixel(
      { pool: db.pool, box: t.deps.box },
      { platform: 'snapchat', siteId: s.siteId, pixelId: SNAP_PIXEL, accessToken: 'snap-test-token' },
    );
  await updateSite(db.pool, { siteId: tenant.site.siteId, defaultCountry: 'de' });
});

async function eventually<T>(what: string, find: () => T | undefined): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const found = find();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`never received: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const meta = (eventId: string) =>
  eventually(
    `Meta ${eventId}`,
    () => fakes.meta.events(META_PIXEL).find((e) => e.event.event_id === eventId)?.event,
  );
const tiktok = (eventId: string) =>
  eventually(
    `TikTok ${eventId}`,
    () => fakes.tiktok.events(TIKTOK_PIXEL).find((e) => e.event.event_id === eventId)?.event,
  );
const snap = (eventId: string) =>
  eventually(
    `Snapchat ${eventId}`,
    () => fakes.snapchat.events(SNAP_PIXEL).find((e) => e.event.event_id === eventId)?.event,
  );

describe('business events without a browser', () => {
  it('a CRM Lead with only an e-mail reaches Meta, TikTok and Snapchat as a non-website event', async () => {
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: newUser(),
        websiteId: tenant.site.websiteId,
        channelId: tenant.site.channels.main,
        eventType: 'Lead',
        pii: { email: '\tAnn@Example.com\n' },
      },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(201);
    expect(res.body.dispatched).toBe(true);
    const id = `cnv_${res.body.conversionId}`;
    const m = await meta(id);
    expect(m).toMatchObject({
      event_name: 'Lead',
      action_source: 'system_generated',
      user_data: { em: [sha('ann@example.com')] },
    });
    expect(m.event_source_url).toBeUndefined();
    expect(m.user_data.client_user_agent).toBeUndefined();
    const tt = await tiktok(id);
    expect(tt).toMatchObject({ event: 'Lead', user: { email: sha('ann@example.com') } });
    expect(tt.page).toBeUndefined();
    const s = await snap(id);
    expect(s).toMatchObject({
      event_name: 'SIGN_UP',
      action_source: 'OFFLINE',
      user_data: { em: [sha('ann@example.com')] },
    });
  });
});

describe('phones are read in a known country, never a guessed one', () => {
  it("a national number takes the site's default country", async () => {
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: newUser(),
        websiteId: tenant.site.websiteId,
        channelId: tenant.site.channels.main,
        eventType: 'Lead',
        pii: { phone: '01512 3456789' },
      },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(201);
    expect(res.body.piiWarnings).toBeUndefined();
    const id = `cnv_${res.body.conversionId}`;
    expect((await meta(id)).user_data.ph).toEqual([sha('4915123456789')]);
    expect((await tiktok(id)).user?.phone).toBe(sha('+4915123456789'));
  });

  it("without one it is dropped, with a warning in the answer and in the lead journey's sends", async () => {
    const other = tenant.sites[1]!;
    const user = newUser();
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        websiteId: other.websiteId,
        channelId: other.channels.main,
        eventType: 'Lead',
        pii: { phone: '(201) 555-0123', email: 'bob@example.com' },
      },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(201);
    expect(res.body.piiWarnings).toEqual([expect.stringContaining('pii.phone was dropped')]);
    expect(res.body.warning).toContain('pii.phone was dropped');
    const id = `cnv_${res.body.conversionId}`;
    const m = await meta(id);
    expect(m.user_data.ph).toBeUndefined();
    expect(m.user_data.em).toEqual([sha('bob@example.com')]);
    const journey = await leadJourney(db.pool, user);
    const shown = journey.conversions.find((c) => c.conversionId === res.body.conversionId)!;
    expect(shown.sends).toHaveLength(3);
    expect(shown.piiWarnings).toEqual([expect.stringContaining('pii.phone was dropped')]);
  });
});

describe('one identity per lead', () => {
  it('a join and a later Purchase share every external id; the Purchase adds the CRM id to the Telegram one', async () => {
    const user = newUser();
    const visitId = await insertVisit(db.pool, tenant.site.siteId);
    const now = new Date();
    const join = await withTx(db.pool, (tx) =>
      recordConversion(
        tx,
        {
          siteId: tenant.site.siteId,
          channelId: tenant.site.channels.main,
          telegramUserId: user,
          visitId,
          eventType: 'Subscribe',
          eventTime: now,
          attributedAt: now,
          receivedAt: now,
          source: 'webhook',
        },
        true,
      ),
    );
    const purchase = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Purchase', value: 10, currency: 'EUR', externalUserId: ' CRM-9 ' },
      { key: tenant.accountKey },
    );
    expect(purchase.status).toBe(201);
    const joinEvent = await meta(`cnv_${join.conversionId}`);
    const purchaseEvent = await meta(`cnv_${purchase.body.conversionId}`);
    expect(joinEvent.action_source).toBe('website');
    // The join carries the Telegram id, and the CRM id too when it is known by the time it is sent.
    expect(joinEvent.user_data.external_id).toContain(sha(String(user)));
    expect(purchaseEvent.user_data.external_id).toEqual([sha('crm-9'), sha(String(user))]);
    for (const id of joinEvent.user_data.external_id as string[])
      expect(purchaseEvent.user_data.external_id).toContain(id);
    // A later event that names no CRM id still carries it: it is the lead's.
    const lead = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'CompleteRegistration' },
      { key: tenant.accountKey },
    );
    expect((await meta(`cnv_${lead.body.conversionId}`)).user_data.external_id).toEqual([
      sha('crm-9'),
      sha(String(user)),
    ]);
    expect((await tiktok(`cnv_${lead.body.conversionId}`)).user?.external_id).toEqual([
      sha('crm-9'),
      sha(String(user)),
    ]);
  });

  it('a site that reports Telegram joins as chat sends them as chat', async () => {
    const other = tenant.sites[1]!;
    await updateSite(db.pool, { siteId: other.siteId, telegramActionSource: 'chat' });
    const visitId = await insertVisit(db.pool, other.siteId);
    const now = new Date();
    const join = await withTx(db.pool, (tx) =>
      recordConversion(
        tx,
        {
          siteId: other.siteId,
          channelId: other.channels.main,
          telegramUserId: newUser(),
          visitId,
          eventType: 'Subscribe',
          eventTime: now,
          attributedAt: now,
          receivedAt: now,
          source: 'webhook',
        },
        true,
      ),
    );
    await api.post(
      '/events/conversion',
      {
        telegramUserId: newUser(),
        websiteId: other.websiteId,
        channelId: other.channels.main,
        eventType: 'Lead',
        pii: { email: 'wake@example.com' },
      },
      { key: tenant.accountKey },
    );
    expect((await meta(`cnv_${join.conversionId}`)).action_source).toBe('chat');
    expect((await snap(`cnv_${join.conversionId}`)).action_source).toBe('OFFLINE');
  });
});

describe('the landing page', () => {
  it("track/init stores _ttp and _scid, sends them, and answers the Meta PageView's event_id", async () => {
    const domain = (
      await db.pool.query<{ domains: string[] }>('SELECT domains FROM sites WHERE id = $1', [
        tenant.site.siteId,
      ])
    ).rows[0]!.domains[0]!;
    const res = await fetch(`${t.url}/backend/track/init`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        origin: `https://${domain}`,
        'x-capigram-client-ip': '203.0.113.50',
      },
      body: JSON.stringify({
        websiteId: tenant.site.websiteId,
        tempId: crypto.randomUUID(),
        sessionId: crypto.randomUUID(),
        visitRequestId: crypto.randomUUID(),
        href: `https://${domain}/landing?fbclid=IwAR-page`,
        referrer: 'https://l.facebook.com/',
        userAgent: 'Mozilla/5.0 (X11) Signal',
        ttp: '2Qx_ttp-Cookie.1',
        scid: 'abcd-scid-0001',
      }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { visitId: string; pageViewEventId: string | null };
    expect(body.pageViewEventId).toBe(`pv_${body.visitId}`);
    const m = await meta(body.pageViewEventId!);
    expect(m).toMatchObject({
      event_name: 'PageView',
      action_source: 'website',
      referrer_url: 'https://l.facebook.com/',
    });
    // No fbc was sent: it is built from the fbclid in the page's URL.
    expect(m.user_data.fbc).toMatch(/^fb\.1\.\d{13}\.IwAR-page$/);
    expect((await tiktok(body.pageViewEventId!)).user?.ttp).toBe('2Qx_ttp-Cookie.1');
    expect((await snap(body.pageViewEventId!)).user_data.sc_cookie1).toBe('abcd-scid-0001');
  });
});

describe('an ad click on /r/ (no page of the site was seen)', () => {
  it("reports the site's own URL as the page, never Capigram's /r/ URL, for the PageView and the join", async () => {
    const site = tenant.sites[1]!;
    const [domain] = (
      await db.pool.query<{ domains: string[] }>('SELECT domains FROM sites WHERE id = $1', [site.siteId])
    ).rows[0]!.domains;
    const click = async () => {
      // A link in the channel's pool, as the refill job leaves them.
      await db.pool.query(
        "INSERT INTO invitations (channel_id, invite_link, expires_at) VALUES ($1, $2, now() + interval '1 day')",
        [site.channels.main, `https://t.me/+signal${crypto.randomUUID().slice(0, 12)}`],
      );
      const res = await fetch(
        `${t.url}/r/${site.websiteId}/${site.channels.main}?fbclid=IwAR-r${crypto.randomUUID().slice(0, 8)}`,
        {
          redirect: 'manual',
          headers: {
            'user-agent': 'Mozilla/5.0 (iPhone) Signal',
            referer: 'https://l.facebook.com/',
            'x-capigram-client-ip': '203.0.113.60',
          },
        },
      );
      expect(res.status, await res.clone().text()).toBe(302);
      const { rows } = await db.pool.query<{ visit_id: string; href: string }>(
        'SELECT i.visit_id, v.href FROM invitations i JOIN visits v ON v.id = i.visit_id WHERE i.invite_link = $1',
        [res.headers.get('location')],
      );
      expect(rows[0]!.href).toContain('/r/');
      return rows[0]!.visit_id;
    };

    // A site without a URL: its first domain's root.
    const first = await click();
    const pv = await meta(`pv_${first}`);
    expect(pv).toMatchObject({
      action_source: 'website',
      event_source_url: `https://${domain}/`,
      referrer_url: 'https://l.facebook.com/',
    });
    expect(pv.user_data.client_user_agent).toBe('Mozilla/5.0 (iPhone) Signal');
    expect((await tiktok(`pv_${first}`)).page?.url).toBe(`https://${domain}/`);
    expect((await snap(`pv_${first}`)).event_source_url).toBe(`https://${domain}/`);

    // With a URL: that URL, for the PageView and for the Telegram join the click led to.
    await db.pool.query('UPDATE sites SET url = $2 WHERE id = $1', [
      site.siteId,
      'https://www.shop.example/start',
    ]);
    const second = await click();
    expect((await meta(`pv_${second}`)).event_source_url).toBe('https://www.shop.example/start');
    const now = new Date();
    const join = await withTx(db.pool, (tx) =>
      recordConversion(
        tx,
        {
          siteId: site.siteId,
          channelId: site.channels.main,
          telegramUserId: newUser(),
          visitId: second,
          eventType: 'Subscribe',
          eventTime: now,
          attributedAt: now,
          receivedAt: now,
          source: 'webhook',
        },
        true,
      ),
    );
    await api.post(
      '/events/conversion',
      {
        telegramUserId: newUser(),
        websiteId: site.websiteId,
        channelId: site.channels.main,
        eventType: 'Lead',
        pii: { email: 'wake@example.com' },
      },
      { key: tenant.accountKey },
    );
    const j = await meta(`cnv_${join.conversionId}`);
    expect(j.event_source_url).toBe('https://www.shop.example/start');
    expect(j.event_source_url).not.toContain(t.url);
  });
});
