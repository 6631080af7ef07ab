// What the (fake) Meta finally receives for business events, through the real worker: a warm
// lead's acquisition visit (fbc, fbp, IP, User-Agent), the caller's forwarded client winning, a
// cold lead's overrides, a submitted manual value, and nothing at all for a reused sent conversion.
import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Fakes, MetaAcceptedEvent, TikTokAcceptedEvent } from '../fakes/index.js';
import type { TestDatabase } from '../harness/db.js';
import type { TestApp } from '../harness/app.js';
import { loadSubjects, eventFromRow } from '../../backend/delivery/event-builder.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import {
  type ApiClient,
  apiWorld,
  attributedJoin,
  META_PIXEL,
  newUser,
  seedTenant,
  type Tenant,
  TIKTOK_PIXEL,
  VISIT,
  waitingJoin,
} from './support.js';

const world = apiWorld({ tenant: { platforms: ['meta'] }, fakes: true });
let fakes: Fakes;
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;
/** Meta and TikTok, both of which send an external id. */
let both: Tenant;

beforeAll(async () => {
  ({ db, t, api, tenant, fakes } = world);
  both = await seedTenant(db.pool, t.deps.box, { platforms: ['meta', 'tiktok'] });
});

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

async function metaEvent(conversionId: string): Promise<MetaAcceptedEvent> {
  const eventId = `cnv_${conversionId}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    const found = fakes.meta.events(META_PIXEL).filter((e) => e.event.event_id === eventId);
    if (found.length > 0) {
      expect(found).toHaveLength(1);
      return found[0]!;
    }
    if (Date.now() > deadline) throw new Error(`Meta never received ${eventId}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function tiktokEvent(conversionId: string): Promise<TikTokAcceptedEvent> {
  const eventId = `cnv_${conversionId}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    const found = fakes.tiktok.events(TIKTOK_PIXEL).filter((e) => e.event.event_id === eventId);
    if (found.length > 0) return found[0]!;
    if (Date.now() > deadline) throw new Error(`TikTok never received ${eventId}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function capiStatus(conversionId: string): Promise<string> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { rows } = await db.pool.query<{ capi_status: string }>(
      'SELECT capi_status FROM conversions WHERE id = $1',
      [conversionId],
    );
    if (rows[0]!.capi_status !== 'pending' || Date.now() > deadline) return rows[0]!.capi_status;
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('what Meta receives', () => {
  it("a warm lead's Purchase carries the acquisition visit's fbc, fbp, IP, User-Agent and page", async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        eventType: 'Purchase',
        value: 49.9,
        currency: 'usd',
        pii: { email: 'Ann@Example.com' },
      },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(201);
    const { event } = await metaEvent(res.body.conversionId);
    expect(event).toMatchObject({
      event_name: 'Purchase',
      action_source: 'website',
      event_source_url: VISIT.href,
      user_data: {
        fbc: VISIT.fbc,
        fbp: VISIT.fbp,
        client_ip_address: VISIT.clientIp,
        client_user_agent: VISIT.userAgent,
        em: [sha('ann@example.com')],
      },
      custom_data: { value: 49.9, currency: 'USD' },
    });
    expect(await capiStatus(res.body.conversionId)).toBe('sent');
  });

  it("the business request's forwarded client wins over the visit's", async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', clientIp: '192.0.2.1' },
      {
        key: tenant.accountKey,
        headers: {
          'X-Capigram-Client-IP': '198.51.100.77',
          'X-Capigram-Client-User-Agent': 'Checkout UA/3.1',
        },
      },
    );
    const { event } = await metaEvent(res.body.conversionId);
    expect(event.user_data).toMatchObject({
      client_ip_address: '198.51.100.77',
      client_user_agent: 'Checkout UA/3.1',
      fbc: VISIT.fbc,
      fbp: VISIT.fbp,
    });
  });

  it("a cold lead's supplied fbc, fbp, IP and User-Agent", async () => {
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: newUser(),
        eventType: 'Subscribe',
        channelId: tenant.site.channels.main,
        fbc: 'fb.1.1700000000001.IwAR-cold',
        fbp: 'fb.1.1700000000001.555',
        clientIp: '203.0.113.99',
        userAgent: 'Cold UA/1.0',
        eventSourceUrl: 'https://shop.example.com/subscribed',
      },
      { key: tenant.site.siteKey },
    );
    expect(res.body.coldLead).toBe(true);
    const { event } = await metaEvent(res.body.conversionId);
    expect(event).toMatchObject({
      event_name: 'Subscribe',
      event_source_url: 'https://shop.example.com/subscribed',
      user_data: {
        fbc: 'fb.1.1700000000001.IwAR-cold',
        fbp: 'fb.1.1700000000001.555',
        client_ip_address: '203.0.113.99',
        client_user_agent: 'Cold UA/1.0',
      },
    });
  });

  it('a reused sent conversion sends nothing again', async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    const first = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Purchase', value: 5, currency: 'USD' },
      { key: tenant.accountKey },
    );
    await metaEvent(first.body.conversionId);
    expect(await capiStatus(first.body.conversionId)).toBe('sent');
    const requestsBefore = fakes.meta.received.length;

    const again = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Purchase', value: 500, currency: 'USD' },
      { key: tenant.accountKey },
    );
    expect(again.body).toMatchObject({
      conversionId: first.body.conversionId,
      deduplicated: true,
      dispatched: false,
      sends: [],
    });
    // A marker event after it: once Meta has the marker, the worker had its chance to send anything else.
    const marker = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Contact' },
      { key: tenant.accountKey },
    );
    await metaEvent(marker.body.conversionId);
    expect(
      fakes.meta.events(META_PIXEL).filter((e) => e.event.event_id === `cnv_${first.body.conversionId}`),
    ).toHaveLength(1);
    expect(fakes.meta.received.length).toBe(requestsBefore + 1);
  });

  it('a submitted manual value is what Meta gets', async () => {
    const user = newUser();
    const waiting = await waitingJoin(db.pool, tenant.site, user);
    const res = await api.post(
      `/leads/${user}/conversions/${waiting.conversionId}/value`,
      { value: 120, currency: 'eur' },
      { key: tenant.site.siteKey },
    );
    expect(res).toMatchObject({ status: 200, body: { success: true } });
    const { event } = await metaEvent(waiting.conversionId);
    expect(event).toMatchObject({
      event_name: 'Purchase',
      custom_data: { value: 120, currency: 'EUR' },
      user_data: { fbc: VISIT.fbc },
    });
  });
});

describe('what every event of a lead carries', () => {
  it('a value is kept to 4 decimal places: below 0.0001 it is refused, beyond it rounded, and stored, shown and sent alike', async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    const tiny = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Purchase', value: 0.0000001, currency: 'USD' },
      { key: tenant.accountKey },
    );
    expect(tiny).toMatchObject({
      status: 400,
      body: {
        code: 'VALIDATION_FAILED',
        errors: [{ path: 'value', message: expect.stringContaining('0.0001') }],
      },
    });

    const exact = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Purchase', value: 10.005, currency: 'KWD' },
      { key: tenant.accountKey },
    );
    const rounded = await api.post(
      `/leads/${user}/events`,
      { eventType: 'Custom', customEventName: 'Tip', value: 10.00005, currency: 'USD' },
      { key: tenant.accountKey },
    );
    expect([exact.status, rounded.status]).toEqual([201, 201]);
    const lead = await api.get(`/leads/${user}`, { key: tenant.site.siteKey });
    const shown = (id: string) =>
      lead.body.conversions.find((c: { conversionId: string }) => c.conversionId === id)?.eventValue;
    expect([shown(exact.body.conversionId), shown(rounded.body.conversionId)]).toEqual([10.005, 10.0001]);
    expect((await metaEvent(exact.body.conversionId)).event.custom_data).toMatchObject({
      value: 10.005,
      currency: 'KWD',
    });
    expect((await metaEvent(rounded.body.conversionId)).event.custom_data).toMatchObject({
      value: 10.0001,
      currency: 'USD',
    });
  });

  // One identity per lead (intended change): every event carries the CRM id and the Telegram id.
  it("the lead's stored externalUserId and its Telegram id are every later event's external ids, on every platform that sends one; a retry keeps the recorded id and adds the lead's new one", async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: both.site.siteId,
      channelId: both.site.channels.main,
      telegramUserId: user,
    });
    const first = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', externalUserId: 'crm-7001' },
      { key: both.accountKey },
    );
    const later = await api.post(
      `/leads/${user}/events`,
      { eventType: 'CompleteRegistration' },
      { key: both.accountKey },
    );
    expect((await api.get(`/leads/${user}`, { key: both.site.siteKey })).body.externalUserId).toBe(
      'crm-7001',
    );
    for (const c of [first, later]) {
      expect((await metaEvent(c.body.conversionId)).event.user_data.external_id).toEqual([
        sha('crm-7001'),
        sha(String(user)),
      ]);
      expect((await tiktokEvent(c.body.conversionId)).event.user).toMatchObject({
        external_id: [sha('crm-7001'), sha(String(user))],
      });
    }

    // The lead's id changes afterwards: the later conversion's sends, if retried, still carry the
    // one they were recorded with, and the lead's new one beside it (never fewer ids than before).
    await api.post(
      `/leads/${user}/events`,
      { eventType: 'Contact', externalUserId: 'crm-7002' },
      { key: both.accountKey },
    );
    const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM sends WHERE conversion_id = $1', [
      later.body.conversionId,
    ]);
    const again = await loadSubjects(
      db.pool,
      rows.map((r) => r.id),
    );
    for (const r of again)
      expect(eventFromRow(r).externalIds).toEqual([sha('crm-7001'), sha('crm-7002'), sha(String(user))]);
    expect(again).toHaveLength(2);
  });

  it("a cold lead's follow-up event carries its event source URL forward with the rest of its attribution", async () => {
    const user = newUser();
    const cold = {
      fbc: 'fb.1.1700000000002.IwAR-cold2',
      fbp: 'fb.1.1700000000002.777',
      clientIp: '203.0.113.42',
      userAgent: 'Cold UA/2.0',
      eventSourceUrl: 'https://shop.example.com/signup',
    };
    const first = await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        eventType: 'Lead',
        siteId: tenant.site.siteId,
        channelId: tenant.site.channels.main,
        ...cold,
      },
      { key: tenant.accountKey },
    );
    expect(first.body.coldLead).toBe(true);
    const next = await api.post(
      `/leads/${user}/events`,
      { eventType: 'CompleteRegistration' },
      { key: tenant.accountKey },
    );
    const third = await api.post(
      `/leads/${user}/events`,
      { eventType: 'Subscribe' },
      { key: tenant.accountKey },
    );
    const own = await api.post(
      `/leads/${user}/events`,
      { eventType: 'Contact', eventSourceUrl: 'https://shop.example.com/contact' },
      { key: tenant.accountKey },
    );
    for (const [res, url] of [
      [next, cold.eventSourceUrl],
      [third, cold.eventSourceUrl],
      [own, 'https://shop.example.com/contact'],
    ] as const) {
      expect(res.body).toMatchObject({ coldLead: false, dispatched: true });
      const { event } = await metaEvent(res.body.conversionId);
      expect(event).toMatchObject({
        event_source_url: url,
        user_data: {
          fbc: cold.fbc,
          fbp: cold.fbp,
          client_ip_address: cold.clientIp,
          client_user_agent: cold.userAgent,
        },
      });
      expect(await capiStatus(res.body.conversionId)).toBe('sent');
    }
  });
});

describe('Google Ads, from the business API', () => {
  let google: Tenant;
  const ACTION = 'customers/1234567890/conversionActions/222';

  beforeAll(async () => {
    google = await seedTenant(db.pool, t.deps.box, { platforms: [] });
    await addPixel(
      { pool: db.pool, box: t.deps.box },
      {
        platform: 'google',
        siteId: google.site.siteId,
        customerId: '1234567890',
        api: 'ads',
        developerToken: 'google-dev-token',
        oauthToken: 'google-oauth-token',
        conversionActions: ['Purchase=222'],
      },
    );
  });

  async function googleRow(conversionId: string) {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const found = fakes.google.conversions('1234567890').find((c) => c.conversion.orderId === conversionId);
      if (found) return found.conversion;
      if (Date.now() > deadline) throw new Error(`Google never received ${conversionId}`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  it("a cold Purchase with only an e-mail is uploaded with the digest of Google's normal form", async () => {
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: newUser(),
        eventType: 'Purchase',
        value: 19,
        currency: 'EUR',
        channelId: google.site.channels.main,
        pii: { email: 'John.Smith@Gmail.com' },
      },
      { key: google.site.siteKey },
    );
    expect(res.status).toBe(201);
    const row = await googleRow(res.body.conversionId);
    expect(row).toMatchObject({
      conversionAction: ACTION,
      userIdentifiers: [{ userIdentifierSource: 'FIRST_PARTY', hashedEmail: sha('johnsmith@gmail.com') }],
    });
    expect(row.gclid).toBeUndefined();
  });

  it("a cold lead's gbraid is uploaded as the click id", async () => {
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: newUser(),
        eventType: 'Purchase',
        value: 19,
        currency: 'EUR',
        channelId: google.site.channels.main,
        gbraid: '0AAAAA-api_gb',
      },
      { key: google.site.siteKey },
    );
    expect(res.status).toBe(201);
    const row = await googleRow(res.body.conversionId);
    expect(row).toMatchObject({ gbraid: '0AAAAA-api_gb', conversionAction: ACTION });
    expect(row.gclid).toBeUndefined();
  });
});
