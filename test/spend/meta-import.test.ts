import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importMetaSpend } from '../../backend/domain/spend/meta-import.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { type InsightsRow, MetaInsightsFake } from '../fakes/meta-insights.js';

const DAY_MS = 86_400_000;
const day = (n: number) =>
  new Date(Date.parse('2026-11-27T00:00:00Z') - n * DAY_MS).toISOString().slice(0, 10);

describe('Meta spend import against the Insights fake', () => {
  let db: TestDatabase;
  const fake = new MetaInsightsFake();
  let sourceId = '';
  const source = () => ({ id: sourceId, adAccount: 'act_101', accessToken: 'EAAtoken' });
  const opts = () => ({ base: fake.url, version: 'v26.0', from: day(89), to: day(0) });

  beforeAll(async () => {
    db = await createTestDatabase(2);
    await fake.start();
    const rows: InsightsRow[] = [];
    for (let d = 0; d < 90; d++)
      for (const [id, name] of [
        ['120001', 'spring'],
        ['120002', 'autumn'],
      ] as const)
        rows.push({
          campaign_id: id,
          campaign_name: name,
          date_start: day(d),
          spend: '10.50',
          impressions: '1000',
          clicks: '20',
        });
    fake.accounts.set('act_101', { token: 'EAAtoken', currency: 'EUR', rows });
    const { rows: src } = await db.pool.query<{ id: string }>(
      `WITH a AS (INSERT INTO accounts (name) VALUES ('m') RETURNING id),
            s AS (INSERT INTO sites (account_id, website_id, name, domains) SELECT id, 'w-m', 'm', ARRAY['m.example'] FROM a RETURNING id)
       INSERT INTO spend_sources (site_id, platform, account_ref, credentials) SELECT id, 'meta', 'act_101', 'v1.a.b.c' FROM s RETURNING id`,
    );
    sourceId = src[0]!.id;
  });
  afterAll(async () => {
    await fake.stop();
    await db.drop();
  });

  it('backfills 90 days page by page, pauses on the business-use-case limit and goes on from its page', async () => {
    // 180 rows at 25 a page: eight pages.
    const calls = fake.requests.length;
    const o = opts();
    // The limit strikes after two pages: those stay written, and the next run starts at the third.
    fake.rateLimited = 1;
    fake.pagesBeforeLimit = 2;
    const paused = await importMetaSpend(db.pool, source(), o);
    expect(paused).toMatchObject({ kind: 'paused', rows: 50, retryAfterMs: 3 * 60_000 });
    expect(paused.kind === 'paused' && paused.reason).toContain('#80000');
    const { rows: kept } = await db.pool.query<{ progress: { url: string } }>(
      'SELECT progress FROM spend_sources',
    );
    expect(new URL(kept[0]!.progress.url).searchParams.get('after')).not.toBeNull();
    const done = await importMetaSpend(db.pool, source(), o);
    expect(done).toEqual({ kind: 'done', rows: 130, spend: { EUR: 1365 } });
    // 2 pages, the refusal, then pages 3 to 8.
    expect(fake.requests.length - calls).toBe(2 + 1 + 6);
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n, sum(spend)::float8 AS spend, min(day)::text AS first, max(day)::text AS last
       FROM spend_daily WHERE source_id = $1`,
      [sourceId],
    );
    expect(rows[0]).toEqual({ n: 180, spend: 1890, first: day(89), last: day(0) });
    const { rows: st } = await db.pool.query('SELECT status, currency, progress FROM spend_sources');
    expect(st[0]).toEqual({ status: 'ok', currency: 'EUR', progress: null });
  });

  it('a limit on the first page writes nothing; reading the 90 days again doubles nothing', async () => {
    const o = opts();
    const calls = fake.requests.length;
    // Answer the limit on the first request: nothing written, a wait of regainMinutes.
    fake.rateLimited = 1;
    const paused = await importMetaSpend(db.pool, source(), o);
    expect(paused).toMatchObject({ kind: 'paused', rows: 0, retryAfterMs: 3 * 60_000 });
    expect(paused.kind === 'paused' && paused.reason).toContain('#80000');
    const done = await importMetaSpend(db.pool, source(), o);
    expect(done).toEqual({ kind: 'done', rows: 180, spend: { EUR: 1890 } });
    expect(fake.requests.length - calls).toBe(1 + 8);
    const pages = fake.requests.slice(calls + 1);
    expect(pages.filter((u) => u.searchParams.has('after'))).toHaveLength(7);
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n, sum(spend)::float8 AS spend, min(day)::text AS first, max(day)::text AS last
       FROM spend_daily WHERE source_id = $1`,
      [sourceId],
    );
    expect(rows[0]).toEqual({ n: 180, spend: 1890, first: day(89), last: day(0) });
    const { rows: st } = await db.pool.query('SELECT status, currency, progress FROM spend_sources');
    expect(st[0]).toEqual({ status: 'ok', currency: 'EUR', progress: null });
  });

  it('a restated yesterday replaces the day read before', async () => {
    const acc = fake.accounts.get('act_101')!;
    for (const r of acc.rows) if (r.date_start === day(1) && r.campaign_id === '120001') r.spend = '14.25';
    const out = await importMetaSpend(db.pool, source(), { ...opts(), from: day(1), to: day(0) });
    expect(out).toMatchObject({ kind: 'done', rows: 4 });
    const { rows } = await db.pool.query(
      `SELECT spend::float8 AS spend FROM spend_daily WHERE source_id = $1 AND day = $2 AND campaign_id = '120001'`,
      [sourceId, day(1)],
    );
    expect(rows).toEqual([{ spend: 14.25 }]);
    const { rows: n } = await db.pool.query('SELECT count(*)::int AS n FROM spend_daily');
    expect(n[0]).toEqual({ n: 180 });
  });

  it('a revoked token marks the source failing with Meta reason', async () => {
    fake.accounts.get('act_101')!.token = 'EAAnew';
    const out = await importMetaSpend(db.pool, source(), opts());
    expect(out.kind).toBe('failed');
    const { rows } = await db.pool.query('SELECT status, last_error FROM spend_sources WHERE id = $1', [
      sourceId,
    ]);
    expect(rows[0].status).toBe('failing');
    expect(rows[0].last_error).toMatch(/#190.*Error validating access token/);
  });
});
