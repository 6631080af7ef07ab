// The spec's state table and resolution rules, row by row: warm leads (acquisition site, channel,
// visit), known leads without an acquisition, and the recent-matching-conversion reuse (pending,
// failed or skipped → updated and dispatched again; sent → returned untouched).
import { beforeAll, describe, expect, it } from 'vitest';
import { withTx } from '../../backend/db/pool.js';
import { recordConversion } from '../../backend/domain/outbox/conversion-record.js';
import type { TestDatabase } from '../harness/db.js';
import type { TestClock } from '../harness/app.js';
import {
  type ApiClient,
  apiWorld,
  attributedJoin,
  count,
  insertVisit,
  newUser,
  type Tenant,
  waitingJoin,
} from './support.js';
import { MERGED_WITHOUT_ORDER } from '../../backend/domain/conversions/order-id.js';

const world = apiWorld({ tenant: { platforms: ['meta', 'tiktok'], sites: 2 }, clock: true });
let db: TestDatabase;
let api: ApiClient;
let clock: TestClock;
let tenant: Tenant;

beforeAll(() => {
  ({ db, api, tenant, clock } = world);
});

const conversion = async (id: string) =>
  (await db.pool.query('SELECT * FROM conversions WHERE id = $1', [id])).rows[0] as Record<string, any>;
const sendsOf = async (id: string) =>
  (
    await db.pool.query(
      'SELECT id, platform, status, attempts FROM sends WHERE conversion_id = $1 ORDER BY platform',
      [id],
    )
  ).rows as {
    id: string;
    platform: string;
    status: string;
    attempts: number;
  }[];
/** Sends among these that a worker would claim now. */
const dueNow = (sendIds: string[]) =>
  count(db.pool, `sends WHERE id = ANY($1) AND status = 'pending' AND next_attempt_at <= now()`, [sendIds]);
/** The delivery wake-up a committed dispatch leaves queued (keyed, so at most one). */
const wakeUps = () => count(db.pool, `graphile_worker.jobs WHERE key = 'deliver_due' AND run_at <= now()`);

describe('warm lead resolution', () => {
  it("an account key takes the acquisition's site (the second site here) and its channel", async () => {
    const [, s2] = tenant.sites;
    const user = newUser();
    const { visitId } = await attributedJoin(db.pool, {
      siteId: s2!.siteId,
      channelId: s2!.channels.second,
      telegramUserId: user,
    });
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead' },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(201);
    expect(await conversion(res.body.conversionId)).toMatchObject({
      site_id: s2!.siteId,
      channel_id: s2!.channels.second,
      visit_id: visitId,
      cold_lead: false,
    });
  });

  it('the acquisition is the first verified join: a later join on another site never moves it', async () => {
    const [s1, s2] = tenant.sites;
    const user = newUser();
    const first = await attributedJoin(db.pool, {
      siteId: s1!.siteId,
      channelId: s1!.channels.main,
      telegramUserId: user,
      occurredAt: new Date(Date.now() - 86_400_000),
    });
    await attributedJoin(db.pool, { siteId: s2!.siteId, channelId: s2!.channels.main, telegramUserId: user });
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead' },
      { key: tenant.accountKey },
    );
    expect(await conversion(res.body.conversionId)).toMatchObject({
      site_id: s1!.siteId,
      visit_id: first.visitId,
    });
  });

  it("an explicit site restricts to that site's acquisition", async () => {
    const [s1, s2] = tenant.sites;
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: s1!.siteId,
      channelId: s1!.channels.main,
      telegramUserId: user,
      occurredAt: new Date(Date.now() - 86_400_000),
    });
    const second = await attributedJoin(db.pool, {
      siteId: s2!.siteId,
      channelId: s2!.channels.main,
      telegramUserId: user,
    });
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', siteId: s2!.siteId },
      { key: tenant.accountKey },
    );
    expect(await conversion(res.body.conversionId)).toMatchObject({
      site_id: s2!.siteId,
      visit_id: second.visitId,
    });
    const viaKey = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Contact' },
      { key: s2!.siteKey },
    );
    expect(await conversion(viaKey.body.conversionId)).toMatchObject({
      site_id: s2!.siteId,
      visit_id: second.visitId,
    });
  });

  it("a supplied channel of another site is not kept: the acquisition's channel is used", async () => {
    const [s1, s2] = tenant.sites;
    const user = newUser();
    await attributedJoin(db.pool, { siteId: s1!.siteId, channelId: s1!.channels.main, telegramUserId: user });
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', channelId: s2!.channels.second },
      { key: tenant.accountKey },
    );
    expect(await conversion(res.body.conversionId)).toMatchObject({
      site_id: s1!.siteId,
      channel_id: s1!.channels.main,
    });
  });

  it('a webhook conversion with a visit is an acquisition too; leaves and unattributed joins are not', async () => {
    const [s1] = tenant.sites;
    const user = newUser();
    const visitId = await insertVisit(db.pool, s1!.siteId);
    await db.pool.query(
      `INSERT INTO memberships (channel_id, telegram_user_id, kind, attributed, visit_id, occurred_at) VALUES ($1, $2, 'leave', true, $3, now()), ($1, $2, 'join', false, NULL, now())`,
      [s1!.channels.second, user, visitId],
    );
    const cold = await api.post(
      '/events/conversion',
      { telegramUserId: newUser(), eventType: 'Lead' },
      { key: s1!.siteKey },
    );
    expect(cold.status).toBe(400);
    const notYet = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead' },
      { key: s1!.siteKey },
    );
    expect(notYet.body.code).toBe('CHANNEL_REQUIRED');

    const now = new Date();
    await withTx(db.pool, (tx) =>
      recordConversion(
        tx,
        {
          siteId: s1!.siteId,
          channelId: s1!.channels.main,
          telegramUserId: user,
          visitId,
          eventType: 'Subscribe',
          eventTime: now,
          attributedAt: now,
          receivedAt: now,
          source: 'webhook',
        },
        false,
      ),
    );
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead' },
      { key: s1!.siteKey },
    );
    expect(res.status).toBe(201);
    expect(await conversion(res.body.conversionId)).toMatchObject({
      channel_id: s1!.channels.main,
      visit_id: visitId,
      cold_lead: false,
    });
  });
});

describe('a known lead without an acquisition', () => {
  it('is not cold: the channel and the first attribution carry forward, the request fills only what was missing', async () => {
    const [s1] = tenant.sites;
    const user = newUser();
    const first = await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        eventType: 'Lead',
        channelId: s1!.channels.second,
        fbc: 'fb.1.1700000000000.first',
      },
      { key: s1!.siteKey },
    );
    expect(first.body.coldLead).toBe(true);
    const second = await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        eventType: 'Contact',
        fbc: 'fb.1.1700000000000.second',
        fbp: 'fb.1.1700000000000.42',
      },
      { key: tenant.accountKey },
    );
    expect(second.status).toBe(201);
    expect(second.body.coldLead).toBe(false);
    expect(await conversion(second.body.conversionId)).toMatchObject({
      site_id: s1!.siteId,
      channel_id: s1!.channels.second,
      visit_id: null,
      cold_lead: false,
      api_visit_override: { fbc: 'fb.1.1700000000000.first', fbp: 'fb.1.1700000000000.42' },
    });
  });
});

describe('recent matching conversion', () => {
  async function warm(): Promise<{ user: number; visitId: string }> {
    const user = newUser();
    const { visitId } = await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    return { user, visitId };
  }
  const purchase = (user: number, extra: Record<string, unknown> = {}) =>
    api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Purchase', value: 10, currency: 'USD', ...extra },
      { key: tenant.accountKey },
    );

  it('pending → the same conversion, updated with the new value and PII; its sends stay scheduled (200, updatedExisting)', async () => {
    const { user } = await warm();
    const first = await purchase(user, { pii: { email: 'a@example.com' } });
    expect(first.status).toBe(201);
    const firstSends = await sendsOf(first.body.conversionId);
    const again = await purchase(user, {
      value: 25,
      currency: 'eur',
      pii: { phone: '+14155550123' },
      contentName: 'Annual',
    });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      conversionId: first.body.conversionId,
      deduplicated: true,
      updatedExisting: true,
      dispatched: true,
      capiStatus: 'pending',
    });
    expect(again.body.sends.map((s: { sendId: string }) => s.sendId).sort()).toEqual(
      firstSends.map((s) => s.id).sort(),
    );
    const c = await conversion(first.body.conversionId);
    expect(c).toMatchObject({ value: 25, currency: 'EUR', content_name: 'Annual' });
    expect(Object.keys(c.pii_hashed).sort()).toEqual(['em', 'emGoogle', 'ph', 'phE164']);
    expect(await count(db.pool, 'conversions WHERE telegram_user_id = $1', [user])).toBe(1);
    expect(await sendsOf(first.body.conversionId)).toHaveLength(2);
    expect(await dueNow(firstSends.map((s) => s.id))).toBe(2);
    await expect.poll(wakeUps).toBe(1);
  });

  it('failed → its failed sends go back to pending, due now, and a worker is woken (same event id); sent sends are left alone', async () => {
    const { user } = await warm();
    const first = await purchase(user);
    const [meta, tiktok] = await sendsOf(first.body.conversionId);
    await db.pool.query(`UPDATE sends SET status = 'sent', attempts = 1, sent_at = now() WHERE id = $1`, [
      meta!.id,
    ]);
    await db.pool.query(
      `UPDATE sends SET status = 'failed', attempts = 3, last_error = 'bad token' WHERE id = $1`,
      [tiktok!.id],
    );
    await db.pool.query(`UPDATE conversions SET capi_status = 'failed' WHERE id = $1`, [
      first.body.conversionId,
    ]);
    await db.pool.query(`DELETE FROM graphile_worker._private_jobs WHERE key = 'deliver_due'`);

    const again = await purchase(user, { value: 12 });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      conversionId: first.body.conversionId,
      updatedExisting: true,
      deduplicated: true,
      dispatched: true,
      capiStatus: 'pending',
    });
    expect(again.body.sends).toEqual([{ sendId: tiktok!.id, platform: 'tiktok' }]);
    expect(await sendsOf(first.body.conversionId)).toEqual([
      { id: meta!.id, platform: 'meta', status: 'sent', attempts: 1 },
      { id: tiktok!.id, platform: 'tiktok', status: 'pending', attempts: 0 },
    ]);
    expect(await dueNow([meta!.id])).toBe(0);
    expect(await dueNow([tiktok!.id])).toBe(1);
    await expect.poll(wakeUps).toBe(1);
  });

  it('skipped (nothing could be sent) → sends created once the update brings attribution', async () => {
    const user = newUser();
    const first = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', channelId: tenant.site.channels.main },
      { key: tenant.site.siteKey },
    );
    expect(first.body).toMatchObject({ capiStatus: 'skipped', dispatched: false });
    const again = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', fbp: 'fb.1.1700000000000.77', userAgent: 'UA/1' },
      { key: tenant.site.siteKey },
    );
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      conversionId: first.body.conversionId,
      updatedExisting: true,
      dispatched: true,
      capiStatus: 'pending',
      coldLead: true,
    });
    expect(again.body.sends).toHaveLength(2);
    expect((await conversion(first.body.conversionId)).api_visit_override).toEqual({
      fbp: 'fb.1.1700000000000.77',
      userAgent: 'UA/1',
    });
  });

  it('sent → returned untouched: deduplicated, not dispatched, nothing new scheduled', async () => {
    const { user } = await warm();
    const first = await purchase(user, { value: 10 });
    await db.pool.query(`UPDATE sends SET status = 'sent', sent_at = now() WHERE conversion_id = $1`, [
      first.body.conversionId,
    ]);
    await db.pool.query(`UPDATE conversions SET capi_status = 'sent' WHERE id = $1`, [
      first.body.conversionId,
    ]);
    const jobsBefore = await count(db.pool, 'graphile_worker._private_jobs');

    const again = await purchase(user, { value: 99, pii: { email: 'new@example.com' } });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({
      conversionId: first.body.conversionId,
      capiStatus: 'sent',
      deduplicated: true,
      updatedExisting: false,
      dispatched: false,
      sends: [],
    });
    expect(again.body.warning).toMatch(/already sent/);
    const c = await conversion(first.body.conversionId);
    expect(c.value).toBe(10);
    expect(c.pii_hashed).toEqual({});
    expect(await count(db.pool, 'sends WHERE conversion_id = $1', [first.body.conversionId])).toBe(2);
    expect(await count(db.pool, 'graphile_worker._private_jobs')).toBe(jobsBefore);
  });

  it("only within the site's window; a window of 0 turns the reuse off", async () => {
    const { user } = await warm();
    clock.set(Date.now());
    try {
      const first = await purchase(user);
      clock.advance(86_400_000 - 1000);
      expect((await purchase(user)).body.conversionId).toBe(first.body.conversionId);
      clock.advance(2000);
      const later = await purchase(user);
      expect(later.status).toBe(201);
      expect(later.body.conversionId).not.toBe(first.body.conversionId);
    } finally {
      clock.real();
    }
    await db.pool.query('UPDATE sites SET dedup_window_seconds = 0 WHERE id = $1', [tenant.site.siteId]);
    try {
      const a = await purchase(user);
      const b = await purchase(user);
      expect([a.status, b.status]).toEqual([201, 201]);
    } finally {
      await db.pool.query('UPDATE sites SET dedup_window_seconds = 86400 WHERE id = $1', [
        tenant.site.siteId,
      ]);
    }
  });

  it('a different channel, event type or custom event name is a different event', async () => {
    const { user } = await warm();
    const base = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Custom', customEventName: 'Webinar' },
      { key: tenant.accountKey },
    );
    const same = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Custom', customEventName: 'Webinar' },
      { key: tenant.accountKey },
    );
    const otherName = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Custom', customEventName: 'Download' },
      { key: tenant.accountKey },
    );
    const otherType = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead' },
      { key: tenant.accountKey },
    );
    const otherChannel = await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        eventType: 'Custom',
        customEventName: 'Webinar',
        channelId: tenant.site.channels.second,
      },
      { key: tenant.accountKey },
    );
    expect([base.status, same.status, otherName.status, otherType.status, otherChannel.status]).toEqual([
      201, 200, 201, 201, 201,
    ]);
    expect(same.body.conversionId).toBe(base.body.conversionId);
  });

  it('recovers a missing visit from acquisition evidence older than the original receipt, and only from that', async () => {
    const user = newUser();
    const first = await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        eventType: 'Lead',
        channelId: tenant.site.channels.main,
        fbp: 'fb.1.1700000000000.9',
      },
      { key: tenant.site.siteKey },
    );
    const receivedAt = (await conversion(first.body.conversionId)).received_at as Date;

    // A join whose visit came after the receipt cannot have caused it.
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
      visit: { fbc: 'fb.1.1.late', createdAt: new Date(receivedAt.getTime() + 60_000) },
    });
    const notRecovered = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead' },
      { key: tenant.site.siteKey },
    );
    expect(notRecovered.body).toMatchObject({ conversionId: first.body.conversionId, updatedExisting: true });
    expect((await conversion(first.body.conversionId)).visit_id).toBeNull();

    // The webhook's join arriving late, for a visit from before the receipt.
    const early = await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
      visit: { fbc: 'fb.1.1.early', createdAt: new Date(receivedAt.getTime() - 60_000) },
      occurredAt: new Date(receivedAt.getTime() - 30_000),
    });
    const recovered = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead' },
      { key: tenant.site.siteKey },
    );
    expect(recovered.body).toMatchObject({
      conversionId: first.body.conversionId,
      updatedExisting: true,
      dispatched: true,
    });
    expect((await conversion(first.body.conversionId)).visit_id).toBe(early.visitId);
  });

  it('a join waiting for a manual value is completed by a Purchase with a value on its channel', async () => {
    const user = newUser();
    const waiting = await waitingJoin(db.pool, tenant.site, user);
    expect(waiting.sends).toEqual([]);
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        eventType: 'Purchase',
        value: 79,
        currency: 'GBP',
        channelId: tenant.site.channels.second,
      },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      conversionId: waiting.conversionId,
      updatedExisting: true,
      dispatched: true,
      capiStatus: 'pending',
    });
    expect(await conversion(waiting.conversionId)).toMatchObject({
      value: 79,
      currency: 'GBP',
      awaiting_manual_input: false,
      source: 'webhook',
    });
  });

  it('a waiting join matched by an event without a value keeps waiting, and the warning says how to complete it', async () => {
    const user = newUser();
    const waiting = await waitingJoin(db.pool, tenant.site, user, 'Lead');
    const plain = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', channelId: tenant.site.channels.second },
      { key: tenant.accountKey },
    );
    expect(plain.status).toBe(200);
    expect(plain.body).toMatchObject({
      conversionId: waiting.conversionId,
      updatedExisting: true,
      dispatched: false,
      sends: [],
    });
    expect(plain.body.warning).toBe(
      `conversion ${waiting.conversionId} awaits a manual value: submit it with POST /leads/${user}/conversions/${waiting.conversionId}/value, or send this event again with value and currency; nothing was sent; ${MERGED_WITHOUT_ORDER}`,
    );
    expect(await conversion(waiting.conversionId)).toMatchObject({
      awaiting_manual_input: true,
      capi_status: 'skipped',
    });
    expect(await sendsOf(waiting.conversionId)).toEqual([]);

    const valued = await api.post(
      '/events/conversion',
      {
        telegramUserId: user,
        eventType: 'Lead',
        value: 5,
        currency: 'EUR',
        channelId: tenant.site.channels.second,
      },
      { key: tenant.accountKey },
    );
    expect(valued.body).toMatchObject({
      conversionId: waiting.conversionId,
      updatedExisting: true,
      dispatched: true,
      capiStatus: 'pending',
    });
    // Merged into the waiting join: the answer says an order would have been a conversion of its own.
    expect(valued.body.warning).toBe(MERGED_WITHOUT_ORDER);
  });

  it('20 concurrent identical requests without an Idempotency-Key make one conversion and one send per platform', async () => {
    const { user } = await warm();
    const results = await Promise.all(Array.from({ length: 20 }, () => purchase(user)));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 200)).toHaveLength(19);
    expect(new Set(results.map((r) => r.body.conversionId)).size).toBe(1);
    expect(await count(db.pool, 'conversions WHERE telegram_user_id = $1', [user])).toBe(1);
    expect((await sendsOf(results[0]!.body.conversionId)).map((s) => s.platform)).toEqual(['meta', 'tiktok']);
  });
});
