// Erasure that is complete: after a lead is erased, no stored Idempotency-Key answer, webhook
// event, export row or forward of the bot carries its Telegram id, visit id or external id, and a replay of
// a stored answer says the lead is gone; and at info level no log line of the whole journey (the
// landing, the bot's /start, the worker's jobs, the API calls, the erasure) carries them.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createApiKey } from '../../backend/domain/admin/api-keys.js';
import { addWebhook } from '../../backend/domain/webhooks/admin.js';
import { DEFAULT_BOT } from '../fakes/index.js';
import { apiClient } from '../api/support.js';
import {
  landAndEnter,
  newVisitor,
  payloadOf,
  settled,
  startEntryWorld,
  type EntryWorld,
} from '../entries/world.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';

const lines: string[] = [];
let w: EntryWorld;
let rx: Receiver;
beforeAll(async () => {
  w = await startEntryWorld({ LOG_LEVEL: 'info' }, { write: (line) => void lines.push(line) });
  rx = await startReceiver();
  await addWebhook(w.app.deps, { site: w.siteId, url: rx.url });
});
afterAll(async () => {
  await rx.close();
  await w.close();
});

it('no stored answer, webhook event or info log line keeps the lead after its erasure', async () => {
  const user = { id: 777_555_321 };
  const external = 'crm-customer-88231';
  const { visitId, location } = await landAndEnter(w, newVisitor());
  const start = w.fakes.telegram.startCommand({ user, payload: payloadOf(location) });
  expect((await w.fakes.telegram.deliverUpdate(DEFAULT_BOT.token, start)).status).toBe(200);
  await settled(w);

  const { apiKey } = await createApiKey(w.db.pool, { accountId: w.accountId, siteId: w.siteId, name: 'crm' });
  const api = apiClient(w.app.url);
  const event = await api.post(
    `/leads/${user.id}/events`,
    { eventType: 'Purchase', value: 10, currency: 'EUR', externalUserId: external },
    { key: apiKey, idempotencyKey: 'purchase-1' },
  );
  expect([200, 201]).toContain(event.status);
  const read = await api.get(`/leads/${user.id}`, { key: apiKey, idempotencyKey: 'read-1' });
  expect(read.status).toBe(200);
  expect(JSON.stringify(read.body)).toContain(String(user.id));
  await settled(w);
  await new Promise((r) => setTimeout(r, 100));
  expect(rx.received.length).toBeGreaterThan(0);

  expect((await api.delete(`/leads/${user.id}`, { key: apiKey })).status).toBe(204);

  const ids = [String(user.id), visitId, external];
  const carrying = (text: string) => ids.filter((id) => text.includes(id));
  // The stored answers: replayed as "not found", never with the lead's ids.
  const replay = await api.get(`/leads/${user.id}`, { key: apiKey, idempotencyKey: 'read-1' });
  expect(replay.headers.get('x-idempotent-replay')).toBe('true');
  expect(replay.status).toBe(404);
  expect(carrying(JSON.stringify(replay.body))).toEqual([]);
  const again = await api.post(
    `/leads/${user.id}/events`,
    { eventType: 'Purchase', value: 10, currency: 'EUR' },
    { key: apiKey, idempotencyKey: 'purchase-1' },
  );
  expect(again.status).toBe(404);
  const { rows: stored } = await w.db.pool.query<{ t: string }>(
    "SELECT COALESCE(response_body::text, '') AS t FROM idempotency_keys",
  );
  expect(stored.flatMap((r) => carrying(r.t))).toEqual([]);
  // Webhook events and the bot's forwards: none left for the person.
  const { rows: events } = await w.db.pool.query<{ t: string }>(
    'SELECT telegram_user_id::text || data::text AS t FROM webhook_events',
  );
  expect(events.flatMap((r) => carrying(r.t))).toEqual([]);

  // Exports: the person's joins, conversions and visits are still counted, under no id of theirs.
  for (const kind of ['visits', 'joins', 'conversions']) {
    const res = await fetch(`${w.app.url}/api/v1/exports/${kind}?format=ndjson`, {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(text.trim().split('\n').length, kind).toBeGreaterThan(0);
    expect(carrying(text), kind).toEqual([]);
  }

  const info = lines.filter((l) => (JSON.parse(l) as { level: number }).level >= 30);
  expect(info.length).toBeGreaterThan(3);
  expect(info.filter((l) => carrying(l).length > 0)).toEqual([]);
});
