import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Config, loadConfig } from '../../backend/config.js';
import {
  classifyGoogleAnswer,
  googleRow,
  googleSpendImporter,
} from '../../backend/domain/spend/google-import.js';
import type { SpendSource } from '../../backend/domain/spend/importer.js';
import { microsToDecimal } from '../../backend/domain/spend/spend-page.js';
import { type GoogleSpendRow, GoogleAdsReportingFake } from '../fakes/google-ads-reporting.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { insertSpendSource, spendTotals } from './support.js';

const DAY_MS = 86_400_000;
const day = (n: number) =>
  new Date(Date.parse('2026-11-27T00:00:00Z') - n * DAY_MS).toISOString().slice(0, 10);

describe('Google Ads row parsing', () => {
  it.each([
    ['12345678', '12.345678'],
    ['1000000', '1'],
    ['0', '0'],
    ['999', '0.000999'],
    ['1500000000', '1500'],
    [2500000, '2.5'],
    ['12.5', null],
    ['', null],
    [undefined, null],
  ])('micros %j → %j', (micros, money) => {
    expect(microsToDecimal(micros)).toBe(money);
  });

  it.each([
    [
      'a full row',
      {
        campaign: { resourceName: 'customers/1/campaigns/7', id: '7', name: 'spring' },
        segments: { date: '2026-11-01' },
        metrics: { costMicros: '4560000', impressions: '900', clicks: '12' },
        customer: { resourceName: 'customers/1', currencyCode: 'EUR' },
      },
      {
        day: '2026-11-01',
        campaignId: '7',
        campaignName: 'spring',
        currency: 'EUR',
        spend: '4.56',
        impressions: 900,
        clicks: 12,
      },
    ],
    [
      'zeros left out by proto3 JSON, currency from the account',
      { campaign: { id: '8', name: 'quiet' }, segments: { date: '2026-11-02' }, metrics: {} },
      {
        day: '2026-11-02',
        campaignId: '8',
        campaignName: 'quiet',
        currency: 'USD',
        spend: '0',
        impressions: 0,
        clicks: 0,
      },
    ],
    ['no campaign id', { segments: { date: '2026-11-02' }, metrics: {} }, null],
    ['a date Google never writes', { campaign: { id: '8' }, segments: { date: '20261102' } }, null],
    [
      'cost as a float',
      { campaign: { id: '8' }, segments: { date: '2026-11-02' }, metrics: { costMicros: 1.5 } },
      null,
    ],
    [
      'negative clicks',
      { campaign: { id: '8' }, segments: { date: '2026-11-02' }, metrics: { clicks: '-1' } },
      null,
    ],
  ])('%s', (_name, row, want) => {
    expect(googleRow(row, 'USD')).toEqual(want);
  });

  const res = (status: number, body: unknown, headers: Record<string, string> = {}) => ({
    status,
    headers,
    bodyText: JSON.stringify(body),
  });
  const failure = (status: number, s: string, errorCode: Record<string, string>, details: object = {}) => ({
    error: {
      code: status,
      status: s,
      message: 'm',
      details: [{ errors: [{ errorCode, message: 'why', details }] }],
    },
  });
  it.each([
    ['a page', res(200, { results: [] }), { kind: 'ok' }],
    [
      'quota with retryDelay',
      res(
        429,
        failure(
          429,
          'RESOURCE_EXHAUSTED',
          { quotaError: 'RESOURCE_EXHAUSTED' },
          { quotaErrorDetails: { retryDelay: '42s' } },
        ),
      ),
      { kind: 'wait', ms: 42_000 },
    ],
    [
      'quota with Retry-After only',
      res(429, { error: { code: 429, status: 'RESOURCE_EXHAUSTED' } }, { 'retry-after': '7' }),
      { kind: 'wait', ms: 7000 },
    ],
    [
      'a 503',
      res(503, failure(503, 'UNAVAILABLE', { internalError: 'TRANSIENT_ERROR' })),
      { kind: 'wait', ms: 60_000 },
    ],
    ['no answer', { networkError: 'ECONNREFUSED' }, { kind: 'wait', ms: 60_000 }],
    [
      'a revoked token',
      res(401, failure(401, 'UNAUTHENTICATED', { authenticationError: 'OAUTH_TOKEN_REVOKED' })),
      { kind: 'refused', unauthenticated: true },
    ],
    [
      'a developer token in test mode',
      res(403, failure(403, 'PERMISSION_DENIED', { authorizationError: 'DEVELOPER_TOKEN_NOT_APPROVED' })),
      { kind: 'refused', unauthenticated: false },
    ],
  ] as const)('%s', (_name, answer, want) => {
    expect(classifyGoogleAnswer(answer, Date.now())).toMatchObject(want);
  });

  it('names the error code in the reason', () => {
    const v = classifyGoogleAnswer(
      res(403, failure(403, 'PERMISSION_DENIED', { authorizationError: 'DEVELOPER_TOKEN_NOT_APPROVED' })),
      0,
    );
    expect(v.kind === 'refused' && v.reason).toBe(
      'google 403 PERMISSION_DENIED authorizationError.DEVELOPER_TOKEN_NOT_APPROVED: why',
    );
  });
});

describe('Google Ads spend import against the reporting fake', () => {
  let db: TestDatabase;
  let config: Config;
  const fake = new GoogleAdsReportingFake();
  let source: SpendSource;

  beforeAll(async () => {
    db = await createTestDatabase(2);
    await fake.listen();
    config = loadConfig({
      DATABASE_URL: 'postgres://unused/',
      GOOGLE_ADS_API_URL: fake.url,
      GOOGLE_OAUTH_URL: fake.url,
    });
    const rows: GoogleSpendRow[] = [];
    for (let d = 0; d < 90; d++)
      for (const [id, name] of [
        ['2001', 'spring'],
        ['2002', 'autumn'],
      ] as const)
        rows.push({
          campaignId: id,
          campaignName: name,
          date: day(d),
          costMicros: '10500000',
          impressions: '1000',
          clicks: d % 2 ? '20' : '0',
        });
    fake.customers.set('1234567890', {
      currencyCode: 'EUR',
      timeZone: 'Europe/Berlin',
      descriptiveName: 'Shop',
      rows,
      production: true,
    });
    fake.pageSize = 25;
    const id = await insertSpendSource(db.pool, 'google', '123-456-7890');
    source = {
      id,
      siteId: '',
      platform: 'google',
      accountRef: '123-456-7890',
      credentials: {
        developerToken: 'dev-token',
        refreshToken: 'refresh-token',
        clientId: 'client-id',
        clientSecret: 'client-secret',
      },
      currency: 'EUR',
      timeZone: 'Europe/Berlin',
    };
  });
  afterAll(async () => {
    await fake.close();
    await db.drop();
  });

  it('check reads the customer currency and time zone', async () => {
    expect(await googleSpendImporter.check(config, source)).toEqual({
      kind: 'ok',
      currency: 'EUR',
      timeZone: 'Europe/Berlin',
      name: 'Shop',
    });
    const search = fake.searches().at(-1)!;
    expect(search.headers['developer-token']).toBe('dev-token');
    expect(search.path).toMatch(/^\/v\d+\/customers\/1234567890\/googleAds:search$/);
  });

  it('check refuses a developer token only approved for test accounts', async () => {
    fake.developerTokens.set('test-token', { approved: false });
    const out = await googleSpendImporter.check(config, {
      ...source,
      credentials: { ...source.credentials, developerToken: 'test-token' },
    });
    expect(out).toEqual({
      kind: 'refused',
      reason: expect.stringContaining('DEVELOPER_TOKEN_NOT_APPROVED'),
    });
  });

  it('backfills 90 days page by page, pauses on the quota and goes on from the stored page token', async () => {
    const window = { from: day(89), to: day(0) };
    const before = fake.searches().length;
    // 180 rows at 25 a page: eight pages. The quota strikes on the third.
    fake.rateLimitAfter(2);
    const first = await googleSpendImporter.importDays(db.pool, config, source, window);
    expect(first).toMatchObject({ kind: 'paused', rows: 50, retryAfterMs: 30_000 });
    expect(first.kind === 'paused' && first.reason).toContain('quotaError.RESOURCE_EXHAUSTED');
    const { rows: kept } = await db.pool.query('SELECT progress FROM spend_sources WHERE id = $1', [
      source.id,
    ]);
    expect(kept[0].progress).toMatchObject({ window, cursor: expect.any(String) });
    const done = await googleSpendImporter.importDays(db.pool, config, source, window);
    expect(done).toEqual({ kind: 'done', rows: 130, spend: { EUR: 1365 } });
    const searches = fake.searches().slice(before);
    // two pages, the refusal, then pages three to eight: the first page was not read again.
    expect(searches).toHaveLength(2 + 1 + 6);
    expect(searches.filter((r) => (r.body as { pageToken?: string }).pageToken === undefined)).toHaveLength(
      1,
    );
    expect(
      searches.every((r) =>
        (r.body as { query: string }).query.includes(`BETWEEN '${day(89)}' AND '${day(0)}'`),
      ),
    ).toBe(true);
    expect(await spendTotals(db.pool, source.id)).toEqual({
      n: 180,
      spend: 1890,
      clicks: 1800,
      first: day(89),
      last: day(0),
    });
    const { rows: st } = await db.pool.query(
      'SELECT status, progress, last_synced_at IS NOT NULL AS synced FROM spend_sources',
    );
    expect(st[0]).toEqual({ status: 'ok', progress: null, synced: true });
  });

  it('a stored page token Google no longer takes reads the window again from its start', async () => {
    const window = { from: day(2), to: day(0) };
    await db.pool.query('UPDATE spend_sources SET progress = $2 WHERE id = $1', [
      source.id,
      JSON.stringify({ window, cursor: 'expired-token' }),
    ]);
    const before = fake.searches().length;
    const out = await googleSpendImporter.importDays(db.pool, config, source, window);
    expect(out).toMatchObject({ kind: 'done', rows: 6 });
    const tokens = fake
      .searches()
      .slice(before)
      .map((r) => (r.body as { pageToken?: string }).pageToken);
    expect(tokens).toEqual(['expired-token', undefined]);
  });

  it('a restated yesterday replaces the day read before', async () => {
    const c = fake.customers.get('1234567890')!;
    for (const r of c.rows) if (r.date === day(1) && r.campaignId === '2001') r.costMicros = '14250000';
    const out = await googleSpendImporter.importDays(db.pool, config, source, { from: day(1), to: day(0) });
    expect(out).toMatchObject({ kind: 'done', rows: 4 });
    const { rows } = await db.pool.query(
      `SELECT spend::float8 AS spend FROM spend_daily WHERE source_id = $1 AND day = $2 AND campaign_id = '2001'`,
      [source.id, day(1)],
    );
    expect(rows).toEqual([{ spend: 14.25 }]);
    expect((await spendTotals(db.pool, source.id)).n).toBe(180);
  });

  it('a revoked refresh token marks the source failing with Google reason', async () => {
    fake.revoke('refresh-token');
    const out = await googleSpendImporter.importDays(db.pool, config, source, { from: day(1), to: day(0) });
    expect(out.kind).toBe('failed');
    const { rows } = await db.pool.query('SELECT status, last_error FROM spend_sources WHERE id = $1', [
      source.id,
    ]);
    expect(rows[0].status).toBe('failing');
    expect(rows[0].last_error).toMatch(/invalid_grant/);
  });
});
