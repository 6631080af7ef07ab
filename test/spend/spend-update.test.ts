// spend update through the CLI against the Meta Insights fake, with the real worker running the
// import it queues: a rotated token replaces a revoked one in place, a refused one changes nothing.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addDays, dayIn } from '../../backend/domain/spend/sync.js';
import { mergeCredentials } from '../../backend/domain/spend/update-source.js';
import { type CliWorld, cliWorld } from '../cli/harness.js';
import { type InsightsRow, MetaInsightsFake } from '../fakes/meta-insights.js';
import { type TestApp, startTestApp } from '../harness/app.js';
import { until } from './support.js';

const TZ = 'Europe/Berlin';
const today = dayIn(TZ, new Date());
const day = (n: number) => addDays(today, -n);

let w: CliWorld;
let app: TestApp;
const fake = new MetaInsightsFake();
let siteId = '';
let sourceId = '';

interface SourceState {
  id: string;
  status: string;
  last_error: string | null;
  backfilled: boolean;
  credentials: string;
  lease: string | null;
  synced: Date | null;
}
const source = async (id = sourceId) =>
  (
    await w.db.pool.query<SourceState>(
      `SELECT id, status, last_error, backfilled, credentials, import_lease_token AS lease, last_synced_at AS synced
       FROM spend_sources WHERE id = $1`,
      [id],
    )
  ).rows[0]!;
const importJobs = async () =>
  (
    await w.db.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM graphile_worker.jobs WHERE task_identifier = 'spend_import'`,
    )
  ).rows[0]!.n;
const spendOf = async (d: string) =>
  (
    await w.db.pool.query<{ spend: number }>(
      `SELECT spend::float8 AS spend FROM spend_daily WHERE source_id = $1 AND day = $2 AND campaign_id = '120001'`,
      [sourceId, d],
    )
  ).rows[0]?.spend;
const insightsSince = (calls: number) =>
  fake.requests
    .slice(calls)
    .filter((u) => u.pathname.endsWith('/insights'))
    .map((u) => JSON.parse(u.searchParams.get('time_range')!) as { since: string; until: string });
const update = (...flags: string[]) => w.run('spend', 'update', '--source', sourceId, ...flags, '--json');

beforeAll(async () => {
  await fake.start();
  const rows: InsightsRow[] = [];
  for (let d = 0; d < 3; d++)
    rows.push({
      campaign_id: '120001',
      campaign_name: 'spring',
      date_start: day(d),
      spend: '10.50',
      impressions: '1000',
      clicks: '20',
    });
  fake.accounts.set('act_101', { token: 'EAAfirsttoken', currency: 'EUR', timeZone: TZ, rows });
  fake.accounts.set('act_202', { token: 'EAAother', currency: 'USD', timeZone: TZ, rows: [] });
  w = await cliWorld({ env: { META_GRAPH_URL: fake.url, SECRET_KEY: '07'.repeat(32) } });
  app = await startTestApp(w.db.pool, { env: { META_GRAPH_URL: fake.url }, worker: true });
  const { accountId } = await w.ok('account', 'create', '--name', 'A');
  ({ siteId } = await w.ok('site', 'create', '--account', accountId, '--name', 'A', '--domain', 'a.example'));
  ({ spendSourceId: sourceId } = await w.ok(
    'spend',
    'add',
    '--site',
    siteId,
    '--platform',
    'meta',
    '--ad-account',
    'act_101',
    '--access-token',
    'EAAfirsttoken',
  ));
  await until(source, (s) => s.backfilled);
  // Meta revokes the token (a new system-user token was generated): the next import fails.
  fake.accounts.get('act_101')!.token = 'EAAsecondtoken';
  const sync = await w.run('spend', 'sync', '--site', siteId, '--json');
  expect(sync.stderr).toMatch(/failed: .*#190/);
});
afterAll(async () => {
  await app?.stop();
  await w?.close();
  await fake.stop();
});

describe('spend update', () => {
  it('a token Meta refuses, or one that cannot read the source’s account, changes nothing and queues nothing', async () => {
    const before = await source();
    expect(before).toMatchObject({ status: 'failing', backfilled: true, lease: null });
    expect(before.last_error).toMatch(/#190/);
    const jobs = await importJobs();
    const calls = fake.requests.length;
    for (const token of ['EAAwrongtoken', 'EAAother']) {
      const r = await update('--access-token', token);
      expect(r.code).toBe(1);
      expect(r.json().error).toMatchObject({ code: 'VALIDATION_FAILED' });
      expect(r.json().error.message).toMatch(/meta refused the credentials for act_101: .*#190/);
    }
    // The check reads the source's own account, act_101, with each token, and nothing else.
    expect(fake.requests.slice(calls).map((u) => u.pathname)).toEqual([
      expect.stringMatching(/\/act_101$/),
      expect.stringMatching(/\/act_101$/),
    ]);
    expect(await source()).toEqual(before);
    expect(await importJobs()).toBe(jobs);
  });

  it('flags of another platform, no flags, and unknown or malformed ids are refused', async () => {
    const before = await source();
    const calls = fake.requests.length;
    const google = await update('--developer-token', 'devtoken123');
    expect(google.json().error).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(google.json().error.message).toContain(
      '--developer-token is not used with a meta spend source (it takes --access-token)',
    );
    const refresh = await update('--access-token', 'EAAsecondtoken', '--refresh-token', 'rtoken12345');
    expect(refresh.json().error.message).toContain('--refresh-token is not used with a meta spend source');
    expect(await w.refused('spend', 'update', '--source', sourceId)).toContain('nothing to change');
    expect(
      await w.refused(
        'spend',
        'update',
        '--source',
        sourceId,
        '--oauth-token',
        'ya29.abcdefgh',
        '--refresh-token',
        'r',
      ),
    ).toContain('give either --oauth-token or --refresh-token');
    // The account is the source's: it takes no account flag.
    expect((await update('--ad-account', 'act_202', '--access-token', 'EAAother')).code).toBe(1);
    const unknown = await w.run(
      'spend',
      'update',
      '--source',
      randomUUID(),
      '--access-token',
      'EAAsecondtoken',
      '--json',
    );
    expect(unknown.json().error).toMatchObject({ code: 'NOT_FOUND' });
    const malformed = await w.run(
      'spend',
      'update',
      '--source',
      'nope',
      '--access-token',
      'EAAsecondtoken',
      '--json',
    );
    expect(malformed.json().error).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(fake.requests.length).toBe(calls);
    expect(await source()).toEqual(before);
  });

  it('the new token: checked, sealed, the source ok at once with its id and spend, and the next import reads with it', async () => {
    const before = await source();
    // Meta restates yesterday: only an import with the new token can read it.
    fake.accounts.get('act_101')!.rows[1]!.spend = '12.75';
    const calls = fake.requests.length;
    const out = await w.ok('spend', 'update', '--source', sourceId, '--access-token', 'EAAsecondtoken');
    expect(out).toEqual({ spendSourceId: sourceId, status: 'ok' });
    const after = await source();
    expect(after).toMatchObject({ id: sourceId, status: 'ok', last_error: null, backfilled: true });
    expect(after.credentials).not.toBe(before.credentials);
    expect(after.credentials).not.toContain('EAAsecondtoken');
    // The backfill had finished: yesterday and today are imported.
    expect(
      await until(
        () => spendOf(day(1)),
        (v) => v === 12.75,
      ),
    ).toBe(12.75);
    const done = await until(
      source,
      (s) => s.lease === null && s.synced !== null && s.synced > before.synced!,
    );
    expect(done).toMatchObject({ status: 'ok', last_error: null });
    expect(insightsSince(calls)).toEqual([{ since: day(1), until: day(0) }]);
    const { rows } = await w.db.pool.query(
      'SELECT count(*)::int AS n FROM spend_daily WHERE source_id = $1',
      [sourceId],
    );
    expect(rows[0].n).toBe(3);
    const list = await w.ok<{ spendSources: Record<string, unknown>[] }>('spend', 'list', '--site', siteId);
    expect(list.spendSources).toEqual([
      expect.objectContaining({ spendSourceId: sourceId, status: 'ok', lastError: null }),
    ]);
  });

  it('an import holding the lease keeps it; the queued import runs with the new token when it ends', async () => {
    const held = randomUUID();
    await w.db.pool.query(
      `UPDATE spend_sources SET import_lease_token = $2, import_lease_until = now() + interval '10 minutes', backfilled = false WHERE id = $1`,
      [sourceId, held],
    );
    fake.accounts.get('act_101')!.token = 'EAAthirdtoken';
    const calls = fake.requests.length;
    expect(await w.ok('spend', 'update', '--source', sourceId, '--access-token', 'EAAthirdtoken')).toEqual({
      spendSourceId: sourceId,
      status: 'ok',
    });
    expect((await source()).lease).toBe(held);
    // The queued import finds the lease held and waits for it (it would run two imports at once).
    const waiting = async () =>
      (
        await w.db.pool.query(
          `SELECT id FROM graphile_worker.jobs WHERE task_identifier = 'spend_import' AND run_at > now() + interval '1 minute'`,
        )
      ).rows.length;
    expect(await until(waiting, (n) => n === 1)).toBe(1);
    expect(insightsSince(calls)).toEqual([]);
    // The holder ends; the waiting import runs: the source never finished a backfill, so 90 days.
    await w.db.pool.query(
      'UPDATE spend_sources SET import_lease_token = NULL, import_lease_until = NULL WHERE id = $1',
      [sourceId],
    );
    await w.db.pool.query(
      `SELECT graphile_worker.reschedule_jobs(array_agg(id), run_at := now()) FROM graphile_worker.jobs WHERE task_identifier = 'spend_import'`,
    );
    const done = await until(source, (s) => s.backfilled);
    expect(done).toMatchObject({ status: 'ok', lease: null, backfilled: true });
    expect(insightsSince(calls)).toEqual([{ since: day(89), until: day(0) }]);
  });

  it('a removed source is not found', async () => {
    expect(await w.ok('spend', 'remove', '--source', sourceId)).toEqual({ removed: true });
    const r = await update('--access-token', 'EAAthirdtoken');
    expect(r.json().error).toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe('mergeCredentials', () => {
  const google = { developerToken: 'dev', refreshToken: 'r1', clientId: 'c', clientSecret: 's' };
  it.each([
    [
      'a new access token replaces the old',
      { accessToken: 'a1' },
      { accessToken: 'a2' },
      { accessToken: 'a2' },
    ],
    [
      'a refresh token alone keeps the OAuth client',
      google,
      { refreshToken: 'r2' },
      { ...google, refreshToken: 'r2' },
    ],
    [
      'an OAuth access token drops the refresh credentials',
      google,
      { oauthToken: 'o' },
      { developerToken: 'dev', oauthToken: 'o' },
    ],
    [
      'refresh credentials drop an OAuth access token',
      { developerToken: 'dev', oauthToken: 'o' },
      { refreshToken: 'r1', clientId: 'c', clientSecret: 's' },
      google,
    ],
    [
      'a developer token alone keeps the rest',
      google,
      { developerToken: 'dev2' },
      { ...google, developerToken: 'dev2' },
    ],
    ['flags not given change nothing', google, { oauthToken: undefined }, google],
  ])('%s', (_, stored, changes, merged) => {
    expect(mergeCredentials(stored, changes)).toEqual(merged);
  });
});
