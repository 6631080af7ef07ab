// Google Ads end to end, against the fake that refuses what Google refuses: one conversion action
// per event type, enhanced conversions (hashed e-mail with Google's own rule, no click id needed),
// iOS click ids, the site's consent, test mode, and row failures landing on their own sends.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { hashPii } from '../../backend/domain/pii/normalize.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import {
  allSettled,
  createConversion,
  createSiteWith,
  createVisit,
  deliveryHarness,
  GOOGLE_CUSTOMER,
  sendsOf,
  UA,
  type DeliveryHarness,
} from './support.js';

let db: TestDatabase;
let h: DeliveryHarness;
let siteId: string;
let pixelId: string;
const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const JOIN_ACTION = '111';
const PURCHASE_ACTION = '222';
const action = (id: string) => `customers/${GOOGLE_CUSTOMER}/conversionActions/${id}`;

beforeAll(async () => {
  db = await createTestDatabase();
  h = await deliveryHarness(db.pool);
  ({ siteId } = await createSiteWith(h.deps, []));
  ({ pixelId } = await addPixel(h.deps, {
    platform: 'google',
    siteId,
    customerId: GOOGLE_CUSTOMER,
    api: 'ads',
    developerToken: 'google-dev-token',
    oauthToken: 'google-oauth-token',
    conversionActions: [`Subscribe=${JOIN_ACTION}`, `Purchase=${PURCHASE_ACTION}`],
  }));
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
  await db.drop();
});
beforeEach(() => h.fakes.google.reset());

function uploaded(orderId: string) {
  const found = h.fakes.google.conversions(GOOGLE_CUSTOMER).find((c) => c.conversion.orderId === orderId);
  expect(found, `conversion ${orderId} uploaded`).toBeDefined();
  return found!;
}

describe('Google Ads delivery', () => {
  it('a join and a Purchase of one lead land in their own actions; a Lead with no mapping is skipped naming the mapping', async () => {
    const visitId = await createVisit(db.pool, siteId, {
      gclid: 'Cj0KCQ-lead-1',
      clientIp: '203.0.113.7',
      userAgent: UA,
    });
    const telegramUserId = 711_000_001;
    const join = await createConversion(db.pool, siteId, { visitId, telegramUserId, eventType: 'Subscribe' });
    const purchase = await createConversion(db.pool, siteId, {
      visitId,
      telegramUserId,
      eventType: 'Purchase',
      value: 49,
      currency: 'EUR',
    });
    const lead = await createConversion(db.pool, siteId, { visitId, telegramUserId, eventType: 'Lead' });
    await allSettled(db.pool);

    expect(uploaded(join.conversionId).conversion).toMatchObject({
      gclid: 'Cj0KCQ-lead-1',
      conversionAction: action(JOIN_ACTION),
    });
    expect(uploaded(purchase.conversionId).conversion).toMatchObject({
      gclid: 'Cj0KCQ-lead-1',
      conversionAction: action(PURCHASE_ACTION),
      conversionValue: 49,
      currencyCode: 'EUR',
    });
    expect(h.fakes.google.conversions()).toHaveLength(2);
    const [skipped] = await sendsOf(db.pool, 'conversion_id = $1', [lead.conversionId]);
    expect(skipped).toMatchObject({
      status: 'skipped',
      attempts: 0,
      skip_reason:
        'no Google Ads conversion action for Lead on this pixel (map one with pixel update --conversion-action Lead=ACTION_ID)',
    });
  });

  it("a cold Purchase with only an e-mail is uploaded with Google's digest of it, and the site's consent", async () => {
    await db.pool.query(`UPDATE sites SET google_ad_user_data = 'GRANTED' WHERE id = $1`, [siteId]);
    try {
      const { conversionId } = await createConversion(db.pool, siteId, {
        eventType: 'Purchase',
        value: 30,
        currency: 'EUR',
        piiHashed: hashPii({ email: 'John.Smith@Gmail.com' }),
      });
      await allSettled(db.pool);
      const { conversion } = uploaded(conversionId);
      expect(conversion.gclid).toBeUndefined();
      expect(conversion.userIdentifiers).toEqual([
        { userIdentifierSource: 'FIRST_PARTY', hashedEmail: sha256('johnsmith@gmail.com') },
      ]);
      expect(conversion.consent).toEqual({ adUserData: 'GRANTED' });
      expect((await sendsOf(db.pool, 'conversion_id = $1', [conversionId]))[0]!.status).toBe('sent');
    } finally {
      await db.pool.query('UPDATE sites SET google_ad_user_data = NULL WHERE id = $1', [siteId]);
    }
  });

  it('a visit with only a gbraid gives an upload with that gbraid', async () => {
    const visitId = await createVisit(db.pool, siteId, { gbraid: '0AAAAAgbraid_iOS-1', userAgent: UA });
    const { conversionId } = await createConversion(db.pool, siteId, { visitId, eventType: 'Subscribe' });
    await allSettled(db.pool);
    const { conversion } = uploaded(conversionId);
    expect(conversion).toMatchObject({ gbraid: '0AAAAAgbraid_iOS-1', conversionAction: action(JOIN_ACTION) });
    expect(conversion.gclid).toBeUndefined();
    expect(conversion.wbraid).toBeUndefined();
  });

  it('a partial failure marks only its own send failed; the other row of the request is sent', async () => {
    h.fakes.google.setGclidOutcome('Cj0-expired', 'EXPIRED_EVENT');
    await h.stopWorker();
    const okVisit = await createVisit(db.pool, siteId, { gclid: 'Cj0-fine' });
    const badVisit = await createVisit(db.pool, siteId, { gclid: 'Cj0-expired' });
    const ok = await createConversion(db.pool, siteId, {
      visitId: okVisit,
      eventType: 'Purchase',
      value: 10,
      currency: 'EUR',
    });
    const bad = await createConversion(db.pool, siteId, {
      visitId: badVisit,
      eventType: 'Purchase',
      value: 20,
      currency: 'EUR',
    });
    await h.startWorker();
    await allSettled(db.pool);

    // One request carried both rows; Google failed the second alone.
    const requests = h.fakes.google.uploadRequests();
    expect(requests).toHaveLength(1);
    expect((requests[0]!.body as { conversions: unknown[] }).conversions).toHaveLength(2);
    const [okSend] = await sendsOf(db.pool, 'conversion_id = $1', [ok.conversionId]);
    const [badSend] = await sendsOf(db.pool, 'conversion_id = $1', [bad.conversionId]);
    expect(okSend).toMatchObject({ status: 'sent', attempts: 1 });
    expect(badSend).toMatchObject({ status: 'failed', attempts: 1 });
    expect(badSend!.last_error).toMatch(/^EXPIRED_EVENT: /);
    expect(h.fakes.google.conversions().map((c) => c.conversion.orderId)).toEqual([ok.conversionId]);
  });

  it('a pixel in test mode sends validateOnly: Google checks the rows and records none', async () => {
    await db.pool.query(
      `UPDATE pixels SET public_config = public_config || '{"validateOnly": true}' WHERE id = $1`,
      [pixelId],
    );
    try {
      const visitId = await createVisit(db.pool, siteId, { gclid: 'Cj0-test-mode' });
      const { conversionId } = await createConversion(db.pool, siteId, { visitId, eventType: 'Subscribe' });
      await allSettled(db.pool);
      expect(
        h.fakes.google.uploadRequests().map((r) => (r.body as { validateOnly?: boolean }).validateOnly),
      ).toEqual([true]);
      expect(h.fakes.google.conversions()).toEqual([]);
      expect(h.fakes.google.validated).toBe(1);
      expect((await sendsOf(db.pool, 'conversion_id = $1', [conversionId]))[0]!.status).toBe('sent');
    } finally {
      await db.pool.query(`UPDATE pixels SET public_config = public_config - 'validateOnly' WHERE id = $1`, [
        pixelId,
      ]);
    }
  });
});
