// POST /api/v1/leads/{telegramUserId}/conversions/{conversionId}/value: the value a Purchase
// waited for; only for conversions awaiting one, only within the key's tenancy.
import { createHash, randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { withTx } from '../../backend/db/pool.js';
import { recordConversion } from '../../backend/domain/outbox/conversion-record.js';
import type { TestDatabase } from '../harness/db.js';
import type { TestApp } from '../harness/app.js';
import {
  type ApiClient,
  apiWorld,
  count,
  insertVisit,
  newUser,
  seedTenant,
  type SiteSeed,
  type Tenant,
} from './support.js';

const world = apiWorld({ tenant: { platforms: ['meta', 'tiktok'], sites: 2 } });
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;
let rival: Tenant;

beforeAll(async () => {
  ({ db, t, api, tenant } = world);
  rival = await seedTenant(db.pool, t.deps.box);
});

/** A join on a manual-value Purchase channel, as the webhook records it: waiting, nothing sent. */
async function waiting(site: SiteSeed, awaiting = true): Promise<{ user: number; conversionId: string }> {
  const user = newUser();
  const visitId = await insertVisit(db.pool, site.siteId);
  const now = new Date();
  const { conversionId } = await withTx(db.pool, (tx) =>
    recordConversion(
      tx,
      {
        siteId: site.siteId,
        channelId: site.channels.second,
        telegramUserId: user,
        visitId,
        eventType: 'Purchase',
        eventTime: now,
        attributedAt: now,
        receivedAt: now,
        source: 'webhook',
        awaitingManualInput: awaiting,
      },
      true,
    ),
  );
  return { user, conversionId };
}
const path = (user: number | string, id: string) => `/leads/${user}/conversions/${id}/value`;
const sha = (s: string) => createHash('sha256').update(s).digest('hex');

describe('happy path', () => {
  it('sets the value, clears the wait, merges hashed PII and dispatches to every pixel', async () => {
    const { user, conversionId } = await waiting(tenant.site);
    const res = await api.post(
      path(user, conversionId),
      { value: 99.5, currency: 'gbp', pii: { email: 'Buyer@Example.com' } },
      { key: tenant.site.siteKey },
    );
    expect(res).toMatchObject({ status: 200, body: { success: true } });
    const { rows } = await db.pool.query(
      'SELECT value, currency, awaiting_manual_input, capi_status, pii_hashed FROM conversions WHERE id = $1',
      [conversionId],
    );
    expect(rows[0]).toEqual({
      value: 99.5,
      currency: 'GBP',
      awaiting_manual_input: false,
      capi_status: 'pending',
      pii_hashed: { em: sha('buyer@example.com'), emGoogle: sha('buyer@example.com') },
    });
    const sends = await db.pool.query(
      'SELECT platform, status FROM sends WHERE conversion_id = $1 ORDER BY platform',
      [conversionId],
    );
    expect(sends.rows).toEqual([
      { platform: 'meta', status: 'pending' },
      { platform: 'tiktok', status: 'pending' },
    ]);
  });

  it('an account key works for any site of its account', async () => {
    const { user, conversionId } = await waiting(tenant.sites[1]!);
    expect(
      (await api.post(path(user, conversionId), { value: 1, currency: 'USD' }, { key: tenant.accountKey }))
        .status,
    ).toBe(200);
  });
});

describe('errors', () => {
  it('409 NOT_AWAITING_VALUE for a conversion not waiting, and for a second submission', async () => {
    const notWaiting = await waiting(tenant.site, false);
    const res = await api.post(
      path(notWaiting.user, notWaiting.conversionId),
      { value: 5, currency: 'USD' },
      { key: tenant.accountKey },
    );
    expect(res).toMatchObject({ status: 409, body: { code: 'NOT_AWAITING_VALUE' } });

    const w = await waiting(tenant.site);
    expect(
      (
        await api.post(
          path(w.user, w.conversionId),
          { value: 5, currency: 'USD' },
          { key: tenant.accountKey },
        )
      ).status,
    ).toBe(200);
    const again = await api.post(
      path(w.user, w.conversionId),
      { value: 6, currency: 'USD' },
      { key: tenant.accountKey },
    );
    expect(again.body.code).toBe('NOT_AWAITING_VALUE');
    expect(
      (await db.pool.query('SELECT value FROM conversions WHERE id = $1', [w.conversionId])).rows[0].value,
    ).toBe(5);
  });

  it('two concurrent submissions: one succeeds, the other is told it is no longer waiting', async () => {
    const w = await waiting(tenant.site);
    const results = await Promise.all(
      [1, 2].map((v) =>
        api.post(path(w.user, w.conversionId), { value: v, currency: 'USD' }, { key: tenant.accountKey }),
      ),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    expect(await count(db.pool, 'sends WHERE conversion_id = $1', [w.conversionId])).toBe(2);
  });

  it('404 CONVERSION_NOT_FOUND for an unknown id and for a known id under another user', async () => {
    const w = await waiting(tenant.site);
    expect(
      (await api.post(path(w.user, randomUUID()), { value: 5, currency: 'USD' }, { key: tenant.accountKey }))
        .body.code,
    ).toBe('CONVERSION_NOT_FOUND');
    expect(
      (
        await api.post(
          path(w.user + 1, w.conversionId),
          { value: 5, currency: 'USD' },
          { key: tenant.accountKey },
        )
      ).body.code,
    ).toBe('CONVERSION_NOT_FOUND');
  });

  it.each([
    ['value 0', { value: 0, currency: 'USD' }],
    ['a negative value', { value: -1, currency: 'USD' }],
    ['a value that would be stored as 0 (below 0.0001)', { value: 0.00001, currency: 'EUR' }],
    ['no value', { currency: 'USD' }],
    ['no currency', { value: 10 }],
    ['a currency outside the whitelist', { value: 10, currency: 'BTC' }],
    ['a value as a string', { value: '10', currency: 'USD' }],
  ])('%s → 400 VALIDATION_FAILED, still waiting', async (_label, body) => {
    const w = await waiting(tenant.site);
    const res = await api.post(path(w.user, w.conversionId), body, { key: tenant.accountKey });
    expect(res).toMatchObject({ status: 400, body: { code: 'VALIDATION_FAILED' } });
    expect(
      (await db.pool.query('SELECT awaiting_manual_input FROM conversions WHERE id = $1', [w.conversionId]))
        .rows[0].awaiting_manual_input,
    ).toBe(true);
  });

  it('a value below what is stored names the smallest accepted value', async () => {
    const w = await waiting(tenant.site);
    const res = await api.post(
      path(w.user, w.conversionId),
      { value: 0.00001, currency: 'EUR' },
      { key: tenant.accountKey },
    );
    expect(res.body.errors).toEqual([
      { path: 'value', message: 'must be at least 0.0001 (values are kept to 4 decimal places)' },
    ]);
  });

  it('a conversion id that is not a UUID → 400', async () => {
    expect(
      (await api.post(path(1, 'not-a-uuid'), { value: 1, currency: 'USD' }, { key: tenant.accountKey }))
        .status,
    ).toBe(400);
  });
});

describe('security', () => {
  it("another site's conversion through a site key, and another account's through an account key: 404, untouched", async () => {
    const other = await waiting(tenant.sites[1]!);
    const foreign = await waiting(rival.site);
    for (const [w, key] of [
      [other, tenant.sites[0]!.siteKey],
      [foreign, tenant.accountKey],
    ] as const) {
      const res = await api.post(path(w.user, w.conversionId), { value: 5, currency: 'USD' }, { key });
      expect(res).toMatchObject({ status: 404, body: { code: 'CONVERSION_NOT_FOUND' } });
      expect(
        (await db.pool.query('SELECT awaiting_manual_input FROM conversions WHERE id = $1', [w.conversionId]))
          .rows[0].awaiting_manual_input,
      ).toBe(true);
    }
  });
});
