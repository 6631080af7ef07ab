// What each platform receives, byte for byte where it matters: names, seconds, hashes, ids, click
// ids, IP and User-Agent, test event codes; from a warm conversion, a cold one and a PageView.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { hashPii, sha256Hex } from '../../backend/domain/pii/normalize.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import {
  allSettled,
  createConversion,
  createSiteWith,
  createVisit,
  deliveryHarness,
  GOOGLE_ACTION,
  GOOGLE_CUSTOMER,
  META_PIXEL,
  SNAP_PIXEL,
  TIKTOK_PIXEL,
  UA,
  type DeliveryHarness,
} from './support.js';

let db: TestDatabase;
let h: DeliveryHarness;
let siteId: string;

// Meta's published examples (see test/unit/pii.test.ts): what the platforms must receive.
const EM = '62a14e44f765419d10fea99367361a727c12365e2520f32218d505ed9aa0f62f'; // john_smith@gmail.com
const PH = 'e323ec626319ca94ee8bff2e4c87cf613be6ea19919ed1364124e16807ab3176'; // 16505551212
const PH_E164 = '1e231c66011e7a2d867a9cfae267a6aff103cf4913640b6e71a99850fc0ffbc8'; // +16505551212
const FN = '6915771be1c5aa0c886870b6951b03d7eafc121fea0e80a5ea83beb7c449f4ec'; // mary
const LN = '6627835f988e2c5e50533d491163072d3f4f41f5c8b04630150debb3722ca2dd'; // smith

const HREF = 'https://shop.example.com/landing?fbclid=IwAR2F4&utm_source=fb';
const FBC = 'fb.1.1763776512345.IwAR2F4';
const FBP = 'fb.1.1763776500000.1116446470';

beforeAll(async () => {
  db = await createTestDatabase();
  h = await deliveryHarness(db.pool);
  ({ siteId } = await createSiteWith(h.deps, ['meta', 'tiktok', 'snapchat', 'google'], 'TEST123'));
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
  await db.drop();
});
/** The digest of the conversion's Telegram user id, which every event of the lead carries as an external id. */
async function telegramIdHash(conversionId: string): Promise<string> {
  const { rows } = await db.pool.query<{ telegram_user_id: string }>(
    'SELECT telegram_user_id FROM conversions WHERE id = $1',
    [conversionId],
  );
  return sha256Hex(String(rows[0]!.telegram_user_id));
}
function only<T>(list: T[]): T {
  expect(list).toHaveLength(1);
  return list[0]!;
}

describe('a warm Purchase (attribution from the acquisition visit)', () => {
  let conversionId: string;
  let externalIdHash: string;
  let telegramHash: string;
  // Milliseconds that must be floored to seconds, not rounded.
  const eventTime = new Date(Math.floor(Date.now() / 1000) * 1000 - 3600_000 + 999);
  const seconds = Math.floor(eventTime.getTime() / 1000);

  beforeAll(async () => {
    const visitId = await createVisit(db.pool, siteId, {
      href: HREF,
      referrer: 'https://m.facebook.com/',
      clientIp: '203.0.113.7',
      userAgent: UA,
      fbc: FBC,
      fbp: FBP,
      gclid: 'Cj0KCQgclid_-1',
      ttclid: 'E.C.P.ttclid123',
      sccid: 'sc-click-1',
    });
    const piiHashed = hashPii({
      email: ' John_Smith@gmail.com ',
      phone: '+1 (650) 555-1212',
      firstName: 'Mary',
      lastName: 'Smith',
      externalId: 'crm-42',
    });
    externalIdHash = piiHashed.externalId!;
    ({ conversionId } = await createConversion(db.pool, siteId, {
      visitId,
      eventType: 'Purchase',
      value: 49.9,
      currency: 'usd',
      contentName: 'Main channel',
      piiHashed,
      eventTime,
    }));
    telegramHash = await telegramIdHash(conversionId);
    const sends = await allSettled(db.pool);
    expect(sends.filter((s) => s.conversion_id === conversionId).map((s) => s.status)).toEqual([
      'sent',
      'sent',
      'sent',
      'sent',
    ]);
  });

  it('Meta: one request to the pixel with the access token, the exact event and the test event code', () => {
    const req = only(h.fakes.meta.received);
    expect(req.path).toBe(`/v26.0/${META_PIXEL}/events`);
    expect(req.query).toEqual({ access_token: 'meta-test-token' });
    expect(req.body).toEqual({
      data: [
        {
          event_name: 'Purchase',
          event_time: seconds,
          event_id: `cnv_${conversionId}`,
          action_source: 'website',
          event_source_url: HREF,
          referrer_url: 'https://m.facebook.com/',
          // Both ids of the lead: the CRM's and the Telegram user's (one identity per lead).
          user_data: {
            em: [EM],
            ph: [PH],
            fn: [FN],
            ln: [LN],
            external_id: [externalIdHash, telegramHash],
            fbc: FBC,
            fbp: FBP,
            client_ip_address: '203.0.113.7',
            client_user_agent: UA,
          },
          custom_data: { value: 49.9, currency: 'USD', content_name: 'Main channel' },
        },
      ],
      test_event_code: 'TEST123',
    });
  });

  it('TikTok: E.164 phone hash, ttclid, page url and referrer, Purchase, test event code', () => {
    const req = only(h.fakes.tiktok.received);
    expect(req.path).toBe('/open_api/v1.3/event/track/');
    expect(req.headers['access-token']).toBe('tiktok-test-token');
    expect(req.body).toEqual({
      event_source: 'web',
      event_source_id: TIKTOK_PIXEL,
      test_event_code: 'TEST123',
      data: [
        {
          event: 'Purchase',
          event_time: seconds,
          event_id: `cnv_${conversionId}`,
          user: {
            email: EM,
            phone: PH_E164,
            external_id: [externalIdHash, telegramHash],
            first_name: FN,
            last_name: LN,
            ttclid: 'E.C.P.ttclid123',
            ip: '203.0.113.7',
            user_agent: UA,
          },
          page: { url: HREF, referrer: 'https://m.facebook.com/' },
          properties: { value: 49.9, currency: 'USD', content_name: 'Main channel' },
        },
      ],
    });
  });

  it('Snapchat: PURCHASE with sc_click_id unhashed and the digits-only phone hash', () => {
    const req = only(h.fakes.snapchat.received);
    expect(req.path).toBe(`/v3/${SNAP_PIXEL}/events`);
    expect(req.query).toEqual({ access_token: 'snap-test-token' });
    expect(req.body).toEqual({
      data: [
        {
          event_name: 'PURCHASE',
          event_time: seconds,
          event_id: `cnv_${conversionId}`,
          action_source: 'WEB',
          event_source_url: HREF,
          user_data: {
            em: [EM],
            ph: [PH],
            fn: [FN],
            ln: [LN],
            external_id: [externalIdHash, telegramHash],
            client_ip_address: '203.0.113.7',
            client_user_agent: UA,
            sc_click_id: 'sc-click-1',
          },
          custom_data: { value: 49.9, currency: 'USD' },
        },
      ],
    });
  });

  it('Google: the gclid, the action resource name, the UTC date-time, value and the conversion id as orderId', () => {
    const req = only(h.fakes.google.received);
    expect(req.path).toBe(`/v25/customers/${GOOGLE_CUSTOMER}:uploadClickConversions`);
    expect(req.headers.authorization).toBe('Bearer google-oauth-token');
    expect(req.headers['developer-token']).toBe('google-dev-token');
    const dt = `${eventTime.toISOString().slice(0, 19).replace('T', ' ')}+00:00`;
    expect(req.body).toEqual({
      conversions: [
        {
          gclid: 'Cj0KCQgclid_-1',
          conversionAction: `customers/${GOOGLE_CUSTOMER}/conversionActions/${GOOGLE_ACTION}`,
          conversionDateTime: dt,
          conversionValue: 49.9,
          currencyCode: 'USD',
          orderId: conversionId,
          // Enhanced conversions: Google's e-mail digest (no dots to drop here) and the E.164 phone digest.
          userIdentifiers: [
            { userIdentifierSource: 'FIRST_PARTY', hashedEmail: EM },
            { userIdentifierSource: 'FIRST_PARTY', hashedPhoneNumber: PH_E164 },
          ],
        },
      ],
      partialFailure: true,
    });
  });

  it('keeps a summary of what each platform answered and sets capiStatus to sent', async () => {
    const { rows } = await db.pool.query<{
      platform: string;
      response_summary: { httpStatus: number; events: number; body: Record<string, unknown> };
    }>('SELECT platform, response_summary FROM sends WHERE conversion_id = $1', [conversionId]);
    const meta = rows.find((r) => r.platform === 'meta')!.response_summary;
    expect(meta).toMatchObject({ httpStatus: 200, events: 1, body: { events_received: 1, messages: [] } });
    expect(rows.find((r) => r.platform === 'tiktok')!.response_summary).toMatchObject({
      httpStatus: 200,
      body: { code: 0 },
    });
    const c = await db.pool.query('SELECT capi_status FROM conversions WHERE id = $1', [conversionId]);
    expect(c.rows[0].capi_status).toBe('sent');
  });

  it('counts the outcomes by platform and observes the delivery latency', async () => {
    const text = await h.deps.metrics.registry.metrics();
    for (const platform of ['meta', 'tiktok', 'snapchat', 'google']) {
      expect(text).toMatch(
        new RegExp(`capigram_sends_total\\{platform="${platform}",outcome="delivered"\\} [1-9]`),
      );
      expect(text).toMatch(
        new RegExp(`capigram_delivery_latency_seconds_count\\{platform="${platform}"\\} [1-9]`),
      );
    }
  });
});

describe('a cold lead (attribution from apiVisitOverride)', () => {
  beforeEach(() => h.fakes.resetAll());

  it("sends the supplied fbc/fbp and click ids; the conversion's own IP and User-Agent win over the override", async () => {
    const { conversionId } = await createConversion(db.pool, siteId, {
      eventType: 'Lead',
      coldLead: true,
      eventSourceUrl: 'https://shop.example.com/form',
      clientIp: '198.51.100.9',
      userAgent: 'CRM-Forwarded-UA/1.0',
      apiVisitOverride: {
        fbc: FBC,
        fbp: FBP,
        clientIp: '192.0.2.1',
        userAgent: 'Override-UA/1.0',
        gclid: 'coldgclid',
        ttclid: 'coldtt',
        sccid: 'coldsc',
      },
    });
    await allSettled(db.pool);
    const meta = (only(h.fakes.meta.received).body as { data: Record<string, any>[] }).data[0]!;
    expect(meta).toMatchObject({
      event_name: 'Lead',
      event_id: `cnv_${conversionId}`,
      event_source_url: 'https://shop.example.com/form',
    });
    // No external id was supplied: the hashed Telegram user id stands in (see event-builder).
    const hashedUser = await telegramIdHash(conversionId);
    expect(meta.user_data).toEqual({
      fbc: FBC,
      fbp: FBP,
      client_ip_address: '198.51.100.9',
      client_user_agent: 'CRM-Forwarded-UA/1.0',
      external_id: [hashedUser],
    });
    expect(meta.custom_data).toBeUndefined();
    const tt = (only(h.fakes.tiktok.received).body as { data: Record<string, any>[] }).data[0]!;
    expect(tt.event).toBe('Lead');
    expect(tt.user).toEqual({
      ttclid: 'coldtt',
      ip: '198.51.100.9',
      user_agent: 'CRM-Forwarded-UA/1.0',
      external_id: [hashedUser],
    });
    expect(
      (only(h.fakes.snapchat.received).body as { data: Record<string, any>[] }).data[0]!.user_data
        .sc_click_id,
    ).toBe('coldsc');
    expect(
      (only(h.fakes.google.received).body as { conversions: Record<string, any>[] }).conversions[0]!.gclid,
    ).toBe('coldgclid');
  });

  it("falls back to the override's IP and User-Agent when the conversion has none", async () => {
    await createConversion(db.pool, siteId, {
      eventType: 'Contact',
      coldLead: true,
      eventSourceUrl: 'https://shop.example.com/',
      apiVisitOverride: { clientIp: '192.0.2.1', userAgent: 'Override-UA/1.0' },
    });
    await allSettled(db.pool);
    const meta = (only(h.fakes.meta.received).body as { data: Record<string, any>[] }).data[0]!;
    expect(meta.user_data).toEqual({
      client_ip_address: '192.0.2.1',
      client_user_agent: 'Override-UA/1.0',
      external_id: [expect.stringMatching(/^[0-9a-f]{64}$/)],
    });
  });

  it("a Custom event goes out under its own name (Meta, TikTok) and as CUSTOM_EVENT_2 (Snapchat), not Contact's CUSTOM_EVENT_1", async () => {
    await createConversion(db.pool, siteId, {
      eventType: 'Custom',
      customEventName: 'VipUpgrade',
      coldLead: true,
      eventSourceUrl: 'https://shop.example.com/',
      clientIp: '192.0.2.1',
      userAgent: UA,
    });
    await allSettled(db.pool);
    expect((only(h.fakes.meta.received).body as { data: Record<string, any>[] }).data[0]!.event_name).toBe(
      'VipUpgrade',
    );
    expect((only(h.fakes.tiktok.received).body as { data: Record<string, any>[] }).data[0]!.event).toBe(
      'VipUpgrade',
    );
    expect(
      (only(h.fakes.snapchat.received).body as { data: Record<string, any>[] }).data[0]!.event_name,
    ).toBe('CUSTOM_EVENT_2');
  });
});

describe('a PageView (a visit is its own event)', () => {
  beforeEach(() => h.fakes.resetAll());

  it('goes to Meta, TikTok and Snapchat with pv_<visitId> timed at the visit; Google skips it', async () => {
    const createdAt = new Date(Date.now() - 120_000 + 456);
    const visitId = await createVisit(
      db.pool,
      siteId,
      { href: HREF, clientIp: '203.0.113.8', userAgent: UA, fbp: FBP, createdAt },
      true,
    );
    const sends = await allSettled(db.pool);
    const mine = sends.filter((s) => s.visit_id === visitId);
    const order = ['meta', 'tiktok', 'snapchat', 'google'];
    mine.sort((a, b) => order.indexOf(a.platform) - order.indexOf(b.platform));
    expect(mine.map((s) => [s.platform, s.status, s.event_id])).toEqual([
      ['meta', 'sent', `pv_${visitId}`],
      ['tiktok', 'sent', `pv_${visitId}`],
      ['snapchat', 'sent', `pv_${visitId}`],
      ['google', 'skipped', `pv_${visitId}`],
    ]);
    expect(mine.find((s) => s.platform === 'google')!.skip_reason).toBe(
      'page views are not uploaded to Google Ads',
    );
    const seconds = Math.floor(createdAt.getTime() / 1000);
    expect(only(h.fakes.meta.received).body as { data: unknown[]; test_event_code: string }).toEqual({
      data: [
        {
          event_name: 'PageView',
          event_time: seconds,
          event_id: `pv_${visitId}`,
          action_source: 'website',
          event_source_url: HREF,
          // No _fbc cookie came with the visit: fbc is built from the fbclid in its URL, timed at the visit.
          user_data: {
            fbc: `fb.1.${createdAt.getTime()}.IwAR2F4`,
            fbp: FBP,
            client_ip_address: '203.0.113.8',
            client_user_agent: UA,
          },
        },
      ],
      test_event_code: 'TEST123',
    });
    expect((only(h.fakes.tiktok.received).body as { data: Record<string, any>[] }).data[0]).toMatchObject({
      event: 'Pageview',
      event_time: seconds,
      event_id: `pv_${visitId}`,
    });
    expect((only(h.fakes.snapchat.received).body as { data: Record<string, any>[] }).data[0]).toMatchObject({
      event_name: 'PAGE_VIEW',
      event_time: seconds,
    });
    expect(h.fakes.google.received).toHaveLength(0);
  });
});
