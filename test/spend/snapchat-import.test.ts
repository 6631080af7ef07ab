import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Config, loadConfig } from '../../backend/config.js';
import type { SpendSource } from '../../backend/domain/spend/importer.js';
import {
  classifySnapAnswer,
  snapchatSpendImporter,
  snapMidnight,
  snapRows,
} from '../../backend/domain/spend/snapchat-import.js';
import { type SnapSpendRow, SnapchatReportingFake } from '../fakes/snapchat-reporting.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { insertSpendSource, spendTotals } from './support.js';

const DAY_MS = 86_400_000;
const day = (n: number) =>
  new Date(Date.parse('2026-11-27T00:00:00Z') - n * DAY_MS).toISOString().slice(0, 10);
const ACCOUNT = '8adc3db7-8148-4fbf-999c-8d2266369d74';
const CAMPAIGNS = [
  { id: '6cf25572-048b-4447-95d1-eb47d9a2ae1c', name: 'spring' },
  { id: '7d2a1f35-1b7c-4a11-9cfe-0b8b2c3d4e5f', name: 'autumn' },
  { id: '9e3b2a46-2c8d-4b22-8d0f-1c9c3d4e5f60', name: 'paused' },
];

describe('Snapchat rules', () => {
  it.each([
    ['2026-01-15', 'America/Los_Angeles', '2026-01-15T00:00:00.000-08:00'],
    ['2026-07-15', 'America/Los_Angeles', '2026-07-15T00:00:00.000-07:00'],
    // The night daylight saving ends: midnight is still on summer time.
    ['2026-11-01', 'America/Los_Angeles', '2026-11-01T00:00:00.000-07:00'],
    ['2026-11-02', 'America/Los_Angeles', '2026-11-02T00:00:00.000-08:00'],
    ['2026-03-29', 'Europe/Berlin', '2026-03-29T00:00:00.000+01:00'],
    ['2026-06-01', 'Asia/Kolkata', '2026-06-01T00:00:00.000+05:30'],
    ['2026-06-01', 'UTC', '2026-06-01T00:00:00.000+00:00'],
  ])('midnight of %s in %s is %s', (d, tz, iso) => {
    expect(snapMidnight(d, tz)).toBe(iso);
  });

  const answer = (timeseries: unknown[]) => ({
    request_status: 'SUCCESS',
    timeseries_stats: [{ timeseries_stat: { breakdown_stats: { campaign: [{ id: 'c1', timeseries }] } } }],
  });
  it.each([
    [
      'micros become money, swipes clicks',
      answer([
        {
          start_time: '2026-11-01T00:00:00.000-07:00',
          stats: { spend: 12_345_678, impressions: 10, swipes: 2 },
        },
      ]),
      [
        {
          day: '2026-11-01',
          campaignId: 'c1',
          campaignName: 'one',
          currency: 'GBP',
          spend: '12.345678',
          impressions: 10,
          clicks: 2,
        },
      ],
    ],
    [
      'a day with nothing served is no row',
      answer([
        { start_time: '2026-11-01T00:00:00.000-07:00', stats: { spend: 0, impressions: 0, swipes: 0 } },
      ]),
      [],
    ],
    [
      'spend as a fraction',
      answer([{ start_time: '2026-11-01T00:00:00.000-07:00', stats: { spend: 1.5 } }]),
      null,
    ],
    ['no start time', answer([{ stats: { spend: 1 } }]), null],
    ['not a stats answer', { request_status: 'SUCCESS' }, null],
  ])('%s', (_name, body, want) => {
    expect(snapRows(body, 'GBP', new Map([['c1', 'one']]))).toEqual(want);
  });

  const res = (status: number, body: unknown, headers: Record<string, string> = {}) => ({
    status,
    headers,
    bodyText: JSON.stringify(body),
  });
  it.each([
    ['success', res(200, { request_status: 'SUCCESS' }), { kind: 'ok' }],
    [
      '429 with Retry-After',
      res(429, { request_status: 'ERROR' }, { 'retry-after': '12' }),
      { kind: 'wait', ms: 12_000 },
    ],
    ['429 without', res(429, {}), { kind: 'wait', ms: 60_000 }],
    ['502', { status: 502, headers: {}, bodyText: '<html>' }, { kind: 'wait', ms: 60_000 }],
    [
      '401',
      res(401, { request_status: 'ERROR', debug_message: 'Unauthorized' }),
      { kind: 'refused', reason: 'snapchat 401: Unauthorized' },
    ],
    [
      '403',
      res(403, { request_status: 'ERROR', error_code: 'E3003', debug_message: 'no' }),
      { kind: 'refused', reason: 'snapchat 403 E3003: no' },
    ],
  ] as const)('%s', (_name, r, want) => {
    expect(classifySnapAnswer(r, Date.now())).toMatchObject(want);
  });
});

describe('Snapchat spend import against the Marketing API fake', () => {
  let db: TestDatabase;
  let config: Config;
  const fake = new SnapchatReportingFake();
  let source: SpendSource;

  beforeAll(async () => {
    db = await createTestDatabase(2);
    await fake.listen();
    config = loadConfig({
      DATABASE_URL: 'postgres://unused/',
      SNAPCHAT_ADS_API_URL: fake.url,
      SNAPCHAT_OAUTH_URL: fake.url,
    });
    const rows: SnapSpendRow[] = [];
    for (let d = 0; d < 90; d++)
      for (const c of CAMPAIGNS.slice(0, 2))
        rows.push({ campaignId: c.id, date: day(d), spend: 3_250_000, impressions: 500, swipes: 7 });
    fake.accounts.set(ACCOUNT, {
      token: 'snap-token',
      name: 'Shop',
      currency: 'GBP',
      timezone: 'America/Los_Angeles',
      campaigns: CAMPAIGNS,
      rows,
    });
    fake.campaignPageSize = 2;
    const id = await insertSpendSource(db.pool, 'snapchat', ACCOUNT);
    source = {
      id,
      siteId: '',
      platform: 'snapchat',
      accountRef: ACCOUNT,
      credentials: { accessToken: 'snap-token' },
      currency: 'GBP',
      timeZone: 'America/Los_Angeles',
    };
  });
  afterAll(async () => {
    await fake.close();
    await db.drop();
  });

  it('check reads the ad account currency and time zone', async () => {
    expect(await snapchatSpendImporter.check(config, source)).toEqual({
      kind: 'ok',
      currency: 'GBP',
      timeZone: 'America/Los_Angeles',
      name: 'Shop',
    });
    expect(fake.received.at(-1)!.headers.authorization).toBe('Bearer snap-token');
  });

  it('backfills 90 days in 31-day parts across daylight saving, pauses on 429 and goes on from the stored part', async () => {
    const window = { from: day(89), to: day(0) };
    const before = fake.stats().length;
    // Two campaign pages, the first part; then 429.
    fake.rateLimitAfter(3);
    const paused = await snapchatSpendImporter.importDays(db.pool, config, source, window);
    expect(paused).toMatchObject({ kind: 'paused', rows: 62, retryAfterMs: 30_000 });
    expect(paused.kind === 'paused' && paused.reason).toContain('snapchat 429');
    const { rows: kept } = await db.pool.query('SELECT progress FROM spend_sources WHERE id = $1', [
      source.id,
    ]);
    expect(kept[0].progress).toEqual({ window, cursor: { from: day(58) } });
    const done = await snapchatSpendImporter.importDays(db.pool, config, source, window);
    expect(done).toEqual({ kind: 'done', rows: 118, spend: { GBP: 383.5 } });
    const stats = fake.stats().slice(before);
    expect(stats.map((r) => [r.query.start_time, r.query.end_time, r.status])).toEqual([
      [`${day(89)}T00:00:00.000-07:00`, `${day(58)}T00:00:00.000-07:00`, 200],
      [`${day(58)}T00:00:00.000-07:00`, `${day(27)}T00:00:00.000-07:00`, 429],
      [`${day(58)}T00:00:00.000-07:00`, `${day(27)}T00:00:00.000-07:00`, 200],
      [`${day(27)}T00:00:00.000-07:00`, '2026-11-28T00:00:00.000-08:00', 200],
    ]);
    expect(await spendTotals(db.pool, source.id)).toEqual({
      n: 180,
      spend: 585,
      clicks: 1260,
      first: day(89),
      last: day(0),
    });
    const { rows: names } = await db.pool.query('SELECT DISTINCT campaign_name FROM spend_daily ORDER BY 1');
    expect(names).toEqual([{ campaign_name: 'autumn' }, { campaign_name: 'spring' }]);
  });

  it('a restated yesterday replaces the day read before', async () => {
    const a = fake.accounts.get(ACCOUNT)!;
    for (const r of a.rows) if (r.date === day(1) && r.campaignId === CAMPAIGNS[0]!.id) r.spend = 4_125_000;
    const out = await snapchatSpendImporter.importDays(db.pool, config, source, { from: day(1), to: day(0) });
    expect(out).toMatchObject({ kind: 'done', rows: 4 });
    const { rows } = await db.pool.query(
      'SELECT spend::float8 AS spend FROM spend_daily WHERE source_id = $1 AND day = $2 AND campaign_id = $3',
      [source.id, day(1), CAMPAIGNS[0]!.id],
    );
    expect(rows).toEqual([{ spend: 4.125 }]);
    expect((await spendTotals(db.pool, source.id)).n).toBe(180);
  });

  it('a source with a refresh token gets its access tokens from Snap OAuth; a revoked one fails the source', async () => {
    fake.refreshTokens.set('snap-refresh', ACCOUNT);
    const withRefresh = {
      ...source,
      credentials: { refreshToken: 'snap-refresh', clientId: 'snap-client', clientSecret: 'snap-secret' },
    };
    const before = fake.tokenRequests().length;
    const out = await snapchatSpendImporter.importDays(db.pool, config, withRefresh, {
      from: day(1),
      to: day(0),
    });
    expect(out).toMatchObject({ kind: 'done', rows: 4 });
    // One exchange serves the campaigns and stats requests.
    expect(fake.tokenRequests().length - before).toBe(1);
    expect(fake.tokenRequests().at(-1)!.body).toMatchObject({
      grant_type: 'refresh_token',
      refresh_token: 'snap-refresh',
    });
    fake.revokeRefreshToken('snap-refresh');
    const failed = await snapchatSpendImporter.importDays(db.pool, config, withRefresh, {
      from: day(1),
      to: day(0),
    });
    expect(failed.kind).toBe('failed');
    const { rows } = await db.pool.query('SELECT status, last_error FROM spend_sources WHERE id = $1', [
      source.id,
    ]);
    expect(rows[0]).toEqual({
      status: 'failing',
      last_error: expect.stringMatching(/^snapchat oauth 400: invalid_grant/),
    });
  });

  it('a revoked token marks the source failing with Snap reason', async () => {
    fake.accounts.get(ACCOUNT)!.token = 'snap-new';
    const out = await snapchatSpendImporter.importDays(db.pool, config, source, { from: day(1), to: day(0) });
    expect(out.kind).toBe('failed');
    const { rows } = await db.pool.query('SELECT status, last_error FROM spend_sources WHERE id = $1', [
      source.id,
    ]);
    expect(rows[0].status).toBe('failing');
    expect(rows[0].last_error).toMatch(/^snapchat 401 E3001: Unauthorized/);
  });
});
