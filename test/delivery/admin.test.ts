// Operator functions behind `sends list` and `sends retry`, and the sweep that wakes a worker for
// due sends no wake-up announced.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listSends, retrySend } from '../../backend/delivery/admin.js';
import { sweepDue } from '../../backend/delivery/sweep.js';
import { ApiError } from '../../backend/errors.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import {
  allSettled,
  createConversion,
  createSiteWith,
  createVisit,
  deliveryHarness,
  recordConversionUnannounced,
  sendsOf,
  UA,
  waitUntil,
  type DeliveryHarness,
} from './support.js';

let db: TestDatabase;
let h: DeliveryHarness;
let site: { siteId: string; websiteId: string };
let other: { siteId: string };

beforeAll(async () => {
  db = await createTestDatabase();
  h = await deliveryHarness(db.pool);
  site = await createSiteWith(h.deps, ['meta', 'google']);
  other = await createSiteWith(h.deps, ['meta']);
  await h.startWorker();
});
afterAll(async () => {
  await h.close();
  await db.drop();
});

async function refusal(p: Promise<unknown>): Promise<ApiError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

async function capiStatus(conversionId: string): Promise<string> {
  return (await db.pool.query('SELECT capi_status FROM conversions WHERE id = $1', [conversionId])).rows[0]
    .capi_status;
}

describe('listSends', () => {
  let failedConversion: string;

  beforeAll(async () => {
    h.fakes.meta.failNext(1, { type: 'invalidToken' });
    const visitId = await createVisit(db.pool, site.siteId, {
      href: 'https://shop.example.com/',
      userAgent: UA,
    });
    failedConversion = (await createConversion(db.pool, site.siteId, { visitId })).conversionId;
    await allSettled(db.pool);
    await createConversion(db.pool, site.siteId, { visitId });
    await createConversion(db.pool, other.siteId, {
      eventSourceUrl: 'https://other.example.com/',
      userAgent: UA,
    });
    await allSettled(db.pool);
  });

  it("lists a site's sends newest first, by site id or websiteId, and no other site's", async () => {
    const byId = await listSends(db.pool, { siteId: site.siteId });
    const byWebsite = await listSends(db.pool, { siteId: site.websiteId });
    expect(byWebsite).toEqual(byId);
    expect(byId.sends).toHaveLength(4);
    expect(byId.sends.map((s) => s.conversionId)).not.toContain(undefined);
    expect(byId.sends.slice(2).every((s) => s.conversionId === failedConversion)).toBe(true);
    const meta = byId.sends.find((s) => s.conversionId === failedConversion && s.platform === 'meta')!;
    expect(meta).toEqual({
      sendId: meta.sendId,
      platform: 'meta',
      status: 'failed',
      attempts: 1,
      lastError: 'Error validating access token: Session has expired. (code 190/463)',
      conversionId: failedConversion,
      visitId: null,
      pixelId: meta.pixelId,
      eventType: 'Subscribe',
    });
    const google = byId.sends.find((s) => s.conversionId === failedConversion && s.platform === 'google')!;
    expect(google).toMatchObject({
      status: 'skipped',
      attempts: 0,
      lastError:
        'no Google click id (gclid, gbraid, wbraid) and no e-mail or phone to match the conversion with',
    });
    const otherSends = await listSends(db.pool, { siteId: other.siteId });
    expect(otherSends.sends).toHaveLength(1);
    expect(byId.sends.map((s) => s.sendId)).not.toContain(otherSends.sends[0]!.sendId);
  });

  it('filters by status and limits the count (default 50, at most 1000)', async () => {
    expect(
      (await listSends(db.pool, { siteId: site.siteId, status: 'failed' })).sends.map((s) => s.platform),
    ).toEqual(['meta']);
    expect((await listSends(db.pool, { siteId: site.siteId, status: 'skipped' })).sends).toHaveLength(2);
    expect((await listSends(db.pool, { siteId: site.siteId, limit: 1 })).sends).toHaveLength(1);
    expect((await listSends(db.pool, { siteId: site.siteId, limit: '3' })).sends).toHaveLength(3);
  });

  it("filters by kind (a visit's PageViews or conversions) and by pixel", async () => {
    const visitId = await createVisit(
      db.pool,
      site.siteId,
      { href: 'https://shop.example.com/landing', userAgent: UA },
      true,
    );
    await allSettled(db.pool);
    const pageViews = (await listSends(db.pool, { siteId: site.siteId, kind: 'pageview' })).sends;
    expect(pageViews.length).toBeGreaterThan(0);
    expect(pageViews.every((s) => s.visitId === visitId && s.eventType === 'PageView')).toBe(true);
    const conversions = (await listSends(db.pool, { siteId: site.siteId, kind: 'conversion' })).sends;
    expect(conversions).toHaveLength(4);
    expect(conversions.every((s) => s.conversionId !== null && s.eventType !== 'PageView')).toBe(true);
    const all = (await listSends(db.pool, { siteId: site.siteId })).sends;
    const metaPixel = all.find((s) => s.platform === 'meta')!.pixelId;
    const ofMeta = (await listSends(db.pool, { siteId: site.siteId, pixelId: metaPixel })).sends;
    expect(ofMeta.length).toBeGreaterThan(0);
    expect(ofMeta.every((s) => s.platform === 'meta' && s.pixelId === metaPixel)).toBe(true);
    expect(ofMeta.length).toBeLessThan(all.length);
    // Another site's pixel names none of this site's sends.
    const foreignPixel = (await listSends(db.pool, { siteId: other.siteId })).sends[0]!.pixelId;
    expect((await listSends(db.pool, { siteId: site.siteId, pixelId: foreignPixel })).sends).toEqual([]);
    expect(
      (await refusal(listSends(db.pool, { siteId: site.siteId, kind: 'visit' as 'pageview' }))).code,
    ).toBe('VALIDATION_FAILED');
    expect((await refusal(listSends(db.pool, { siteId: site.siteId, pixelId: 'meta' }))).code).toBe(
      'VALIDATION_FAILED',
    );
  });

  it('refuses bad input with VALIDATION_FAILED and an unknown site with NOT_FOUND', async () => {
    expect((await refusal(listSends(db.pool, { siteId: site.siteId, limit: 1001 }))).code).toBe(
      'VALIDATION_FAILED',
    );
    expect((await refusal(listSends(db.pool, { siteId: site.siteId, limit: 0 }))).code).toBe(
      'VALIDATION_FAILED',
    );
    expect((await refusal(listSends(db.pool, { siteId: site.siteId, limit: 'ten' }))).code).toBe(
      'VALIDATION_FAILED',
    );
    expect((await refusal(listSends(db.pool, { siteId: site.siteId, status: 'lost' as 'sent' }))).code).toBe(
      'VALIDATION_FAILED',
    );
    expect((await refusal(listSends(db.pool, { siteId: 'ws_nope' }))).code).toBe('NOT_FOUND');
    expect((await refusal(listSends(db.pool, { siteId: '00000000-0000-4000-8000-000000000000' }))).code).toBe(
      'NOT_FOUND',
    );
  });

  describe('retrySend', () => {
    it('puts a failed send back in the queue with a fresh budget; it is delivered and capiStatus follows', async () => {
      const [failed] = await sendsOf(db.pool, `conversion_id = $1 AND platform = 'meta'`, [failedConversion]);
      expect(await capiStatus(failedConversion)).toBe('failed');
      h.fakes.meta.reset();
      expect(await retrySend(db.pool, failed!.id)).toEqual({ sendId: failed!.id, status: 'pending' });
      await allSettled(db.pool);
      const [after] = await sendsOf(db.pool, 'id = $1', [failed!.id]);
      expect(after).toMatchObject({ status: 'sent', attempts: 1, last_error: null });
      expect(h.fakes.meta.events().map((e) => e.event.event_id)).toEqual([`cnv_${failedConversion}`]);
      expect(await capiStatus(failedConversion)).toBe('sent');
    });

    it('a skipped send is tried again (and skipped again while it still cannot be valid)', async () => {
      const [skipped] = await sendsOf(db.pool, `conversion_id = $1 AND platform = 'google'`, [
        failedConversion,
      ]);
      await retrySend(db.pool, skipped!.id);
      const [after] = await allSettled(db.pool).then(() => sendsOf(db.pool, 'id = $1', [skipped!.id]));
      expect(after).toMatchObject({
        status: 'skipped',
        skip_reason:
          'no Google click id (gclid, gbraid, wbraid) and no e-mail or phone to match the conversion with',
      });
    });

    it('refuses a delivered send, and unknown or malformed ids with NOT_FOUND', async () => {
      const [sent] = await sendsOf(db.pool, `conversion_id = $1 AND platform = 'meta'`, [failedConversion]);
      expect((await refusal(retrySend(db.pool, sent!.id))).code).toBe('VALIDATION_FAILED');
      expect((await refusal(retrySend(db.pool, '00000000-0000-4000-8000-000000000000'))).code).toBe(
        'NOT_FOUND',
      );
      expect((await refusal(retrySend(db.pool, 'not-a-send'))).code).toBe('NOT_FOUND');
    });
  });
});

describe('the sweep: sends no wake-up announced', () => {
  it('delivers a committed send whose producer died before waking a worker, despite a wake-up job a dead worker holds', async () => {
    await h.stopWorker();
    h.fakes.resetAll();
    // A deliver_due job taken by a worker that was then killed: graphile-worker keeps it locked for 4 hours.
    await db.pool.query(
      `SELECT graphile_worker.add_job('deliver_due', '{}'::json, job_key := 'deliver_due')`,
    );
    await db.pool.query(
      `UPDATE graphile_worker._private_jobs SET locked_at = now(), locked_by = 'dead-worker' WHERE locked_at IS NULL`,
    );
    const { conversionId } = await recordConversionUnannounced(db.pool, other.siteId, {
      eventSourceUrl: 'https://other.example.com/',
      userAgent: UA,
    });
    const started = Date.now();
    await h.startWorker();
    await waitUntil(
      async () => (await sendsOf(db.pool, 'conversion_id = $1', [conversionId]))[0]!.status === 'sent',
      5000,
      'the swept send',
    );
    // The harness's poll interval is 100 ms: found by the first sweeps, not by a minute-long cron.
    expect(Date.now() - started).toBeLessThan(2000);
    expect(h.fakes.meta.events().map((e) => e.event.event_id)).toEqual([`cnv_${conversionId}`]);
  });

  it('queues one wake-up only when something is due, however often it runs', async () => {
    await h.stopWorker();
    try {
      await db.pool.query(`DELETE FROM graphile_worker._private_jobs`);
      const wakeUps = async () =>
        (
          await db.pool.query(
            `SELECT count(*)::int AS n FROM graphile_worker.jobs WHERE task_identifier = 'deliver_due'`,
          )
        ).rows[0].n as number;
      const { conversionId } = await recordConversionUnannounced(db.pool, other.siteId, {
        eventSourceUrl: 'https://other.example.com/',
        userAgent: UA,
      });
      // Leased by a worker, or waiting for a retry: not due, nothing to wake.
      await db.pool.query(
        `UPDATE sends SET next_attempt_at = now() + interval '1 minute' WHERE conversion_id = $1`,
        [conversionId],
      );
      expect(await sweepDue(db.pool)).toBe(false);
      expect(await wakeUps()).toBe(0);
      await db.pool.query(
        `UPDATE sends SET next_attempt_at = now() - interval '1 second' WHERE conversion_id = $1`,
        [conversionId],
      );
      expect(await sweepDue(db.pool)).toBe(true);
      expect(await sweepDue(db.pool)).toBe(true);
      // Keyed: sweeping again does not pile up jobs.
      expect(await wakeUps()).toBe(1);
    } finally {
      await h.startWorker();
      await allSettled(db.pool);
    }
  });
});
