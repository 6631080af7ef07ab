// Orders on business events (`orderId`): distinct orders are distinct conversions within the dedup
// window, the same order is one, for Capigram and, through the order fields and the event id
// derived from the order, for every platform (the fakes, through the real worker).
import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Fakes } from '../fakes/index.js';
import type { TestDatabase } from '../harness/db.js';
import type { TestApp } from '../harness/app.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { GOOGLE_CUSTOMER, SNAP_PIXEL } from '../delivery/support.js';
import {
  type ApiClient,
  apiWorld,
  attributedJoin,
  META_PIXEL,
  newUser,
  type Tenant,
  TIKTOK_PIXEL,
} from './support.js';

const world = apiWorld({ tenant: { platforms: ['meta', 'tiktok'] }, fakes: true });
let fakes: Fakes;
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;

beforeAll(async () => {
  ({ db, t, api, tenant, fakes } = world);
  const deps = { pool: db.pool, box: t.deps.box };
  await addPixel(deps, {
    platform: 'snapchat',
    siteId: tenant.site.siteId,
    pixelId: SNAP_PIXEL,
    accessToken: 'snap-test-token',
  });
  await addPixel(deps, {
    platform: 'google',
    siteId: tenant.site.siteId,
    customerId: GOOGLE_CUSTOMER,
    oauthToken: 'google-oauth-token',
    conversionActions: ['Purchase=222'],
  });
});

/** The event id a platform gets for an order, computed here from its definition (migration 191). */
function orderEventId(siteId: string, eventType: string, orderId: string, custom = ''): string {
  const digest = createHash('sha256')
    .update(`${siteId}\n${eventType}\n${custom}\n${orderId}`, 'utf8')
    .digest('hex');
  return `ord_${digest.slice(0, 40)}`;
}

async function eventually<T>(what: string, find: () => T | undefined): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const found = find();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`never received: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** What each of the four fakes received for the order's event id (waits until all four have it). */
async function atEveryPlatform(eventId: string, orderId: string) {
  const meta = await eventually('meta', () =>
    fakes.meta.events(META_PIXEL).find((e) => e.event.event_id === eventId),
  );
  const tiktok = await eventually('tiktok', () =>
    fakes.tiktok.events(TIKTOK_PIXEL).find((e) => e.event.event_id === eventId),
  );
  const snap = await eventually('snapchat', () =>
    fakes.snapchat.events(SNAP_PIXEL).find((e) => e.event.event_id === eventId),
  );
  // A new Google pixel goes through the Data Manager API: the order is the event's transaction id.
  const google = await eventually('google', () =>
    fakes.googleDataManager.events().find((e) => e.event.transactionId === orderId),
  );
  return { meta: meta.event, tiktok: tiktok.event, snap: snap.event, google: google.event };
}

async function purchase(telegramUserId: number, orderId: string | undefined, value = 49) {
  return api.post(
    '/events/conversion',
    {
      telegramUserId,
      eventType: 'Purchase',
      value,
      currency: 'EUR',
      // Google takes a conversion without a click id only with a user identifier.
      pii: { email: `buyer${telegramUserId}@example.com` },
      ...(orderId === undefined ? {} : { orderId }),
    },
    { key: tenant.accountKey },
  );
}

async function warmLead(): Promise<number> {
  const user = newUser();
  await attributedJoin(db.pool, {
    siteId: tenant.site.siteId,
    channelId: tenant.site.channels.main,
    telegramUserId: user,
  });
  return user;
}

async function conversionsOf(user: number): Promise<{ id: string; order_id: string | null }[]> {
  const { rows } = await db.pool.query<{ id: string; order_id: string | null }>(
    'SELECT id, order_id FROM conversions WHERE telegram_user_id = $1 ORDER BY received_at, id',
    [user],
  );
  return rows;
}

describe('orderId', () => {
  it('two purchases with different orderIds within a minute are two conversions and two events at every platform', async () => {
    const user = await warmLead();
    const first = await purchase(user, 'ORD-1001', 49);
    const second = await purchase(user, 'ORD-1002', 19);
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.body).toMatchObject({ deduplicated: false, updatedExisting: false });
    expect(second.body.conversionId).not.toBe(first.body.conversionId);
    expect((await conversionsOf(user)).map((c) => c.order_id)).toEqual(['ORD-1001', 'ORD-1002']);

    for (const [orderId, value] of [
      ['ORD-1001', 49],
      ['ORD-1002', 19],
    ] as const) {
      const eventId = orderEventId(tenant.site.siteId, 'Purchase', orderId);
      const got = await atEveryPlatform(eventId, orderId);
      expect(got.meta.custom_data).toMatchObject({ order_id: orderId, value });
      expect(got.tiktok.event).toBe('Purchase');
      expect(got.tiktok.properties).toMatchObject({ order_id: orderId, value });
      expect(got.snap.custom_data).toMatchObject({ order_id: orderId, transaction_id: orderId });
      expect(got.google.transactionId).toBe(orderId);
    }
  });

  it('the same orderId twice is one conversion and one event at every platform', async () => {
    const user = await warmLead();
    const first = await purchase(user, 'ORD-2001');
    expect(first.status).toBe(201);
    const eventId = orderEventId(tenant.site.siteId, 'Purchase', 'ORD-2001');
    await atEveryPlatform(eventId, 'ORD-2001');
    const again = await purchase(user, 'ORD-2001');
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      conversionId: first.body.conversionId,
      deduplicated: true,
      dispatched: false,
    });
    expect(again.body.warning).toContain('orderId');
    expect(await conversionsOf(user)).toHaveLength(1);
    // A pause for anything a second send would have brought.
    await new Promise((r) => setTimeout(r, 300));
    expect(fakes.meta.events(META_PIXEL).filter((e) => e.event.event_id === eventId)).toHaveLength(1);
    expect(fakes.tiktok.events(TIKTOK_PIXEL).filter((e) => e.event.event_id === eventId)).toHaveLength(1);
    expect(fakes.snapchat.events(SNAP_PIXEL).filter((e) => e.event.event_id === eventId)).toHaveLength(1);
    expect(fakes.googleDataManager.events().filter((e) => e.event.transactionId === 'ORD-2001')).toHaveLength(
      1,
    );
  });

  it('an order matches only the same order: a purchase without orderId still merges, and says so naming orderId', async () => {
    const user = await warmLead();
    const plain = await purchase(user, undefined);
    expect(plain.status).toBe(201);
    const merged = await purchase(user, undefined);
    expect(merged.status).toBe(200);
    expect(merged.body.deduplicated).toBe(true);
    expect(merged.body.warning).toMatch(/orderId/);
    // An order inside the window of the plain purchase is a conversion of its own.
    const ordered = await purchase(user, 'ORD-3001');
    expect(ordered.status).toBe(201);
    expect(ordered.body.conversionId).not.toBe(plain.body.conversionId);
  });

  it('two requests with the same order at once make one conversion (one user, and two users)', async () => {
    const user = await warmLead();
    const same = await Promise.all([purchase(user, 'ORD-4001'), purchase(user, 'ORD-4001')]);
    expect(same.map((r) => r.status).sort()).toEqual([200, 201]);
    expect(new Set(same.map((r) => r.body.conversionId)).size).toBe(1);

    const [a, b] = [await warmLead(), await warmLead()];
    const racing = await Promise.all([purchase(a, 'ORD-4002'), purchase(b, 'ORD-4002')]);
    expect(racing.map((r) => r.status).sort()).toEqual([200, 201]);
    expect(new Set(racing.map((r) => r.body.conversionId)).size).toBe(1);
    const { rows } = await db.pool.query('SELECT id FROM conversions WHERE order_id = $1', ['ORD-4002']);
    expect(rows).toHaveLength(1);
    const loser = racing.find((r) => r.status === 200)!;
    expect(loser.body.warning).toMatch(/another Telegram user/);
  });

  it('the order is told apart by event type and by custom name', async () => {
    const user = await warmLead();
    const lead = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', orderId: 'ORD-5001' },
      { key: tenant.accountKey },
    );
    const bought = await purchase(user, 'ORD-5001');
    const customA = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Custom', customEventName: 'Renewal', orderId: 'ORD-5001' },
      { key: tenant.accountKey },
    );
    const customB = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Custom', customEventName: 'Upsell', orderId: 'ORD-5001' },
      { key: tenant.accountKey },
    );
    expect([lead.status, bought.status, customA.status, customB.status]).toEqual([201, 201, 201, 201]);
  });

  it.each([
    ['empty', ''],
    ['too long', 'x'.repeat(129)],
    ['a control character', 'ORD\u00071'],
    ['a number', 1001],
  ])('refuses an orderId that is %s as VALIDATION_FAILED', async (_what, orderId) => {
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: newUser(), eventType: 'Lead', siteId: tenant.site.siteId, orderId },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/problem\+json/);
    expect(res.body.code).toBe('VALIDATION_FAILED');
  });

  it('takes an orderId of 128 characters on a lead event', async () => {
    const user = await warmLead();
    const res = await api.post(
      `/leads/${user}/events`,
      { eventType: 'Lead', orderId: 'y'.repeat(128) },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(201);
    expect((await conversionsOf(user))[0]!.order_id).toBe('y'.repeat(128));
  });
});
