// spend update of a Google Ads source against the reporting fake (its OAuth token endpoint and
// GAQL Search): a revoked refresh token replaced alone, the stored OAuth client kept, and the next
// import fetching access tokens with the new one; an access token in place of the refresh
// credentials; a refused refresh token and another platform's flag changing nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Config, loadConfig } from '../../backend/config.js';
import { createSecretBox } from '../../backend/crypto/secret-box.js';
import { addSpendSource, syncSite } from '../../backend/domain/spend/sources.js';
import { type ImportJob, addDays, dayIn, handleImportJob } from '../../backend/domain/spend/sync.js';
import { updateSpendSource } from '../../backend/domain/spend/update-source.js';
import { createLogger } from '../../backend/log.js';
import { type GoogleSpendRow, GoogleAdsReportingFake } from '../fakes/google-ads-reporting.js';
import { TEST_SECRET_KEY } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

const TZ = 'Europe/Berlin';
const today = dayIn(TZ, new Date());

let db: TestDatabase;
let config: Config;
const fake = new GoogleAdsReportingFake();
const box = createSecretBox(TEST_SECRET_KEY);
let siteId = '';
let sourceId = '';
const deps = () => ({ pool: db.pool, box, config, now: () => new Date(), log: createLogger('silent') });

/** The spend_import jobs queued (the worker does not run here: the test runs each job itself). */
async function takeJobs(): Promise<ImportJob[]> {
  const { rows } = await db.pool.query<{ payload: ImportJob }>(
    `DELETE FROM graphile_worker._private_jobs j USING graphile_worker._private_tasks t
     WHERE t.id = j.task_id AND t.identifier = 'spend_import' RETURNING j.payload`,
  );
  return rows.map((r) => r.payload);
}
const state = async () =>
  (
    await db.pool.query<{
      status: string;
      last_error: string | null;
      credentials: string;
      backfilled: boolean;
    }>('SELECT status, last_error, credentials, backfilled FROM spend_sources WHERE id = $1', [sourceId])
  ).rows[0]!;
const stored = async () => JSON.parse(box.open((await state()).credentials)) as Record<string, string>;
const refreshedWith = (from: number) =>
  fake.received
    .slice(from)
    .filter((r) => r.path === '/token')
    .map((r) => (r.body as Record<string, string>).refresh_token);

beforeAll(async () => {
  db = await createTestDatabase(3);
  await fake.listen();
  config = loadConfig({
    DATABASE_URL: 'postgres://unused/',
    GOOGLE_ADS_API_URL: fake.url,
    GOOGLE_OAUTH_URL: fake.url,
  });
  const rows: GoogleSpendRow[] = [0, 1, 2].map((d) => ({
    campaignId: '2001',
    campaignName: 'spring',
    date: addDays(today, -d),
    costMicros: '10500000',
    impressions: '1000',
    clicks: '20',
  }));
  fake.customers.set('1234567890', {
    currencyCode: 'EUR',
    timeZone: TZ,
    descriptiveName: 'Shop',
    rows,
    production: true,
  });
  fake.oauthClients.set('client-id-2', 'client-secret-2');
  const { rows: s } = await db.pool.query<{ id: string }>(
    `WITH a AS (INSERT INTO accounts (name) VALUES ('shop') RETURNING id)
     INSERT INTO sites (account_id, website_id, name, domains)
     SELECT id, 'ws_shop_rot', 'shop', ARRAY['shop.example'] FROM a RETURNING id`,
  );
  siteId = s[0]!.id;
  ({ spendSourceId: sourceId } = await addSpendSource(deps(), {
    platform: 'google',
    siteId,
    customerId: '123-456-7890',
    developerToken: 'dev-token',
    refreshToken: 'refresh-token',
    clientId: 'client-id',
    clientSecret: 'client-secret',
  }));
  for (const job of await takeJobs())
    expect(await handleImportJob(deps(), job)).toMatchObject({ kind: 'done' });
  // Google revokes the refresh token (the user's password changed, or the grant was removed).
  fake.revoke('refresh-token');
  const sync = await syncSite(deps(), siteId, {});
  expect(sync.notes.join()).toMatch(/failed: .*invalid_grant/);
});
afterAll(async () => {
  await fake.close();
  await db?.drop();
});

describe('spend update of a Google Ads source', () => {
  it('a refresh token Google refuses and a flag of another platform change nothing', async () => {
    const before = await state();
    expect(before).toMatchObject({ status: 'failing', backfilled: true });
    await expect(
      updateSpendSource(deps(), { sourceId, credentials: { refreshToken: 'refresh-token-unknown' } }),
    ).rejects.toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringMatching(/invalid_grant/) });
    await expect(
      updateSpendSource(deps(), { sourceId, credentials: { accessToken: 'EAAsomethingmeta' } }),
    ).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
      message: expect.stringContaining('--access-token is not used with a google spend source'),
    });
    // A client id without its secret: the refresh credentials' rule of spend add.
    await expect(
      updateSpendSource(deps(), { sourceId, credentials: { clientId: 'client-id-2' } }),
    ).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(await state()).toEqual(before);
    expect(await takeJobs()).toEqual([]);
  });

  it('a new refresh token alone keeps the OAuth client; the next import fetches access tokens with it', async () => {
    fake.refreshTokens.add('refresh-token-2');
    const calls = fake.received.length;
    expect(
      await updateSpendSource(deps(), { sourceId, credentials: { refreshToken: 'refresh-token-2' } }),
    ).toEqual({ spendSourceId: sourceId, status: 'ok' });
    expect(await state()).toMatchObject({ status: 'ok', last_error: null, backfilled: true });
    expect(await stored()).toEqual({
      developerToken: 'dev-token',
      refreshToken: 'refresh-token-2',
      clientId: 'client-id',
      clientSecret: 'client-secret',
    });
    const jobs = await takeJobs();
    expect(jobs).toEqual([expect.objectContaining({ sourceId, from: addDays(today, -1), to: today })]);
    expect(jobs[0]!.backfill).toBeUndefined();
    expect(await handleImportJob(deps(), jobs[0]!)).toMatchObject({ kind: 'done', rows: 2 });
    // The old refresh token is revoked and its access tokens with it: only the new one can have read.
    expect(refreshedWith(calls).length).toBeGreaterThan(0);
    expect(new Set(refreshedWith(calls))).toEqual(new Set(['refresh-token-2']));
    expect(await state()).toMatchObject({ status: 'ok', last_error: null });
  });

  it('an access token replaces the refresh credentials, and a new OAuth client comes with its refresh token', async () => {
    const issued = [...fake.accessTokens][0]!;
    await updateSpendSource(deps(), { sourceId, credentials: { oauthToken: issued } });
    expect(await stored()).toEqual({ developerToken: 'dev-token', oauthToken: issued });
    await takeJobs();
    await updateSpendSource(deps(), {
      sourceId,
      credentials: {
        refreshToken: 'refresh-token-2',
        clientId: 'client-id-2',
        clientSecret: 'client-secret-2',
      },
    });
    expect(await stored()).toEqual({
      developerToken: 'dev-token',
      refreshToken: 'refresh-token-2',
      clientId: 'client-id-2',
      clientSecret: 'client-secret-2',
    });
    await takeJobs();
  });
});
