// Transient failures retry with backoff (honouring the platform's requested wait) and the same
// event id; permanent ones fail at once with the platform's message; sends that cannot be valid
// are skipped with the reason; Google's per-row outcomes; capiStatus follows the sends.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import type { FailureKind } from '../fakes/index.js';
import {
  allSettled,
  createConversion,
  createSiteWith,
  createVisit,
  deliveryHarness,
  sendsOf,
  UA,
  type DeliveryHarness,
  type PixelPlatform,
} from './support.js';

let db: TestDatabase;
let h: DeliveryHarness;

beforeAll(async () => {
  db = await createTestDatabase();
  h = await deliveryHarness(db.pool);
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
  await db.drop();
});
beforeEach(() => h.fakes.resetAll());

/** A fresh site with the given pixels and a warm, fully attributed conversion on it. */
async function conversionOn(
  platforms: PixelPlatform[],
  extra: Parameters<typeof createConversion>[2] = {},
  visit: Parameters<typeof createVisit>[2] = {},
) {
  const { siteId } = await createSiteWith(h.deps, platforms);
  const visitId = await createVisit(db.pool, siteId, {
    href: 'https://shop.example.com/',
    clientIp: '203.0.113.7',
    userAgent: UA,
    gclid: 'gclid-1',
    ...visit,
  });
  const { conversionId } = await createConversion(db.pool, siteId, { visitId, ...extra });
  return { siteId, conversionId };
}

async function capiStatus(conversionId: string): Promise<string> {
  return (await db.pool.query('SELECT capi_status FROM conversions WHERE id = $1', [conversionId])).rows[0]
    .capi_status;
}

const gaps = (times: number[]) => times.slice(1).map((t, i) => t - times[i]!);

describe('transient failures are retried with the same event id', () => {
  const cases: [string, PixelPlatform, FailureKind][] = [
    ['Meta 500', 'meta', { type: 'status', status: 500 }],
    ['Meta 503 from a gateway (HTML body)', 'meta', { type: 'status', status: 503, gateway: true }],
    ['Meta timeout', 'meta', { type: 'timeout' }],
    ['Meta connection reset', 'meta', { type: 'reset' }],
    ['TikTok server error (40700 in a 200)', 'tiktok', { type: 'status', status: 500 }],
    ['TikTok throttled (40100 in a 200)', 'tiktok', { type: 'rateLimit', retryAfterSec: 1 }],
    ['Snapchat 502', 'snapchat', { type: 'status', status: 502 }],
    ['Google 500', 'google', { type: 'status', status: 500 }],
  ];
  it.each(cases)('%s: retried until delivered', async (_name, platform, failure) => {
    h.fakes[platform].failNext(2, failure);
    const { conversionId } = await conversionOn([platform]);
    const [send] = await allSettled(db.pool).then(() =>
      sendsOf(db.pool, 'conversion_id = $1', [conversionId]),
    );
    expect(send).toMatchObject({ status: 'sent', attempts: 3, last_error: null });
    const received = h.fakes[platform].received;
    expect(received).toHaveLength(3);
    expect(received.map((r) => r.injected)).toEqual([failure.type, failure.type, undefined]);
    // The event id (Google: the order id) is the same on every attempt.
    const ids = received.map((r) => JSON.stringify(r.body).match(/"(?:event_id|orderId)":"([^"]+)"/)?.[1]);
    expect(new Set(ids)).toEqual(new Set([platform === 'google' ? conversionId : `cnv_${conversionId}`]));
    expect(await capiStatus(conversionId)).toBe('sent');
  });

  it('Meta 429: waits as long as the usage header asks (a minute, scaled by backoffScale 0.01), not the short backoff', async () => {
    h.fakes.meta.failNext(1, { type: 'rateLimit', retryAfterSec: 60 });
    await conversionOn(['meta']);
    await allSettled(db.pool);
    const [gap] = gaps(h.fakes.meta.received.map((r) => r.receivedAt));
    // The plain backoff after a first failure is 0.5–1 s × 0.01 = 5–10 ms.
    expect(gap).toBeGreaterThanOrEqual(600);
  });

  it('Snapchat 429: honours Retry-After', async () => {
    h.fakes.snapchat.failNext(1, { type: 'rateLimit', retryAfterSec: 30 });
    await conversionOn(['snapchat']);
    await allSettled(db.pool);
    expect(h.fakes.snapchat.received).toHaveLength(2);
    const [gap] = gaps(h.fakes.snapchat.received.map((r) => r.receivedAt));
    expect(gap).toBeGreaterThanOrEqual(300);
  });

  it('Google quota error: honours quotaErrorDetails.retryDelay', async () => {
    h.fakes.google.failNext(1, { type: 'rateLimit', retryAfterSec: 40 });
    await conversionOn(['google']);
    await allSettled(db.pool);
    const [gap] = gaps(h.fakes.google.received.map((r) => r.receivedAt));
    expect(gap).toBeGreaterThanOrEqual(400);
  });

  it('a timeout gives up on the request after requestTimeoutMs and retries', async () => {
    h.fakes.meta.failNext(1, { type: 'timeout' });
    await conversionOn(['meta']);
    await allSettled(db.pool);
    const [gap] = gaps(h.fakes.meta.received.map((r) => r.receivedAt));
    expect(gap).toBeGreaterThanOrEqual(390);
    expect(gap).toBeLessThan(2000);
  });

  it('capiStatus stays pending while a send is being retried', async () => {
    h.fakes.meta.failNext(1, { type: 'rateLimit', retryAfterSec: 60 });
    const { conversionId } = await conversionOn(['meta']);
    await h.fakes.meta.waitFor((log) => log.length === 1);
    await new Promise((r) => setTimeout(r, 100));
    const [send] = await sendsOf(db.pool, 'conversion_id = $1', [conversionId]);
    expect(send).toMatchObject({ status: 'pending', attempts: 1 });
    expect(send!.last_error).toMatch(/User request limit reached \(code 17\/2446079\)/);
    expect(await capiStatus(conversionId)).toBe('pending');
    expect(await h.deps.metrics.registry.getSingleMetricAsString('capigram_sends_total')).toMatch(
      /platform="meta",outcome="retry"\} [1-9]/,
    );
    await allSettled(db.pool);
    expect(await capiStatus(conversionId)).toBe('sent');
  });
});

describe('permanent failures are not retried', () => {
  it('Meta invalid token: failed with the platform message after one request', async () => {
    h.fakes.meta.failNext(1, { type: 'invalidToken' });
    const { conversionId } = await conversionOn(['meta']);
    const [send] = await allSettled(db.pool).then(() =>
      sendsOf(db.pool, 'conversion_id = $1', [conversionId]),
    );
    expect(send).toMatchObject({ status: 'failed', attempts: 1 });
    expect(send!.last_error).toBe('Error validating access token: Session has expired. (code 190/463)');
    await new Promise((r) => setTimeout(r, 200));
    expect(h.fakes.meta.received).toHaveLength(1);
    expect(await capiStatus(conversionId)).toBe('failed');
  });

  it('TikTok invalid token (40105 in a 200): failed', async () => {
    h.fakes.tiktok.failNext(1, { type: 'invalidToken' });
    const { conversionId } = await conversionOn(['tiktok']);
    const [send] = await allSettled(db.pool).then(() =>
      sendsOf(db.pool, 'conversion_id = $1', [conversionId]),
    );
    expect(send).toMatchObject({
      status: 'failed',
      last_error: 'Access token is incorrect or has been revoked. (code 40105)',
    });
    expect(h.fakes.tiktok.received).toHaveLength(1);
  });

  it('a send still failing after maxAttempts is failed with its last error', async () => {
    await h.stopWorker();
    await h.startWorker({ maxAttempts: 3 });
    try {
      h.fakes.snapchat.failRate(1, [{ type: 'status', status: 503 }]);
      const { conversionId } = await conversionOn(['snapchat']);
      const [send] = await allSettled(db.pool).then(() =>
        sendsOf(db.pool, 'conversion_id = $1', [conversionId]),
      );
      expect(send).toMatchObject({ status: 'failed', attempts: 3 });
      expect(send!.last_error).toBe(
        'gave up after 3 attempts; last error: HTTP 503: INVALID: Internal server error',
      );
      expect(h.fakes.snapchat.received).toHaveLength(3);
    } finally {
      await h.stopWorker();
      await h.startWorker();
    }
  });

  it('an unreadable pixel configuration fails the send without a request', async () => {
    const { siteId, pixels } = await createSiteWith(h.deps, ['meta']);
    await db.pool.query(`UPDATE pixels SET secrets_enc = 'v1.garbage.garbage.garbage' WHERE id = $1`, [
      pixels.meta,
    ]);
    const { conversionId } = await createConversion(db.pool, siteId, {
      eventSourceUrl: 'https://shop.example.com/',
      userAgent: UA,
    });
    const [send] = await allSettled(db.pool).then(() =>
      sendsOf(db.pool, 'conversion_id = $1', [conversionId]),
    );
    expect(send).toMatchObject({
      status: 'failed',
      last_error: 'pixel credentials cannot be decrypted (was SECRET_KEY changed?)',
    });
    expect(h.fakes.meta.received).toHaveLength(0);
  });
});

describe('sends that cannot be valid are skipped with the reason', () => {
  it('a PageView without a User-Agent (a website event needs one: Meta, TikTok, Snapchat); Google never takes page views', async () => {
    const { siteId } = await createSiteWith(h.deps, ['meta', 'tiktok', 'snapchat', 'google']);
    const visitId = await createVisit(
      db.pool,
      siteId,
      { href: 'https://shop.example.com/', clientIp: '203.0.113.7', userAgent: null },
      true,
    );
    const sends = await allSettled(db.pool).then(() => sendsOf(db.pool, 'visit_id = $1', [visitId]));
    expect(Object.fromEntries(sends.map((s) => [s.platform, [s.status, s.skip_reason, s.attempts]]))).toEqual(
      {
        meta: ['skipped', 'missing user agent (required for website events)', 0],
        tiktok: ['skipped', 'missing user agent (required for website events)', 0],
        snapchat: ['skipped', 'missing user agent (required for website events)', 0],
        google: ['skipped', 'page views are not uploaded to Google Ads', 0],
      },
    );
    expect(
      h.fakes.meta.received.length +
        h.fakes.tiktok.received.length +
        h.fakes.snapchat.received.length +
        h.fakes.google.received.length,
    ).toBe(0);
  });

  // A conversion without a browser is no longer skipped (issue: business events without a browser
  // were dropped everywhere): it goes out as a non-website event. Google still needs a click id or PII.
  it('a conversion without a User-Agent goes out as a non-website event (Meta, TikTok, Snapchat); no click id or e-mail or phone (Google): skipped', async () => {
    const { conversionId } = await conversionOn(
      ['meta', 'tiktok', 'snapchat', 'google'],
      {},
      { userAgent: null, gclid: null },
    );
    const sends = await allSettled(db.pool).then(() =>
      sendsOf(db.pool, 'conversion_id = $1', [conversionId]),
    );
    expect(Object.fromEntries(sends.map((s) => [s.platform, [s.status, s.skip_reason, s.attempts]]))).toEqual(
      {
        meta: ['sent', null, 1],
        tiktok: ['sent', null, 1],
        snapchat: ['sent', null, 1],
        google: [
          'skipped',
          'no Google click id (gclid, gbraid, wbraid) and no e-mail or phone to match the conversion with',
          0,
        ],
      },
    );
    const meta = (h.fakes.meta.received[0]!.body as { data: Record<string, any>[] }).data[0]!;
    expect(meta.action_source).toBe('system_generated');
    expect(meta.user_data.client_user_agent).toBeUndefined();
    const snap = (h.fakes.snapchat.received[0]!.body as { data: Record<string, any>[] }).data[0]!;
    expect(snap.action_source).toBe('OFFLINE');
    expect(h.fakes.google.received).toHaveLength(0);
    expect(await capiStatus(conversionId)).toBe('sent');
    expect(await h.deps.metrics.registry.getSingleMetricAsString('capigram_sends_total')).toMatch(
      /platform="google",outcome="skipped"\} [1-9]/,
    );
  });

  it("too old for Meta (8 days) but inside Snapchat's 37 days: skipped on one, delivered on the other; capiStatus sent", async () => {
    const eventTime = new Date(Date.now() - 8 * 24 * 3600_000);
    const { conversionId } = await conversionOn(['meta', 'snapchat'], { eventTime });
    const sends = await allSettled(db.pool).then(() =>
      sendsOf(db.pool, 'conversion_id = $1', [conversionId]),
    );
    expect(Object.fromEntries(sends.map((s) => [s.platform, [s.status, s.skip_reason]]))).toEqual({
      meta: ['skipped', "event is older than Meta's 7-day window"],
      snapchat: ['sent', null],
    });
    expect(await capiStatus(conversionId)).toBe('sent');
  });

  it('a pixel deactivated after the send was queued', async () => {
    const { siteId, pixels } = await createSiteWith(h.deps, ['meta']);
    await h.stopWorker();
    try {
      const { conversionId } = await createConversion(db.pool, siteId, {
        eventSourceUrl: 'https://shop.example.com/',
        userAgent: UA,
      });
      await db.pool.query('UPDATE pixels SET active = false WHERE id = $1', [pixels.meta]);
      await h.startWorker();
      const [send] = await allSettled(db.pool).then(() =>
        sendsOf(db.pool, 'conversion_id = $1', [conversionId]),
      );
      expect(send).toMatchObject({ status: 'skipped', skip_reason: 'the pixel was deactivated' });
    } finally {
      if (!h.worker) await h.startWorker();
    }
  });
});

describe('capiStatus follows the sends', () => {
  it('one platform failed permanently, another delivered: failed', async () => {
    h.fakes.meta.failNext(1, { type: 'invalidToken' });
    const { conversionId } = await conversionOn(['meta', 'snapchat']);
    const sends = await allSettled(db.pool).then(() =>
      sendsOf(db.pool, 'conversion_id = $1', [conversionId]),
    );
    expect(Object.fromEntries(sends.map((s) => [s.platform, s.status]))).toEqual({
      meta: 'failed',
      snapchat: 'sent',
    });
    expect(await capiStatus(conversionId)).toBe('failed');
  });
});

describe("Google's partial failure: each row has its own outcome", () => {
  it('delivered, already uploaded (counts as delivered), unparseable gclid (failed) and too recent (retried) in one upload', async () => {
    const { siteId } = await createSiteWith(h.deps, ['google']);
    h.fakes.google.setGclidOutcome('dup-gclid', 'CLICK_CONVERSION_ALREADY_EXISTS');
    h.fakes.google.setGclidOutcome('recent-gclid', 'TOO_RECENT_CONVERSION_ACTION', 1);
    await h.stopWorker();
    const ids: Record<string, string> = {};
    try {
      for (const gclid of ['good-gclid', 'dup-gclid', 'bad.gclid', 'recent-gclid']) {
        ids[gclid] = (
          await createConversion(db.pool, siteId, { apiVisitOverride: { gclid }, coldLead: true })
        ).conversionId;
      }
    } finally {
      // One job at a time, so that the four rows go out in one upload (concurrent jobs split a batch).
      await h.startWorker({}, 1);
    }
    const sends = await allSettled(db.pool);
    await h.stopWorker();
    await h.startWorker();
    const of = (gclid: string) => sends.find((s) => s.conversion_id === ids[gclid])!;
    expect(of('good-gclid')).toMatchObject({ status: 'sent', attempts: 1 });
    expect(of('dup-gclid')).toMatchObject({ status: 'sent', attempts: 1 });
    expect(of('bad.gclid')).toMatchObject({
      status: 'failed',
      attempts: 1,
      last_error: 'UNPARSEABLE_GCLID: The click identifier could not be decoded.',
    });
    expect(of('recent-gclid')).toMatchObject({ status: 'sent', attempts: 2 });
    const uploads = h.fakes.google.received.map((r) =>
      (r.body as { conversions: { gclid: string }[] }).conversions.map((c) => c.gclid),
    );
    expect(uploads[0]).toHaveLength(4);
    expect(uploads.slice(1)).toEqual([['recent-gclid']]);
    expect(
      h.fakes.google
        .conversions()
        .map((c) => c.conversion.orderId)
        .sort(),
    ).toEqual([ids['good-gclid'], ids['recent-gclid']].sort());
  });
});
