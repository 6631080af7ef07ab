import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { campaignKeyOf } from '../../backend/domain/spend/campaign-key.js';
import { addMoney, costPer, roas, roiFigures } from '../../backend/domain/spend/roi-rules.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

const KEYS: [string | null, string | null][] = [
  [null, null],
  ['/landing', null],
  ['/l?utm_id=120210000000001&utm_campaign=spring', '120210000000001'],
  // utm_id first, whatever the order in the URL.
  ['/l?gad_campaignid=555&utm_id=abc-1', 'abc-1'],
  ['https://x.example/l?gclid=G&gad_campaignid=21700000001', '21700000001'],
  ['/l?campaignid=987654', '987654'],
  ['/l?fb_campaign_id=23850000000000001&fbclid=F', '23850000000000001'],
  ['/l?tt_campaign_id=1790000000000001', '1790000000000001'],
  ['/l?sc_campaign_id=6f1a2b3c-0000-4a5b-9c8d-112233445566', '6f1a2b3c-0000-4a5b-9c8d-112233445566'],
  // Unexpanded macros are no key; the next parameter is read.
  ['/l?utm_id={{campaign.id}}&fb_campaign_id=42', '42'],
  ['/l?tt_campaign_id=__CAMPAIGN_ID__', null],
  ['/l?campaignid={campaignid}', null],
  ['/l?gad_campaignid=12x', null],
  ['/l?xcampaignid=12', null],
  ['/l?utm_id=', null],
];

describe('campaign key of a landing URL', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase(2);
  });
  afterAll(async () => {
    await db.drop();
  });

  it.each(KEYS)('%s → %s', (url, key) => {
    expect(campaignKeyOf(url)).toBe(key);
  });

  it('the database reads the same keys (visit_campaign_key)', async () => {
    const { rows } = await db.pool.query<{ url: string | null; key: string | null }>(
      `SELECT u.url, visit_campaign_key(u.url) AS key FROM unnest($1::text[]) WITH ORDINALITY u(url, n) ORDER BY n`,
      [KEYS.map(([u]) => u)],
    );
    expect(rows.map((r) => r.key)).toEqual(KEYS.map(([, k]) => k));
  });

  it('a restated day replaces the row it was read as (spend_daily upsert)', async () => {
    const { rows: site } = await db.pool.query<{ id: string }>(
      `WITH a AS (INSERT INTO accounts (name) VALUES ('spend') RETURNING id)
       INSERT INTO sites (account_id, website_id, name, domains) SELECT id, 'w-spend', 'spend', ARRAY['spend.example'] FROM a RETURNING id`,
    );
    const { rows: src } = await db.pool.query<{ id: string }>(
      `INSERT INTO spend_sources (site_id, platform, account_ref, credentials) VALUES ($1, 'meta', 'act_1', 'v1.x.y.z') RETURNING id`,
      [site[0]!.id],
    );
    const upsert = (spend: number) =>
      db.pool.query(
        `INSERT INTO spend_daily (source_id, day, campaign_id, campaign_name, currency, spend, clicks)
         VALUES ($1, '2026-11-27', '42', 'spring', 'EUR', $2, 3)
         ON CONFLICT (source_id, day, campaign_id, ad_set_id) DO UPDATE SET spend = EXCLUDED.spend, updated_at = now()`,
        [src[0]!.id, spend],
      );
    await upsert(10.5);
    await upsert(12.25);
    const { rows } = await db.pool.query('SELECT spend::float8 AS spend FROM spend_daily');
    expect(rows).toEqual([{ spend: 12.25 }]);
    const { rows: st } = await db.pool.query('SELECT status, last_error FROM spend_sources');
    expect(st).toEqual([{ status: 'ok', last_error: null }]);
  });
});

describe('ROI arithmetic', () => {
  it('sums money per currency and lists the currencies alphabetically whatever order they came in', () => {
    const m = {};
    addMoney(m, 'USD', 30);
    addMoney(m, 'EUR', 40.00004);
    addMoney(m, 'USD', 0.5);
    addMoney(m, 'CHF', 1);
    expect(Object.keys(m)).toEqual(['CHF', 'EUR', 'USD']);
    expect(m).toEqual({ CHF: 1, EUR: 40, USD: 30.5 });
  });

  it.each([
    [{ EUR: 100 }, 8, { EUR: 12.5 }],
    [{ EUR: 100, USD: 30 }, 3, { EUR: 33.3333, USD: 10 }],
    [{ EUR: 100 }, 0, {}],
    [{ EUR: 100 }, null, {}],
  ] as const)('cost of %o per %s', (spend, n, want) => {
    expect(costPer({ ...spend }, n)).toEqual(want);
  });

  it.each([
    [{ EUR: 50 }, { EUR: 125 }, 2.5],
    [{ EUR: 50 }, {}, 0],
    // Currencies never mixed: spend in EUR, value in USD has no ROAS.
    [{ EUR: 50 }, { USD: 125 }, null],
    [{ EUR: 50, USD: 10 }, { EUR: 125 }, null],
    [{ EUR: 50 }, { EUR: 100, USD: 5 }, null],
    [{}, { EUR: 100 }, null],
    [{ EUR: 0 }, { EUR: 100 }, null],
  ] as const)('ROAS of spend %o and value %o', (spend, value, want) => {
    expect(roas({ ...spend }, { ...value })).toBe(want);
  });

  it('a row written by hand: cost per join, per retained subscriber and ROAS', () => {
    expect(
      roiFigures({
        spend: { EUR: 240 },
        clicks: 300,
        visits: 200,
        joins: 24,
        retained: { d7: 20, d30: null },
        conversions: 6,
        value: { EUR: 600 },
      }),
    ).toEqual({ costPerJoin: { EUR: 10 }, costPerRetained: { d7: { EUR: 12 }, d30: {} }, roas: 2.5 });
  });
});
