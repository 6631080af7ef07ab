import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GoogleAdsReportingFake } from './google-ads-reporting.js';
import { SnapchatReportingFake } from './snapchat-reporting.js';
import { TikTokReportingFake } from './tiktok-reporting.js';

// The reporting fakes refuse what the platforms refuse: an importer that sends what the platform
// would not take fails here rather than in production.
const google = new GoogleAdsReportingFake();
const tiktok = new TikTokReportingFake();
const snap = new SnapchatReportingFake();
const SNAP_ACCOUNT = '8adc3db7-8148-4fbf-999c-8d2266369d74';

beforeAll(async () => {
  await Promise.all([google.listen(), tiktok.listen(), snap.listen()]);
  google.accessTokens.add('ya29.t');
  google.customers.set('111', {
    currencyCode: 'EUR',
    timeZone: 'Europe/Berlin',
    descriptiveName: 'x',
    production: true,
    rows: [1, 2, 3].map((d) => ({
      campaignId: '5',
      campaignName: 'c',
      date: `2026-11-0${d}`,
      costMicros: '1000000',
      impressions: '1',
      clicks: '0',
    })),
  });
  google.pageSize = 2;
  tiktok.advertisers.set('42', { token: 'tt', name: 'n', currency: 'USD', timezone: 'UTC', rows: [] });
  snap.accounts.set(SNAP_ACCOUNT, {
    token: 'st',
    name: 'n',
    currency: 'USD',
    timezone: 'America/Los_Angeles',
    campaigns: [],
    rows: [],
  });
});
afterAll(() => Promise.all([google.close(), tiktok.close(), snap.close()]));

describe('Google Ads reporting fake', () => {
  const QUERY =
    "SELECT campaign.id, segments.date, metrics.cost_micros FROM campaign WHERE segments.date BETWEEN '2026-11-01' AND '2026-11-03'";
  const search = async (body: object, headers: Record<string, string> = {}, method = 'search') => {
    const res = await fetch(`${google.url}/v21/customers/111/googleAds:${method}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: 'Bearer ya29.t',
        'developer-token': 'dev-token',
        ...headers,
      },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  };
  const code = (b: { error: { details: { errors: { errorCode: object }[] }[] } }) =>
    b.error.details[0]!.errors[0]!.errorCode;

  it.each([
    [
      'no developer-token',
      { query: QUERY },
      { 'developer-token': '' },
      400,
      { requestError: 'DEVELOPER_TOKEN_PARAMETER_MISSING' },
    ],
    [
      'an unknown developer-token',
      { query: QUERY },
      { 'developer-token': 'nope' },
      401,
      { authenticationError: 'DEVELOPER_TOKEN_INVALID' },
    ],
    [
      'an unknown bearer',
      { query: QUERY },
      { authorization: 'Bearer other' },
      401,
      { authenticationError: 'OAUTH_TOKEN_INVALID' },
    ],
    ['pageSize', { query: QUERY, pageSize: 100 }, {}, 400, { requestError: 'PAGE_SIZE_NOT_SUPPORTED' }],
    [
      'an unknown field',
      { query: QUERY.replace('metrics.cost_micros', 'metrics.cost') },
      {},
      400,
      { queryError: 'UNRECOGNIZED_FIELD' },
    ],
    [
      'a date not YYYY-MM-DD',
      { query: QUERY.replace("'2026-11-01'", "'2026/11/01'") },
      {},
      400,
      { queryError: 'INVALID_VALUE_WITH_BETWEEN_OPERATOR' },
    ],
    [
      'segments.date without a range',
      { query: QUERY.replace(/ WHERE .*/, '') },
      {},
      400,
      { queryError: 'EXPECTED_FILTERS_ON_DATE_RANGE' },
    ],
    [
      'a page token of another query',
      { query: QUERY, pageToken: 'made-up' },
      {},
      400,
      { requestError: 'INVALID_PAGE_TOKEN' },
    ],
  ])('refuses %s', async (_name, body, headers, status, errorCode) => {
    const r = await search(body, headers);
    expect(r.status).toBe(status);
    expect(code(r.body)).toEqual(errorCode);
  });

  it('pages Search with nextPageToken and answers proto3 JSON (int64 as strings, zeros left out)', async () => {
    const first = await search({ query: QUERY });
    expect(first.body.results).toHaveLength(2);
    expect(first.body.results[0]).toEqual({
      campaign: { id: '5', resourceName: 'customers/111/campaigns/5' },
      segments: { date: '2026-11-01' },
      metrics: { costMicros: '1000000' },
    });
    const second = await search({ query: QUERY, pageToken: first.body.nextPageToken });
    expect(second.body.results).toHaveLength(1);
    expect(second.body.nextPageToken).toBeUndefined();
  });

  it('answers SearchStream in batches and refuses a page token there', async () => {
    const r = await search({ query: QUERY }, {}, 'searchStream');
    expect(r.body.map((b: { results: unknown[] }) => b.results.length)).toEqual([2, 1]);
    expect((await search({ query: QUERY, pageToken: 'x' }, {}, 'searchStream')).status).toBe(400);
  });
});

describe('TikTok reporting fake', () => {
  const report = async (params: Record<string, string>, token = 'tt') => {
    const u = new URL(`${tiktok.url}/open_api/v1.3/report/integrated/get/`);
    const all: Record<string, string> = {
      advertiser_id: '42',
      report_type: 'BASIC',
      data_level: 'AUCTION_CAMPAIGN',
      dimensions: '["campaign_id","stat_time_day"]',
      metrics: '["spend"]',
      start_date: '2026-11-01',
      end_date: '2026-11-30',
      ...params,
    };
    for (const [k, v] of Object.entries(all)) u.searchParams.set(k, v);
    const res = await fetch(u, { headers: token ? { 'Access-Token': token } : {} });
    expect(res.status).toBe(200);
    return res.json();
  };
  it.each([
    ['30 days', {}, '', 0],
    ['31 days', { end_date: '2026-12-01' }, '', 40002],
    ['no token', {}, null, 40104],
    ['a token it does not know', {}, 'other', 40105],
    ['another advertiser', { advertiser_id: '43' }, '', 40001],
    ['a date with slashes', { start_date: '2026/11/01' }, '', 40002],
    ['an unknown metric', { metrics: '["cost"]' }, '', 40002],
    ['metrics not a JSON array', { metrics: 'spend' }, '', 40002],
    ['page_size over 1000', { page_size: '1001' }, '', 40002],
    ['an unknown parameter', { fields: '["spend"]' }, '', 40002],
  ])('%s → code %i', async (_name, params, token, want) => {
    const body = await report(params, token === null ? '' : token || 'tt');
    expect(body.code).toBe(want);
  });
});

describe('Snapchat reporting fake', () => {
  const stats = async (start: string, end: string) => {
    const u = new URL(`${snap.url}/v1/adaccounts/${SNAP_ACCOUNT}/stats`);
    u.searchParams.set('granularity', 'DAY');
    u.searchParams.set('breakdown', 'campaign');
    u.searchParams.set('fields', 'spend');
    u.searchParams.set('start_time', start);
    u.searchParams.set('end_time', end);
    const res = await fetch(u, { headers: { authorization: 'Bearer st' } });
    return { status: res.status, body: await res.json() };
  };
  it.each([
    ['midnight in the account zone', '2026-11-01T00:00:00.000-07:00', '2026-11-03T00:00:00.000-08:00', 200],
    ['midnight UTC', '2026-11-01T00:00:00.000Z', '2026-11-03T00:00:00.000-08:00', 400],
    ['winter offset on a summer day', '2026-10-01T00:00:00.000-08:00', '2026-10-03T00:00:00.000-07:00', 400],
    ['32 days', '2026-01-01T00:00:00.000-08:00', '2026-02-02T00:00:00.000-08:00', 200],
    ['33 days', '2026-01-01T00:00:00.000-08:00', '2026-02-03T00:00:00.000-08:00', 400],
    ['no offset', '2026-01-01T00:00:00', '2026-01-02T00:00:00', 400],
  ])('%s → %i', async (_name, start, end, status) => {
    const r = await stats(start, end);
    expect(r.status).toBe(status);
    expect(r.body.request_status).toBe(status === 200 ? 'SUCCESS' : 'ERROR');
  });
});
