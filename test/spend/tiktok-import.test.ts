import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Config, loadConfig } from '../../backend/config.js';
import type { SpendSource } from '../../backend/domain/spend/importer.js';
import { splitWindow } from '../../backend/domain/spend/spend-page.js';
import {
  classifyTikTokAnswer,
  tiktokRow,
  tiktokSpendImporter,
} from '../../backend/domain/spend/tiktok-import.js';
import { type TikTokSpendRow, TikTokReportingFake } from '../fakes/tiktok-reporting.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { insertSpendSource, spendTotals } from './support.js';

const DAY_MS = 86_400_000;
const day = (n: number) =>
  new Date(Date.parse('2026-11-27T00:00:00Z') - n * DAY_MS).toISOString().slice(0, 10);

describe('TikTok row parsing', () => {
  const row = (dimensions: object, metrics: object) => ({ dimensions, metrics });
  it.each([
    [
      'a full row',
      row(
        { campaign_id: '1800001', stat_time_day: '2026-11-01 00:00:00' },
        { campaign_name: 'spring', spend: '12.34', impressions: '900', clicks: '12' },
      ),
      {
        day: '2026-11-01',
        campaignId: '1800001',
        campaignName: 'spring',
        currency: 'USD',
        spend: '12.34',
        impressions: 900,
        clicks: 12,
      },
    ],
    [
      'spend given as a number',
      row({ campaign_id: '1800001', stat_time_day: '2026-11-01 00:00:00' }, { spend: 3.5 }),
      {
        day: '2026-11-01',
        campaignId: '1800001',
        campaignName: '',
        currency: 'USD',
        spend: '3.5',
        impressions: 0,
        clicks: 0,
      },
    ],
    ['an hourly row', row({ campaign_id: '1', stat_time_day: '2026-11-01 13:00:00' }, { spend: '1' }), null],
    ['no campaign', row({ stat_time_day: '2026-11-01 00:00:00' }, { spend: '1' }), null],
    [
      'spend that is no amount',
      row({ campaign_id: '1', stat_time_day: '2026-11-01 00:00:00' }, { spend: '-' }),
      null,
    ],
    ['no metrics', { dimensions: { campaign_id: '1' } }, null],
  ])('%s', (_name, r, want) => {
    expect(tiktokRow(r, 'USD')).toEqual(want);
  });

  const ok = (code: number, message = 'm') => ({
    status: 200,
    bodyText: JSON.stringify({ code, message, data: {} }),
  });
  it.each([
    ['success', ok(0), 'ok'],
    ['throttled', ok(40100), 'wait'],
    ['TikTok internal error', ok(40700), 'wait'],
    ['system error', { status: 500, bodyText: '{"code":50000}' }, 'wait'],
    ['no answer', { networkError: 'ECONNRESET' }, 'wait'],
    ['no permission', ok(40001), 'refused'],
    ['token expired', ok(40102), 'refused'],
    ['token missing', ok(40104), 'refused'],
    ['token revoked', ok(40105), 'refused'],
  ] as const)('%s → %s', (_name, res, kind) => {
    expect(classifyTikTokAnswer(res).kind).toBe(kind);
  });

  it.each([
    [{ from: '2026-01-01', to: '2026-01-30' }, 30, [['2026-01-01', '2026-01-30']]],
    [
      { from: '2026-01-01', to: '2026-03-31' },
      30,
      [
        ['2026-01-01', '2026-01-30'],
        ['2026-01-31', '2026-03-01'],
        ['2026-03-02', '2026-03-31'],
      ],
    ],
    [{ from: '2026-01-05', to: '2026-01-05' }, 30, [['2026-01-05', '2026-01-05']]],
    [{ from: '2026-01-06', to: '2026-01-05' }, 30, []],
  ])('splits %j into parts of %i days', (w, n, parts) => {
    expect(splitWindow(w, n).map((p) => [p.from, p.to])).toEqual(parts);
  });
});

describe('TikTok spend import against the reporting fake', () => {
  let db: TestDatabase;
  let config: Config;
  const fake = new TikTokReportingFake();
  let source: SpendSource;

  beforeAll(async () => {
    db = await createTestDatabase(2);
    await fake.listen();
    config = loadConfig({ DATABASE_URL: 'postgres://unused/', TIKTOK_API_URL: fake.url });
    const rows: TikTokSpendRow[] = [];
    // 90 days × 40 campaigns: 1200 rows per 30-day part, two pages of 1000 each.
    for (let d = 0; d < 90; d++)
      for (let c = 0; c < 40; c++)
        rows.push({
          campaignId: String(1_800_000 + c),
          campaignName: `c${c}`,
          date: day(d),
          spend: '2.50',
          impressions: '100',
          clicks: '3',
        });
    fake.advertisers.set('7000001', {
      token: 'tt-token',
      name: 'Shop',
      currency: 'USD',
      timezone: 'America/New_York',
      rows,
    });
    const id = await insertSpendSource(db.pool, 'tiktok', '7000001');
    source = {
      id,
      siteId: '',
      platform: 'tiktok',
      accountRef: '7000001',
      credentials: { accessToken: 'tt-token' },
      currency: null,
      timeZone: null,
    };
  });
  afterAll(async () => {
    await fake.close();
    await db.drop();
  });

  it('check reads the advertiser currency and time zone', async () => {
    expect(await tiktokSpendImporter.check(config, source)).toEqual({
      kind: 'ok',
      currency: 'USD',
      timeZone: 'America/New_York',
      name: 'Shop',
    });
    expect(fake.received.at(-1)!.headers['access-token']).toBe('tt-token');
    expect(await tiktokSpendImporter.check(config, { ...source, accountRef: '7000002' })).toEqual({
      kind: 'refused',
      reason: expect.stringContaining('40001'),
    });
  });

  it('backfills 90 days in 30-day parts page by page, pauses when throttled and goes on from the stored page', async () => {
    const window = { from: day(89), to: day(0) };
    const before = fake.reports().length;
    // Three parts of two pages. The limit strikes after three pages (the info call is the first answer).
    fake.rateLimitAfter(1 + 3);
    const paused = await tiktokSpendImporter.importDays(db.pool, config, source, window);
    expect(paused).toMatchObject({ kind: 'paused', rows: 2200, retryAfterMs: 60_000 });
    expect(paused.kind === 'paused' && paused.reason).toContain('40100');
    const { rows: kept } = await db.pool.query('SELECT progress FROM spend_sources WHERE id = $1', [
      source.id,
    ]);
    expect(kept[0].progress).toEqual({ window, cursor: { from: splitWindow(window, 30)[1]!.from, page: 2 } });
    const done = await tiktokSpendImporter.importDays(db.pool, config, source, window);
    expect(done).toEqual({ kind: 'done', rows: 1400, spend: { USD: 3500 } });
    const reports = fake.reports().slice(before);
    expect(reports.map((r) => [r.query.start_date, r.query.page])).toEqual([
      [day(89), '1'],
      [day(89), '2'],
      [day(59), '1'],
      [day(59), '2'], // throttled
      [day(59), '2'],
      [day(29), '1'],
      [day(29), '2'],
    ]);
    expect(await spendTotals(db.pool, source.id)).toEqual({
      n: 3600,
      spend: 9000,
      clicks: 10800,
      first: day(89),
      last: day(0),
    });
    const { rows: st } = await db.pool.query('SELECT status, progress FROM spend_sources WHERE id = $1', [
      source.id,
    ]);
    expect(st[0]).toEqual({ status: 'ok', progress: null });
  });

  it('a restated yesterday replaces the day read before', async () => {
    const a = fake.advertisers.get('7000001')!;
    for (const r of a.rows) if (r.date === day(1) && r.campaignId === '1800000') r.spend = '7.75';
    const out = await tiktokSpendImporter.importDays(
      db.pool,
      config,
      { ...source, currency: 'USD' },
      { from: day(1), to: day(0) },
    );
    expect(out).toMatchObject({ kind: 'done', rows: 80 });
    const { rows } = await db.pool.query(
      `SELECT spend::float8 AS spend FROM spend_daily WHERE source_id = $1 AND day = $2 AND campaign_id = '1800000'`,
      [source.id, day(1)],
    );
    expect(rows).toEqual([{ spend: 7.75 }]);
    expect((await spendTotals(db.pool, source.id)).n).toBe(3600);
  });

  it('a revoked token marks the source failing with TikTok reason', async () => {
    fake.advertisers.get('7000001')!.token = 'tt-new';
    const out = await tiktokSpendImporter.importDays(
      db.pool,
      config,
      { ...source, currency: 'USD' },
      { from: day(1), to: day(0) },
    );
    expect(out.kind).toBe('failed');
    const { rows } = await db.pool.query('SELECT status, last_error FROM spend_sources WHERE id = $1', [
      source.id,
    ]);
    expect(rows[0].status).toBe('failing');
    expect(rows[0].last_error).toMatch(/code 40105.*revoked/);
  });
});
