// One deliver_due job delivers every pixel with due sends side by side: the database failing under
// one pixel (here a trigger refusing its claims, a real PostgreSQL error) must not cut the others
// short, and the job must still fail so that graphile-worker retries it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliveryOptions } from '../../backend/delivery/options.js';
import { deliverDue } from '../../backend/delivery/pipeline.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import {
  createConversion,
  createSiteWith,
  createVisit,
  deliveryHarness,
  sendsOf,
  TEST_DELIVERY,
  UA,
  type DeliveryHarness,
} from './support.js';

let db: TestDatabase;
let h: DeliveryHarness;

beforeAll(async () => {
  db = await createTestDatabase();
  h = await deliveryHarness(db.pool);
});
afterAll(async () => {
  await db.pool.query('DROP TRIGGER IF EXISTS refuse_claims ON sends');
  await h.close();
  await db.drop();
});

describe('pixels side by side', () => {
  it('a pixel whose claims fail leaves the others delivered, and the job fails to be retried', async () => {
    const site = await createSiteWith(h.deps, ['meta', 'tiktok']);
    const visitId = await createVisit(db.pool, site.siteId, {
      href: 'https://shop.example.com/',
      clientIp: '203.0.113.7',
      userAgent: UA,
    });
    const { conversionId } = await createConversion(db.pool, site.siteId, {
      visitId,
      eventSourceUrl: 'https://shop.example.com/',
      userAgent: UA,
    });
    await db.pool.query(`
      CREATE OR REPLACE FUNCTION refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'claims of this pixel are refused'; END $$`);
    await db.pool.query(
      `CREATE TRIGGER refuse_claims BEFORE UPDATE ON sends FOR EACH ROW WHEN (OLD.pixel_id = '${site.pixels.tiktok}'::uuid) EXECUTE FUNCTION refuse_claims()`,
    );

    const o = deliveryOptions(TEST_DELIVERY);
    await expect(deliverDue(h.deps, o)).rejects.toThrow('claims of this pixel are refused');
    const byPlatform = async () =>
      Object.fromEntries(
        (await sendsOf(db.pool, 'conversion_id = $1', [conversionId])).map((s) => [s.platform, s.status]),
      );
    expect(await byPlatform()).toEqual({ meta: 'sent', tiktok: 'pending' });
    expect(h.fakes.meta.events().map((e) => e.event.event_id)).toEqual([`cnv_${conversionId}`]);

    // Once the database behaves again, the retry delivers what was left, and nothing twice.
    await db.pool.query('DROP TRIGGER refuse_claims ON sends');
    expect(await deliverDue(h.deps, o)).toEqual({ claimed: 1, requests: 1 });
    expect(await byPlatform()).toEqual({ meta: 'sent', tiktok: 'sent' });
    expect(h.fakes.meta.events()).toHaveLength(1);
  });
});
