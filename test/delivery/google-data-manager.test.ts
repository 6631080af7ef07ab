// Google conversions through the Data Manager API, end to end against the strict fake: one
// conversion action per event type, click ids, e-mail matching, consent, batches of 2,000, a
// request refused for one event, Google's later diagnosis, and a value submitted later.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { submitConversionValue } from '../../backend/domain/conversions/submit-value.js';
import { hashPii } from '../../backend/domain/pii/normalize.js';
import { pixelHealth } from '../../backend/domain/reports/pixel-health.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import {
  allSettled,
  createConversion,
  createSiteWith,
  createVisit,
  deliveryHarness,
  GOOGLE_CUSTOMER,
  recordConversionUnannounced,
  sendsOf,
  UA,
  waitUntil,
  type DeliveryHarness,
} from './support.js';

let db: TestDatabase;
let h: DeliveryHarness;
let siteId: string;
const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const SUBSCRIBE = '111';
const PURCHASE = '222';
const LEAD = '333';
// A 2,000-event request takes the strict fake a while to check on a loaded machine: a client
// timeout would send it again (harmless, same transaction ids) and blur the request counts.
const WORKER = { googleStatusDelayMs: 20, requestTimeoutMs: 5000, leaseMs: 15_000 };
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

beforeAll(async () => {
  db = await createTestDatabase();
  h = await deliveryHarness(db.pool);
  ({ siteId } = await createSiteWith(h.deps, []));
  await addPixel(h.deps, {
    platform: 'google',
    siteId,
    customerId: GOOGLE_CUSTOMER,
    oauthToken: 'google-oauth-token',
    loginCustomerId: '9998887777',
    conversionActions: [`Subscribe=${SUBSCRIBE}`, `Purchase=${PURCHASE}`, `Lead=${LEAD}`],
  });
  await h.startWorker(WORKER);
}, 60_000);
afterAll(async () => {
  await h.close();
  await db.drop();
});
beforeEach(() => {
  h.fakes.googleDataManager.reset();
  h.fakes.google.reset();
});

const dm = () => h.fakes.googleDataManager;

/**
 * The event Google took for this conversion (its transaction id is the conversion id). A request
 * whose answer came after the client's timeout is sent again under the same transaction id, which
 * Google keeps once: every copy must be the same event.
 */
function ingested(conversionId: string) {
  const found = dm()
    .events()
    .filter((e) => e.event.transactionId === conversionId);
  expect(found.length, `conversion ${conversionId} ingested`).toBeGreaterThanOrEqual(1);
  for (const f of found) expect(f.event).toEqual(found[0]!.event);
  return found[0]!;
}

async function sendOf(conversionId: string) {
  return (await sendsOf(db.pool, 'conversion_id = $1', [conversionId]))[0]!;
}

describe('Google conversions through the Data Manager API', () => {
  it('a Purchase with a gclid: its destination, click id, landing device, value, RFC 3339 time; then Google confirms it', async () => {
    const visitId = await createVisit(db.pool, siteId, {
      gclid: 'Cj0KCQ-dm-1',
      clientIp: '203.0.113.7',
      userAgent: UA,
    });
    const { conversionId } = await createConversion(db.pool, siteId, {
      visitId,
      eventType: 'Purchase',
      value: 49.5,
      currency: 'eur',
    });
    await allSettled(db.pool);
    const { destination, event, loginAccountId } = ingested(conversionId);
    expect(destination).toEqual({
      reference: `action-${PURCHASE}`,
      operatingAccount: { accountType: 'GOOGLE_ADS', accountId: GOOGLE_CUSTOMER },
      loginAccount: { accountType: 'GOOGLE_ADS', accountId: '9998887777' },
      productDestinationId: PURCHASE,
    });
    expect(loginAccountId).toBe('9998887777');
    expect(event).toMatchObject({
      destinationReferences: [`action-${PURCHASE}`],
      transactionId: conversionId,
      adIdentifiers: {
        gclid: 'Cj0KCQ-dm-1',
        landingPageDeviceInfo: { ipAddress: '203.0.113.7', userAgent: UA },
      },
      conversionValue: 49.5,
      currency: 'EUR',
    });
    expect(event.eventTimestamp).toMatch(RFC3339);
    expect(['WEB', 'MESSAGE', 'OTHER']).toContain(event.eventSource);
    const request = dm().ingestRequests()[0]!;
    expect(request.headers.authorization).toBe('Bearer google-oauth-token');
    expect(request.headers['developer-token']).toBeUndefined();
    // The diagnostics are read and the send stays sent.
    await waitUntil(async () => dm().statusRequests().length > 0, 5000, 'the request status check');
    const requestIds = dm()
      .events()
      .map((e) => e.requestId);
    expect(requestIds).toContain(dm().statusRequests()[0]!.query.requestId);
    expect(await sendOf(conversionId)).toMatchObject({ status: 'sent', last_error: null });
  });

  it('a visit with only a gbraid gives that gbraid and no gclid', async () => {
    const visitId = await createVisit(db.pool, siteId, { gbraid: '0AAAAAgbraid_iOS-dm', userAgent: UA });
    const { conversionId } = await createConversion(db.pool, siteId, {
      visitId,
      eventType: 'Purchase',
      value: 5,
      currency: 'USD',
    });
    await allSettled(db.pool);
    const { adIdentifiers } = ingested(conversionId).event;
    expect(adIdentifiers.gbraid).toBe('0AAAAAgbraid_iOS-dm');
    expect(adIdentifiers.gclid).toBeUndefined();
    expect(adIdentifiers.wbraid).toBeUndefined();
  });

  it("a Purchase with only an e-mail is matched on Google's digest of it, HEX-encoded", async () => {
    const { conversionId } = await createConversion(db.pool, siteId, {
      eventType: 'Purchase',
      value: 30,
      currency: 'EUR',
      piiHashed: hashPii({ email: 'John.Smith@Gmail.com', phone: '+49 151 23456789' }),
    });
    await allSettled(db.pool);
    const { event } = ingested(conversionId);
    expect(event.adIdentifiers).toBeUndefined();
    expect(event.userData).toEqual({
      userIdentifiers: [
        { emailAddress: sha256('johnsmith@gmail.com') },
        { phoneNumber: sha256('+4915123456789') },
      ],
    });
    const body = dm().ingestRequests()[0]!.body as { encoding?: string };
    expect(body.encoding).toBe('HEX');
    expect((await sendOf(conversionId)).status).toBe('sent');
  });

  it('a Lead and a Subscribe go to their own conversion actions in one request', async () => {
    await h.stopWorker();
    const visitId = await createVisit(db.pool, siteId, { gclid: 'Cj0-two-actions' });
    const lead = await createConversion(db.pool, siteId, { visitId, eventType: 'Lead' });
    const join = await createConversion(db.pool, siteId, { visitId, eventType: 'Subscribe' });
    await h.startWorker(WORKER);
    await allSettled(db.pool);
    expect(dm().ingestRequests()).toHaveLength(1);
    expect(ingested(lead.conversionId).destination.productDestinationId).toBe(LEAD);
    expect(ingested(join.conversionId).destination.productDestinationId).toBe(SUBSCRIBE);
    const body = dm().ingestRequests()[0]!.body as { destinations: { productDestinationId: string }[] };
    expect(body.destinations.map((d) => d.productDestinationId).sort()).toEqual([SUBSCRIBE, LEAD].sort());
  });

  it('consent denied: the event says so and carries no e-mail, IP or User-Agent, only the click id', async () => {
    await db.pool.query(`UPDATE sites SET google_ad_user_data = 'DENIED' WHERE id = $1`, [siteId]);
    try {
      const visitId = await createVisit(db.pool, siteId, {
        gclid: 'Cj0-denied',
        clientIp: '203.0.113.9',
        userAgent: UA,
      });
      const { conversionId } = await createConversion(db.pool, siteId, {
        visitId,
        eventType: 'Purchase',
        value: 12,
        currency: 'EUR',
        piiHashed: hashPii({ email: 'denied@example.com' }),
      });
      await allSettled(db.pool);
      const { event } = ingested(conversionId);
      expect(event.consent).toEqual({ adUserData: 'CONSENT_DENIED' });
      expect(event.adIdentifiers).toEqual({ gclid: 'Cj0-denied' });
      expect(event.userData).toBeUndefined();
    } finally {
      await db.pool.query('UPDATE sites SET google_ad_user_data = NULL WHERE id = $1', [siteId]);
    }
  });

  it('2,500 conversions go in two requests (2,000 and 500), every one sent', async () => {
    await h.stopWorker();
    const ids: string[] = [];
    for (let i = 0; i < 2500; i += 100) {
      const chunk = await Promise.all(
        Array.from({ length: 100 }, () =>
          recordConversionUnannounced(db.pool, siteId, {
            eventType: 'Subscribe',
            piiHashed: hashPii({ email: `bulk${i}@example.com` }),
          }),
        ),
      );
      ids.push(...chunk.map((c) => c.conversionId));
    }
    await h.startWorker(WORKER);
    await allSettled(db.pool, 60_000);
    // Two claims may run side by side, so the requests may arrive in either order.
    const sizes = dm()
      .ingestRequests()
      .map((r) => (r.body as { events: unknown[] }).events.length);
    expect(sizes.sort((a, b) => b - a)).toEqual([2000, 500]);
    expect(
      new Set(
        dm()
          .events()
          .map((e) => e.event.transactionId),
      ),
    ).toEqual(new Set(ids));
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM sends WHERE conversion_id = ANY($1::uuid[]) AND status = 'sent'`,
      [ids],
    );
    expect(rows[0]!.n).toBe(2500);
  }, 120_000);

  it('a request refused for one event: that event fails with the field Google named, the others are delivered', async () => {
    await h.stopWorker();
    const good = [];
    for (let i = 0; i < 5; i++)
      good.push(
        await recordConversionUnannounced(db.pool, siteId, {
          eventType: 'Purchase',
          value: 10 + i,
          currency: 'EUR',
          piiHashed: hashPii({ email: `ok${i}@example.com` }),
        }),
      );
    const bad = await recordConversionUnannounced(db.pool, siteId, {
      eventType: 'Purchase',
      value: 10,
      currency: 'XXY',
      piiHashed: hashPii({ email: 'bad@example.com' }),
    });
    await h.startWorker(WORKER);
    await allSettled(db.pool);
    const badSend = await sendOf(bad.conversionId);
    expect(badSend.status).toBe('failed');
    expect(badSend.last_error).toMatch(
      /HTTP 400: INVALID_ARGUMENT: .*INVALID_CURRENCY_CODE; events\[0\]\.currency/,
    );
    for (const g of good) expect((await sendOf(g.conversionId)).status).toBe('sent');
    expect(
      dm()
        .events()
        .map((e) => e.event.transactionId)
        .sort(),
    ).toEqual(good.map((g) => g.conversionId).sort());
    // The first request carried all six and was refused as a whole.
    expect((dm().ingestRequests()[0]!.body as { events: unknown[] }).events).toHaveLength(6);
  });

  it("a conversion Google rejects after accepting it ends failed with Google's reason", async () => {
    dm().processingChecks = 1;
    dm().rejectLater('Cj0-unknown-click', 'PROCESSING_ERROR_REASON_CLICK_NOT_FOUND');
    const visitId = await createVisit(db.pool, siteId, { gclid: 'Cj0-unknown-click' });
    const { conversionId } = await createConversion(db.pool, siteId, {
      visitId,
      eventType: 'Purchase',
      value: 9,
      currency: 'EUR',
    });
    const failed = await waitUntil(
      async () => {
        const s = await sendOf(conversionId);
        return s.status === 'failed' ? s : undefined;
      },
      10_000,
      'the diagnosis to fail the send',
    );
    expect(failed.last_error).toMatch(
      /^Google rejected the conversion after accepting it \(request [0-9a-f-]+\): FAILED: PROCESSING_ERROR_REASON_CLICK_NOT_FOUND ×1$/,
    );
    expect(dm().statusRequests().length).toBeGreaterThanOrEqual(2);
    const { rows } = await db.pool.query<{ capi_status: string }>(
      'SELECT capi_status FROM conversions WHERE id = $1',
      [conversionId],
    );
    expect(rows[0]!.capi_status).toBe('failed');
    const health = (await pixelHealth(db.pool, siteId, new Date())).find((p) => p.platform === 'google')!;
    expect(health.lastError).toBe(failed.last_error);
  });

  it('a value submitted later for an awaiting Purchase reaches Google with the conversion as transaction id', async () => {
    const visitId = await createVisit(db.pool, siteId, { gclid: 'Cj0-manual' });
    const telegramUserId = 733_000_001;
    const { conversionId, sends } = await createConversion(db.pool, siteId, {
      visitId,
      telegramUserId,
      eventType: 'Purchase',
      awaitingManualInput: true,
    });
    expect(sends).toEqual([]);
    const { rows } = await db.pool.query<{ account_id: string }>(
      'SELECT account_id FROM sites WHERE id = $1',
      [siteId],
    );
    await submitConversionValue(h.deps, { accountId: rows[0]!.account_id, siteId: null } as never, {
      telegramUserId,
      conversionId,
      value: 120,
      currency: 'EUR',
      pii: {},
    });
    await allSettled(db.pool);
    expect(ingested(conversionId).event).toMatchObject({
      transactionId: conversionId,
      conversionValue: 120,
      currency: 'EUR',
      adIdentifiers: { gclid: 'Cj0-manual' },
    });
  });

  it('--api ads with a developer token Google no longer allowlists: the send fails saying to switch to the Data Manager API', async () => {
    const { siteId: adsSite } = await createSiteWith(h.deps, []);
    const { pixelId } = await addPixel(h.deps, {
      platform: 'google',
      siteId: adsSite,
      customerId: GOOGLE_CUSTOMER,
      api: 'ads',
      developerToken: 'google-dev-token',
      oauthToken: 'google-oauth-token',
      conversionActions: [`Purchase=${PURCHASE}`],
    });
    h.fakes.google.allowlistedTokens.delete('google-dev-token');
    try {
      const visitId = await createVisit(db.pool, adsSite, { gclid: 'Cj0-not-allowlisted' });
      const { conversionId } = await createConversion(db.pool, adsSite, {
        visitId,
        eventType: 'Purchase',
        value: 3,
        currency: 'EUR',
      });
      await allSettled(db.pool);
      const send = await sendOf(conversionId);
      expect(send.status).toBe('failed');
      expect(send.attempts).toBe(1);
      expect(send.last_error).toMatch(
        /^Google no longer lets this developer token import conversions through the Google Ads API: switch the pixel to the Data Manager API \(pixel update --pixel P --api data-manager\) \(PERMISSION_DENIED: .*CUSTOMER_NOT_ALLOWLISTED_FOR_THIS_FEATURE/,
      );
      expect(h.fakes.google.conversions()).toEqual([]);
      expect(dm().ingestRequests()).toEqual([]);
      // Moved to the Data Manager API, the conversion goes through once dispatched again.
      await db.pool.query(
        `UPDATE pixels SET public_config = public_config || '{"api":"data-manager"}' WHERE id = $1`,
        [pixelId],
      );
      await db.pool.query(
        `UPDATE sends SET status = 'pending', next_attempt_at = now(), attempts = 0 WHERE conversion_id = $1`,
        [conversionId],
      );
      await h.stopWorker();
      await h.startWorker(WORKER);
      await waitUntil(
        async () => (await sendOf(conversionId)).status === 'sent',
        10_000,
        'the send through the Data Manager API',
      );
      expect(ingested(conversionId).event.adIdentifiers.gclid).toBe('Cj0-not-allowlisted');
    } finally {
      h.fakes.google.allowlistedTokens.add('google-dev-token');
    }
  });

  it('a pixel with a refresh token sends with the access token it gets, which the Data Manager API takes', async () => {
    const { siteId: refreshSite } = await createSiteWith(h.deps, []);
    await addPixel(h.deps, {
      platform: 'google',
      siteId: refreshSite,
      customerId: GOOGLE_CUSTOMER,
      refreshToken: 'google-refresh-token',
      clientId: 'google-client-id',
      clientSecret: 'google-client-secret',
      conversionActions: [`Purchase=${PURCHASE}`],
    });
    const visitId = await createVisit(db.pool, refreshSite, { gclid: 'Cj0-refreshed' });
    const { conversionId } = await createConversion(db.pool, refreshSite, {
      visitId,
      eventType: 'Purchase',
      value: 1,
      currency: 'EUR',
    });
    await allSettled(db.pool);
    expect((await sendOf(conversionId)).status).toBe('sent');
    expect(h.fakes.google.tokenRequests()).toHaveLength(1);
    expect(dm().ingestRequests()[0]!.headers.authorization).toMatch(/^Bearer ya29\.fake-/);
    await waitUntil(
      async () =>
        dm()
          .statusRequests()
          .some((r) => r.status === 200),
      5000,
      'the status read with that token',
    );
  });

  it('an answer lost to the client timeout: the resend is a duplicate for Google, and the send stays sent', async () => {
    await h.stopWorker();
    await h.startWorker({ ...WORKER, requestTimeoutMs: 300 });
    try {
      dm().latencyMs = 1000;
      const visitId = await createVisit(db.pool, siteId, { gclid: 'Cj0-slow-answer' });
      const { conversionId } = await createConversion(db.pool, siteId, {
        visitId,
        eventType: 'Purchase',
        value: 2,
        currency: 'EUR',
      });
      await waitUntil(async () => dm().ingestRequests().length >= 1, 5000, 'the first ingest');
      dm().latencyMs = 0;
      await allSettled(db.pool);
      const copies = dm()
        .events()
        .filter((e) => e.event.transactionId === conversionId);
      expect(copies.map((c) => c.duplicate)).toEqual([undefined, true]);
      // The resend's diagnosis (DUPLICATE_TRANSACTION_ID) is read and changes nothing.
      await waitUntil(
        async () =>
          dm()
            .statusRequests()
            .some((r) => r.query.requestId === copies[1]!.requestId && r.status === 200),
        5000,
        "the resend's status read",
      );
      await new Promise((r) => setTimeout(r, 200));
      expect(await sendOf(conversionId)).toMatchObject({ status: 'sent', last_error: null });
    } finally {
      dm().latencyMs = 0;
      await h.stopWorker();
      await h.startWorker(WORKER);
    }
  });
});
