// Outbound webhooks through the real app, worker and database: a lead's join, its conversion and
// the conversion's delivery to Meta reach the receiver in that order, signed so that node:crypto's
// HMAC verifies them as a receiver would; a 500 is retried until taken; the delivery log and a
// resend; a site without webhooks records nothing.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addWebhook, listDeliveries, resendDelivery } from '../../backend/domain/webhooks/admin.js';
import { TEST_ADMIN_TOKEN } from '../harness/app.js';
import { apiWorld, count, warmLead } from '../api/support.js';
import { eventually } from '../telegram/world.js';
import { startReceiver, type Receiver } from './receiver.js';

const w = apiWorld({ fakes: true, tenant: { sites: 2 } });
let rx: Receiver;
let webhookId: string;
let secret: string;
beforeAll(async () => {
  rx = await startReceiver();
  ({ webhookId, secret } = await addWebhook(w.t.deps, { site: w.tenant.sites[0]!.siteId, url: rx.url }));
});
afterAll(() => rx.close());

/** What a receiver does with nothing but node:crypto: recompute v1 over "<t>.<raw body>" and compare. */
function verifiesWithNodeCrypto(header: string, body: string): boolean {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  if (!m) return false;
  const expected = createHmac('sha256', secret).update(`${m[1]}.${body}`).digest();
  return (
    timingSafeEqual(expected, Buffer.from(m[2]!, 'hex')) && Math.abs(Date.now() / 1000 - Number(m[1])) < 300
  );
}

const types = () => rx.received.map((r) => (JSON.parse(r.body) as { type: string }).type);

describe('webhooks', () => {
  it('join, conversion.created and conversion.sent in order per lead, signed; a 500 is retried until taken', async () => {
    // The first POST is refused: the lead's later events wait behind it.
    rx.answerWith((_body, i) => (i === 0 ? 500 : 200));
    const user = await warmLead(w.db.pool, w.tenant);
    const res = await w.api.post(
      '/events/conversion',
      { telegramUserId: user, eventType: 'Lead' },
      { key: w.tenant.site.siteKey },
    );
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    await eventually(async () => types().length >= 4, 8000, 'the webhook deliveries');
    expect(types()).toEqual(['join', 'join', 'conversion.created', 'conversion.sent']);
    const [refused, retried, created, sent] = rx.received.map((r) => ({
      ...r,
      event: JSON.parse(r.body) as { id: string; type: string; data: Record<string, unknown> },
    }));
    // At least once: the retry is the same event (same id), signed anew.
    expect(retried!.event.id).toBe(refused!.event.id);
    for (const r of rx.received) {
      expect(r.headers['content-type']).toBe('application/json');
      expect(verifiesWithNodeCrypto(String(r.headers['capigram-signature']), r.body)).toBe(true);
      // A body changed in transit no longer verifies.
      expect(verifiesWithNodeCrypto(String(r.headers['capigram-signature']), `${r.body} `)).toBe(false);
    }
    expect(created!.event.data).toMatchObject({
      telegramUserId: String(user),
      eventType: 'Lead',
      siteId: w.tenant.site.siteId,
      conversionId: res.body.conversionId,
    });
    expect(sent!.event.data).toMatchObject({ conversionId: res.body.conversionId, capiStatus: 'sent' });

    const log = await listDeliveries(w.db.pool, { webhookId });
    expect(log.deliveries.map((d) => [d.type, d.status, d.attempts])).toEqual([
      ['conversion.sent', 'delivered', 1],
      ['conversion.created', 'delivered', 1],
      ['join', 'delivered', 2],
    ]);
    expect(log.deliveries[2]!.lastStatus).toBe(200);
  });

  it('resend posts the same event again', async () => {
    const { deliveries } = await listDeliveries(w.db.pool, { webhookId });
    const before = rx.received.length;
    const again = await resendDelivery(w.db.pool, { webhookId, deliveryId: deliveries[1]!.deliveryId });
    await eventually(async () => rx.received.length > before, 5000, 'the resend');
    const body = JSON.parse(rx.received.at(-1)!.body) as { id: string; type: string };
    expect(body).toMatchObject({ id: deliveries[1]!.eventId, type: 'conversion.created' });
    const log = await listDeliveries(w.db.pool, { webhookId });
    expect(log.deliveries[0]).toMatchObject({ deliveryId: again.deliveryId, status: 'delivered' });
    await expect(resendDelivery(w.db.pool, { webhookId, deliveryId: '999999999' })).rejects.toThrow(
      /does not exist/,
    );
  });

  it('the dashboard page shows the delivery log and resends a delivery', async () => {
    const auth = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    const siteId = w.tenant.sites[0]!.siteId;
    const pageRes = await fetch(`${w.t.url}/dashboard/sites/${siteId}/webhooks`, { headers: auth });
    expect(pageRes.status).toBe(200);
    const body = await pageRes.text();
    const { deliveries } = await listDeliveries(w.db.pool, { webhookId });
    expect(body).toContain(rx.url);
    for (const d of deliveries) expect(body).toContain(`/deliveries/${d.deliveryId}/resend`);
    const before = rx.received.length;
    const res = await fetch(
      `${w.t.url}/dashboard/sites/${siteId}/webhooks/${webhookId}/deliveries/${deliveries.at(-1)!.deliveryId}/resend`,
      {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' },
        body: '',
        redirect: 'manual',
      },
    );
    expect(res.status).toBe(303);
    await eventually(async () => rx.received.length > before, 5000, 'the resend from the dashboard');
    expect(JSON.parse(rx.received.at(-1)!.body)).toMatchObject({ type: 'join' });
    // Another site's page cannot resend this site's delivery.
    const other = await fetch(
      `${w.t.url}/dashboard/sites/${w.tenant.sites[1]!.siteId}/webhooks/${webhookId}/deliveries/${deliveries.at(-1)!.deliveryId}/resend`,
      {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' },
        body: '',
        redirect: 'manual',
      },
    );
    expect(other.status).toBe(404);
  });

  it('a site without webhooks records nothing', async () => {
    const other = w.tenant.sites[1]!;
    const before = await count(w.db.pool, 'webhook_events');
    await warmLead(w.db.pool, { site: other });
    expect(await count(w.db.pool, 'webhook_events')).toBe(before);
  });

  it('refuses an unknown event name and a URL that is not http(s)', async () => {
    await expect(
      addWebhook(w.t.deps, { site: w.tenant.site.siteId, url: rx.url, events: ['conversion.paid' as never] }),
    ).rejects.toThrow(/must be one of/);
    await expect(
      addWebhook(w.t.deps, { site: w.tenant.site.siteId, url: 'ftp://x.example.com/' }),
    ).rejects.toThrow(/http:\/\//);
  });
});
