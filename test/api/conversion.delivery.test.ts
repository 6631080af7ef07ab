// What the (fake) Meta finally receives for business events, through the real worker: a warm
// lead's acquisition visit (fbc, fbp, IP, User-Agent), the caller's forwarded client winning, a
// cold lead's overrides, a submitted manual value, and nothing at all for a reused sent conversion.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakes, type Fakes, type MetaAcceptedEvent } from '../fakes/index.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { META_PIXEL, VISIT, apiClient, attributedJoin, newUser, seedTenant, waitingJoin, type ApiClient, type Tenant } from './support.js';

let fakes: Fakes;
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;

beforeAll(async () => {
  fakes = await startFakes();
  db = await createTestDatabase();
  t = await startTestApp(db.pool, { worker: true, env: { ...fakes.env } });
  api = apiClient(t.url);
  tenant = await seedTenant(db.pool, t.deps.box, { platforms: ['meta'] });
});
afterAll(async () => {
  await t.stop();
  await fakes.closeAll();
  await db.drop();
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

async function capiStatus(conversionId: string): Promise<string> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { rows } = await db.pool.query<{ capi_status: string }>('SELECT capi_status FROM conversions WHERE id = $1', [conversionId]);
    if (rows[0]!.capi_status !== 'pending' || Date.now() > deadline) return rows[0]!.capi_status;
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('what Meta receives', () => {
  it("a warm lead's Purchase carries the acquisition visit's fbc, fbp, IP, User-Agent and page", async () => {
    const user = newUser();
    await attributedJoin(db.pool, { siteId: tenant.site.siteId, channelId: tenant.site.channels.main, telegramUserId: user });
    const res = await api.post('/events/conversion', { telegramUserId: user, eventType: 'Purchase', value: 49.9, currency: 'usd', pii: { email: 'Ann@Example.com' } }, { key: tenant.accountKey });
    expect(res.status).toBe(201);
    const { event } = await metaEvent(res.body.conversionId);
    expect(event).toMatchObject({
      event_name: 'Purchase',
      action_source: 'website',
      event_source_url: VISIT.href,
      user_data: { fbc: VISIT.fbc, fbp: VISIT.fbp, client_ip_address: VISIT.clientIp, client_user_agent: VISIT.userAgent, em: [sha('ann@example.com')] },
      custom_data: { value: 49.9, currency: 'USD' },
    });
    expect(await capiStatus(res.body.conversionId)).toBe('sent');
  });

  it("the business request's forwarded client wins over the visit's", async () => {
    const user = newUser();
    await attributedJoin(db.pool, { siteId: tenant.site.siteId, channelId: tenant.site.channels.main, telegramUserId: user });
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead', clientIp: '192.0.2.1' },
      { key: tenant.accountKey, headers: { 'X-Capigram-Client-IP': '198.51.100.77', 'X-Capigram-Client-User-Agent': 'Checkout UA/3.1' } },
    );
    const { event } = await metaEvent(res.body.conversionId);
    expect(event.user_data).toMatchObject({ client_ip_address: '198.51.100.77', client_user_agent: 'Checkout UA/3.1', fbc: VISIT.fbc, fbp: VISIT.fbp });
  });

  it("a cold lead's supplied fbc, fbp, IP and User-Agent", async () => {
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: newUser(), eventType: 'Subscribe', channelId: tenant.site.channels.main, fbc: 'fb.1.1700000000001.IwAR-cold', fbp: 'fb.1.1700000000001.555',
        clientIp: '203.0.113.99', userAgent: 'Cold UA/1.0', eventSourceUrl: 'https://shop.example.com/subscribed',
      },
      { key: tenant.site.siteKey },
    );
    expect(res.body.coldLead).toBe(true);
    const { event } = await metaEvent(res.body.conversionId);
    expect(event).toMatchObject({
      event_name: 'Subscribe',
      event_source_url: 'https://shop.example.com/subscribed',
      user_data: { fbc: 'fb.1.1700000000001.IwAR-cold', fbp: 'fb.1.1700000000001.555', client_ip_address: '203.0.113.99', client_user_agent: 'Cold UA/1.0' },
    });
  });

  it('a reused sent conversion sends nothing again', async () => {
    const user = newUser();
    await attributedJoin(db.pool, { siteId: tenant.site.siteId, channelId: tenant.site.channels.main, telegramUserId: user });
    const first = await api.post('/events/conversion', { telegramUserId: user, eventType: 'Purchase', value: 5, currency: 'USD' }, { key: tenant.accountKey });
    await metaEvent(first.body.conversionId);
    expect(await capiStatus(first.body.conversionId)).toBe('sent');
    const requestsBefore = fakes.meta.received.length;

    const again = await api.post('/events/conversion', { telegramUserId: user, eventType: 'Purchase', value: 500, currency: 'USD' }, { key: tenant.accountKey });
    expect(again.body).toMatchObject({ conversionId: first.body.conversionId, deduplicated: true, dispatched: false, sends: [] });
    // A marker event after it: once Meta has the marker, the worker had its chance to send anything else.
    const marker = await api.post('/events/conversion', { telegramUserId: user, eventType: 'Contact' }, { key: tenant.accountKey });
    await metaEvent(marker.body.conversionId);
    expect(fakes.meta.events(META_PIXEL).filter((e) => e.event.event_id === `cnv_${first.body.conversionId}`)).toHaveLength(1);
    expect(fakes.meta.received.length).toBe(requestsBefore + 1);
  });

  it('a submitted manual value is what Meta gets', async () => {
    const user = newUser();
    const waiting = await waitingJoin(db.pool, tenant.site, user);
    const res = await api.post(`/leads/${user}/conversions/${waiting.conversionId}/value`, { value: 120, currency: 'eur' }, { key: tenant.site.siteKey });
    expect(res).toMatchObject({ status: 200, body: { success: true } });
    const { event } = await metaEvent(waiting.conversionId);
    expect(event).toMatchObject({ event_name: 'Purchase', custom_data: { value: 120, currency: 'EUR' }, user_data: { fbc: VISIT.fbc } });
  });
});
