// A business event that matches a recent conversion updates it only while none of its sends is on
// its way to the platform. A send in flight carries the values it was claimed with, and the
// platform keeps the first event under an event id: updating the conversion then would leave
// Capigram's record and the platform's disagreeing, with the caller told its update went out.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Fakes } from '../fakes/index.js';
import type { TestDatabase } from '../harness/db.js';
import { type ApiClient, apiWorld, attributedJoin, META_PIXEL, newUser, type Tenant } from './support.js';

const world = apiWorld({ tenant: { platforms: ['meta'] }, fakes: true });
let fakes: Fakes;
let db: TestDatabase;
let api: ApiClient;
let tenant: Tenant;

beforeAll(() => {
  ({ db, api, tenant, fakes } = world);
});

async function until<T>(
  read: () => Promise<T>,
  done: (value: T) => boolean,
  what: string,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function sendState(conversionId: string): Promise<{ status: string; in_flight: boolean }> {
  const { rows } = await db.pool.query<{ status: string; in_flight: boolean }>(
    'SELECT status, in_flight FROM sends WHERE conversion_id = $1',
    [conversionId],
  );
  return rows[0]!;
}

async function storedValue(conversionId: string): Promise<number> {
  const { rows } = await db.pool.query<{ value: string }>('SELECT value FROM conversions WHERE id = $1', [
    conversionId,
  ]);
  return Number(rows[0]!.value);
}

const purchase = (telegramUserId: number, value: number) => ({
  telegramUserId,
  eventType: 'Purchase',
  value,
  currency: 'USD',
});
const valuesMetaGot = (conversionId: string) =>
  fakes.meta
    .events(META_PIXEL)
    .filter((e) => e.event.event_id === `cnv_${conversionId}`)
    .map((e) => (e.event.custom_data as { value?: number } | undefined)?.value);

describe('a matching event while the conversion is being sent', () => {
  it('leaves the conversion as it is being sent, says so, and what Meta got is what Capigram keeps', async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    // Under the worker's 1.5 s request timeout: the send is in flight, then delivered.
    fakes.meta.latencyMs = 800;
    try {
      const first = await api.post('/events/conversion', purchase(user, 10), { key: tenant.accountKey });
      expect(first.status).toBe(201);
      const conversionId = first.body.conversionId as string;
      await until(
        () => sendState(conversionId),
        (s) => s.in_flight,
        'the send to be claimed',
      );

      const second = await api.post('/events/conversion', purchase(user, 20), { key: tenant.accountKey });
      expect(second.status).toBe(200);
      expect(second.body).toMatchObject({
        conversionId,
        capiStatus: 'pending',
        dispatched: false,
        deduplicated: true,
        updatedExisting: false,
        sends: [],
      });
      expect(second.body.warning).toMatch(/being sent right now/);
      expect(await storedValue(conversionId)).toBe(10);

      await until(
        () => sendState(conversionId),
        (s) => s.status === 'sent',
        'the send to be delivered',
      );
      expect(await sendState(conversionId)).toEqual({ status: 'sent', in_flight: false });
      expect(valuesMetaGot(conversionId)).toEqual([10]);
      expect(await storedValue(conversionId)).toBe(10);

      // Delivered: the next match is a sent one, reused as it is.
      const third = await api.post('/events/conversion', purchase(user, 30), { key: tenant.accountKey });
      expect(third.body).toMatchObject({
        conversionId,
        capiStatus: 'sent',
        deduplicated: true,
        updatedExisting: false,
        dispatched: false,
      });
      expect(await storedValue(conversionId)).toBe(10);
    } finally {
      fakes.meta.latencyMs = 0;
    }
  });

  it('a send waiting for its retry is not in flight: the update is taken and is what the retry sends', async () => {
    const user = newUser();
    await attributedJoin(db.pool, {
      siteId: tenant.site.siteId,
      channelId: tenant.site.channels.main,
      telegramUserId: user,
    });
    // A 5xx: retried after the first backoff step (about a second).
    fakes.meta.failNext(1, { type: 'status', status: 503 });
    const first = await api.post('/events/conversion', purchase(user, 10), { key: tenant.accountKey });
    const conversionId = first.body.conversionId as string;
    const { rows } = await until(
      () =>
        db.pool.query<{ attempts: number; in_flight: boolean }>(
          'SELECT attempts, in_flight FROM sends WHERE conversion_id = $1',
          [conversionId],
        ),
      (r) => r.rows[0]!.attempts === 1 && !r.rows[0]!.in_flight,
      'the first attempt to fail',
    );
    expect(rows[0]).toEqual({ attempts: 1, in_flight: false });

    const second = await api.post('/events/conversion', purchase(user, 20), { key: tenant.accountKey });
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({
      conversionId,
      capiStatus: 'pending',
      dispatched: true,
      deduplicated: true,
      updatedExisting: true,
    });
    await until(
      () => sendState(conversionId),
      (s) => s.status === 'sent',
      'the retry to be delivered',
    );
    expect(valuesMetaGot(conversionId)).toEqual([20]);
    expect(await storedValue(conversionId)).toBe(20);
  });
});
