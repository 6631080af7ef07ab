import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MetaInsightsFake } from './meta-insights.js';

// The Insights fake answers as Meta does where an importer could go wrong unnoticed.
describe('Meta Insights fake', () => {
  const fake = new MetaInsightsFake();
  const get = async (params: Record<string, string>) => {
    const u = new URL(`${fake.url}/v26.0/act_7/insights`);
    for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
    const res = await fetch(u, { headers: { authorization: 'Bearer tok' } });
    return {
      status: res.status,
      usage: res.headers.get('x-business-use-case-usage'),
      body: await res.json(),
    };
  };
  const range = JSON.stringify({ since: '2026-11-01', until: '2026-11-03' });

  beforeAll(async () => {
    await fake.start();
    fake.accounts.set('act_7', {
      token: 'tok',
      currency: 'EUR',
      rows: ['2026-11-01', '2026-11-02', '2026-11-03'].map((d) => ({
        campaign_id: '9',
        campaign_name: 'c',
        date_start: d,
        spend: '1.10',
        impressions: '10',
        clicks: '1',
      })),
    });
    fake.pageSize = 2;
  });
  afterAll(() => fake.stop());

  it('without time_increment answers one row for the whole range (all_days)', async () => {
    const r = await get({ level: 'campaign', fields: 'campaign_id,spend', time_range: range });
    expect(r.body.data).toEqual([
      { campaign_id: '9', spend: '3.30', date_start: '2026-11-01', date_stop: '2026-11-03' },
    ]);
    expect(JSON.parse(r.usage!)).toEqual({ '7': [expect.objectContaining({ type: 'ads_insights' })] });
  });

  it('with time_increment=1 answers a row per day, date_start and date_stop always, pages with cursors', async () => {
    const first = await get({ level: 'campaign', fields: 'spend', time_range: range, time_increment: '1' });
    expect(first.body.data).toEqual([
      { spend: '1.10', date_start: '2026-11-01', date_stop: '2026-11-01' },
      { spend: '1.10', date_start: '2026-11-02', date_stop: '2026-11-02' },
    ]);
    expect(first.body.paging.previous).toBeUndefined();
    const second = await (
      await fetch(first.body.paging.next, { headers: { authorization: 'Bearer tok' } })
    ).json();
    expect(second.data).toHaveLength(1);
    expect(second.paging.next).toBeUndefined();
    expect(second.paging.previous).toContain('before=');
  });

  it.each([
    [{ level: 'campaigns', fields: 'spend' }, /level must be one of/],
    [{ level: 'campaign', fields: 'spend,cost_micros' }, /cost_micros is not valid for fields param/],
    [
      { level: 'campaign', fields: 'spend', time_range: '{"since":"2026/11/01","until":"2026-11-03"}' },
      /time_range/,
    ],
  ])('refuses %j with code 100', async (params, message) => {
    const r = await get({ time_range: range, ...params });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({
      code: 100,
      type: 'OAuthException',
      message: expect.stringMatching(message),
    });
  });

  it('over the business-use-case limit answers 80000 with the wait in the usage header', async () => {
    fake.rateLimited = 1;
    const r = await get({ level: 'campaign', fields: 'spend', time_range: range, time_increment: '1' });
    expect(r.body.error).toMatchObject({ code: 80000, error_subcode: 2446079, is_transient: true });
    expect(JSON.parse(r.usage!)['7'][0].estimated_time_to_regain_access).toBe(3);
  });
});
