// spend add|list|sync|remove through the CLI against the Meta Insights fake, with the real worker
// running the backfill, the hourly refresh and a paused import's resumption.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SPEND_REFRESH_TASK, addDays, dayIn } from '../../backend/domain/spend/sync.js';
import { type CliWorld, cliWorld } from '../cli/harness.js';
import { type InsightsRow, MetaInsightsFake } from '../fakes/meta-insights.js';
import { TEST_ADMIN_TOKEN, type TestApp, startTestApp } from '../harness/app.js';
import { until } from './support.js';

const TZ = 'America/Los_Angeles';
const today = dayIn(TZ, new Date());
const day = (n: number) => addDays(today, -n);

let w: CliWorld;
let app: TestApp;
const fake = new MetaInsightsFake();
let siteId = '';
let otherSiteId = '';
let sourceId = '';

const sourceRow = async () =>
  (
    await w.db.pool.query(
      'SELECT status, last_error, backfilled, currency, time_zone, progress, credentials FROM spend_sources WHERE id = $1',
      [sourceId],
    )
  ).rows[0];
const dailyCount = async () =>
  (await w.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM spend_daily')).rows[0]!.n;

beforeAll(async () => {
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
  fake.accounts.set('act_101', {
    token: 'EAAgoodtoken',
    currency: 'EUR',
    timeZone: TZ,
    name: 'Shop ads',
    rows,
  });
  fake.accounts.set('act_202', { token: 'EAAnoadsread', currency: 'USD', rows: [], adsRead: false });
  // The CLI seals with the key the worker's dependencies open with.
  w = await cliWorld({ env: { META_GRAPH_URL: fake.url, SECRET_KEY: '07'.repeat(32) } });
  app = await startTestApp(w.db.pool, { env: { META_GRAPH_URL: fake.url }, worker: true });
  for (const [name, domain] of [
    ['A', 'a.example'],
    ['B', 'b.example'],
  ] as const) {
    const { accountId } = await w.ok('account', 'create', '--name', name);
    const { siteId: id } = await w.ok(
      'site',
      'create',
      '--account',
      accountId,
      '--name',
      name,
      '--domain',
      domain,
    );
    if (name === 'A') siteId = id;
    else otherSiteId = id;
  }
});
afterAll(async () => {
  await app?.stop();
  await w?.close();
  await fake.stop();
});

describe('spend sources', () => {
  it('a token Meta refuses, or one without ads_read, stores nothing and queues nothing', async () => {
    const add = (account: string, token: string) =>
      w.run(
        'spend',
        'add',
        '--site',
        siteId,
        '--platform',
        'meta',
        '--ad-account',
        account,
        '--access-token',
        token,
        '--json',
      );
    const bad = await add('act_101', 'EAAwrongtoken');
    expect(bad.code).toBe(1);
    expect(bad.json().error).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(bad.json().error.message).toMatch(/#190.*Error validating access token/);
    const noScope = await add('act_202', 'EAAnoadsread');
    expect(noScope.json().error.message).toMatch(/#200.*ads_read/);
    const { rows } = await w.db.pool.query(
      `SELECT (SELECT count(*)::int FROM spend_sources) AS sources,
              (SELECT count(*)::int FROM graphile_worker.jobs WHERE task_identifier = 'spend_import') AS jobs`,
    );
    expect(rows[0]).toEqual({ sources: 0, jobs: 0 });
    // Flags of another platform are refused before anything is asked.
    expect(
      await w.refused(
        'spend',
        'add',
        '--site',
        siteId,
        '--platform',
        'google',
        '--customer-id',
        '1234567890',
        '--oauth-token',
        'ya29.token',
      ),
    ).toContain('--developer-token is required with --platform google');
  });

  it('an accepted token: the account currency and time zone kept, the token sealed, 90 days backfilled page by page by the worker', async () => {
    const calls = fake.requests.length;
    const out = await w.ok<{ spendSourceId: string }>(
      'spend',
      'add',
      '--site',
      siteId,
      '--platform',
      'meta',
      '--ad-account',
      'act_101',
      '--access-token',
      'EAAgoodtoken',
    );
    expect(Object.keys(out)).toEqual(['spendSourceId']);
    sourceId = out.spendSourceId;
    const row = await until(sourceRow, (r) => r.backfilled === true);
    expect(row).toMatchObject({
      status: 'ok',
      backfilled: true,
      currency: 'EUR',
      time_zone: TZ,
      progress: null,
    });
    expect(row.credentials).not.toContain('EAAgoodtoken');
    expect(await dailyCount()).toBe(180);
    // The check, then eight Insights pages of 25 rows for the 90 days up to the account's today.
    const insights = fake.requests.slice(calls).filter((u) => u.pathname.endsWith('/insights'));
    expect(insights).toHaveLength(8);
    expect(JSON.parse(insights[0]!.searchParams.get('time_range')!)).toEqual({
      since: day(89),
      until: day(0),
    });
    const again = await w.run(
      'spend',
      'add',
      '--site',
      siteId,
      '--platform',
      'meta',
      '--ad-account',
      'act_101',
      '--access-token',
      'EAAgoodtoken',
      '--json',
    );
    expect(again.json().error).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(again.json().error.message).toContain('already reads spend');
    const list = await w.ok<{ spendSources: Record<string, any>[] }>('spend', 'list', '--site', siteId);
    expect(list.spendSources).toEqual([
      expect.objectContaining({
        spendSourceId: sourceId,
        platform: 'meta',
        account: 'act_101',
        status: 'ok',
        lastError: null,
        currency: 'EUR',
        timeZone: TZ,
        last7Days: { rows: 14, spend: { EUR: 147 } },
      }),
    ]);
  });

  it('the hourly refresh replaces a restated yesterday', async () => {
    for (const r of fake.accounts.get('act_101')!.rows)
      if (r.date_start === day(1) && r.campaign_id === '120001') r.spend = '14.25';
    const calls = fake.requests.length;
    await w.db.pool.query(`SELECT graphile_worker.add_job($1, '{}'::json)`, [SPEND_REFRESH_TASK]);
    const spend = await until(
      async () =>
        (
          await w.db.pool.query(
            `SELECT spend::float8 AS spend FROM spend_daily WHERE source_id = $1 AND day = $2 AND campaign_id = '120001'`,
            [sourceId, day(1)],
          )
        ).rows[0]?.spend,
      (v) => v === 14.25,
    );
    expect(spend).toBe(14.25);
    const asked = fake.requests.slice(calls).filter((u) => u.pathname.endsWith('/insights'));
    expect(JSON.parse(asked[0]!.searchParams.get('time_range')!)).toEqual({ since: day(1), until: day(0) });
    expect(await dailyCount()).toBe(180);
  });

  it('a rate limit pauses spend sync; the worker goes on from the stored page when Meta allows', async () => {
    fake.rateLimited = 1;
    fake.pagesBeforeLimit = 2;
    const calls = fake.requests.length;
    const r = await w.run('spend', 'sync', '--site', siteId, '--from', day(89), '--to', day(0), '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(r.json()).toEqual({ rows: 50 });
    expect(r.stderr).toMatch(/paused .*#80000.*goes on in 180 s/);
    const { rows: jobs } = await w.db.pool.query<{ id: string; wait: number }>(
      `SELECT id, extract(epoch FROM run_at - now())::float8 AS wait FROM graphile_worker.jobs WHERE task_identifier = 'spend_import' AND attempts = 0`,
    );
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!.wait).toBeGreaterThan(170);
    // The lease is held while it waits: another sync leaves the source alone.
    const busy = await w.run('spend', 'sync', '--site', siteId, '--json');
    expect(busy.json()).toEqual({ rows: 0 });
    expect(busy.stderr).toContain('another import of it runs');
    // Meta's three minutes pass.
    await w.db.pool.query('SELECT graphile_worker.reschedule_jobs(ARRAY[$1::bigint], run_at := now())', [
      jobs[0]!.id,
    ]);
    const row = await until(sourceRow, (s) => s.progress === null);
    expect(row).toMatchObject({ status: 'ok', progress: null });
    const insights = fake.requests.slice(calls).filter((u) => u.pathname.endsWith('/insights'));
    // Two pages, the refusal, then pages 3 to 8: the resumption starts at the stored third page.
    expect(insights).toHaveLength(2 + 1 + 6);
    expect(insights[3]!.searchParams.get('after')).toBe(Buffer.from('50').toString('base64url'));
    expect(await dailyCount()).toBe(180);
  });

  it("another account's site neither lists nor syncs the source", async () => {
    const calls = fake.requests.length;
    expect(await w.ok('spend', 'list', '--site', otherSiteId)).toEqual({ spendSources: [] });
    expect(await w.ok('spend', 'sync', '--site', otherSiteId)).toEqual({ rows: 0 });
    expect(fake.requests.length).toBe(calls);
  });

  it('a revoked token leaves the source failing, in spend list and on the reports page', async () => {
    fake.accounts.get('act_101')!.token = 'EAArotated';
    const r = await w.run('spend', 'sync', '--site', siteId, '--json');
    expect(r.json()).toEqual({ rows: 0 });
    expect(r.stderr).toMatch(/failed: .*#190/);
    const list = await w.ok<{ spendSources: Record<string, any>[] }>('spend', 'list', '--site', siteId);
    expect(list.spendSources[0]).toMatchObject({ status: 'failing' });
    expect(list.spendSources[0]!.lastError).toMatch(/#190.*Error validating access token/);
    const human = await w.run('spend', 'list', '--site', siteId);
    expect(human.stdout).toMatch(/act_101\s+failing/);
    const login = await fetch(`${app.url}/dashboard/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: TEST_ADMIN_TOKEN }),
      redirect: 'manual',
    });
    const cookie = login.headers
      .getSetCookie()
      .find((c) => c.startsWith('capigram_admin='))!
      .split(';')[0]!;
    const page = await (
      await fetch(`${app.url}/dashboard/sites/${siteId}/reports`, { headers: { cookie } })
    ).text();
    expect(page).toMatch(/<table id="spend-sources">.*meta act_101.*failing.*Error validating access token/s);
  });

  it('spend remove: no longer listed nor imported; its spend stays', async () => {
    expect(await w.ok('spend', 'remove', '--source', sourceId)).toEqual({ removed: true });
    expect(await w.ok('spend', 'list', '--site', siteId)).toEqual({ spendSources: [] });
    const again = await w.run('spend', 'remove', '--source', sourceId, '--json');
    expect(again.json().error).toMatchObject({ code: 'NOT_FOUND' });
    expect(await dailyCount()).toBe(180);
  });
});
