// Google pixels holding a refresh token: the real worker fetches access tokens from the fake's
// token endpoint, caches them, refreshes once when Google answers 401, and fails the send with a
// clear message when the refresh token is refused for good.
import type { Runner } from 'graphile-worker';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { classifyTokenResponse } from '../../backend/delivery/google-oauth.js';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { startWorker } from '../../backend/worker/runner.js';
import { deliveryTasks } from '../../backend/worker/tasks/deliver.js';
import { startFakes, type Fakes } from '../fakes/index.js';
import { testDeps } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import {
  allSettled,
  createConversion,
  createVisit,
  GOOGLE_ACTION,
  GOOGLE_CUSTOMER,
  sendsOf,
  TEST_DELIVERY,
} from './support.js';

const CLIENT = { clientId: 'google-client-id', clientSecret: 'google-client-secret' };
// One refresh token per test: the access-token cache is per process and keyed by the credentials.
const REFRESH = ['rt-delivers-0001', 'rt-expired-00001', 'rt-refused-00001', 'rt-outage-000001'];

let db: TestDatabase;
let fakes: Fakes;
let worker: Runner;
let deps: ReturnType<typeof testDeps>;

beforeAll(async () => {
  db = await createTestDatabase();
  fakes = await startFakes({ google: { refreshTokens: REFRESH } });
  deps = testDeps(db.pool, { ...fakes.env, GOOGLE_OAUTH_URL: fakes.google.url });
  worker = await startWorker(deps, {
    extraTasks: deliveryTasks(deps, TEST_DELIVERY),
    crontab: '',
    pollIntervalMs: 100,
    concurrency: 2,
  });
});
afterAll(async () => {
  await worker.stop();
  await fakes.closeAll();
  await db.drop();
});
beforeEach(() => {
  fakes.google.reset();
});

/** A site whose only pixel is a Google pixel with refresh credentials. */
async function googleSite(refreshToken: string): Promise<string> {
  const { accountId } = await createAccount(db.pool, { name: 'OAuth Co' });
  const { siteId } = await createSite(db.pool, { accountId, name: 'Shop', domains: ['shop.example.com'] });
  await addPixel(
    { pool: db.pool, box: deps.box },
    {
      platform: 'google',
      siteId,
      customerId: GOOGLE_CUSTOMER,
      conversionActions: [GOOGLE_ACTION],
      api: 'ads',
      developerToken: 'google-dev-token',
      refreshToken,
      ...CLIENT,
    },
  );
  return siteId;
}

async function convert(siteId: string, gclid: string): Promise<string> {
  const visitId = await createVisit(db.pool, siteId, { gclid });
  const { conversionId } = await createConversion(db.pool, siteId, { visitId });
  return conversionId;
}

function uploadedOrders(): string[] {
  return fakes.google.conversions().map((c) => c.conversion.orderId ?? '');
}

function bearer(r: { headers: Record<string, unknown> }): string {
  return String(r.headers.authorization ?? '');
}

describe('a Google pixel with a refresh token', () => {
  it('delivers with an access token from the token endpoint, and reuses it while it is good', async () => {
    const siteId = await googleSite(REFRESH[0]!);
    const first = await convert(siteId, 'Cj0-first');
    await allSettled(db.pool);
    const second = await convert(siteId, 'Cj0-second');
    const sends = await allSettled(db.pool);

    expect(
      sends.filter((s) => s.conversion_id === first || s.conversion_id === second).map((s) => s.status),
    ).toEqual(['sent', 'sent']);
    expect(uploadedOrders()).toEqual([first, second]);
    const tokens = fakes.google.tokenRequests();
    expect(tokens).toHaveLength(1);
    expect(tokens[0]!.body).toEqual({
      grant_type: 'refresh_token',
      refresh_token: REFRESH[0],
      ...{ client_id: CLIENT.clientId, client_secret: CLIENT.clientSecret },
    });
    const uploads = fakes.google.uploadRequests();
    expect(uploads).toHaveLength(2);
    expect(bearer(uploads[0]!)).toMatch(/^Bearer ya29\.fake-/);
    expect(bearer(uploads[1]!)).toBe(bearer(uploads[0]!));
  });

  it('refreshes once when Google says the access token expired, and the send is delivered', async () => {
    const siteId = await googleSite(REFRESH[1]!);
    await convert(siteId, 'Cj0-before');
    await allSettled(db.pool);
    fakes.google.expireAccessTokens();
    const conversionId = await convert(siteId, 'Cj0-after');
    const sends = await allSettled(db.pool);

    expect(sends.find((s) => s.conversion_id === conversionId)).toMatchObject({
      status: 'sent',
      last_error: null,
    });
    expect(uploadedOrders()).toContain(conversionId);
    expect(fakes.google.tokenRequests()).toHaveLength(2);
    const uploads = fakes.google.uploadRequests();
    expect(uploads.map((u) => u.status)).toEqual([200, 401, 200]);
    expect(bearer(uploads[2]!)).not.toBe(bearer(uploads[1]!));
  });

  it('a token Google keeps refusing is refreshed once, not in a loop, and the send fails', async () => {
    const siteId = await googleSite(REFRESH[1]!);
    // The previous test's token is cached; make every token the fake issues dead on arrival.
    fakes.google.accessTokenLifetimeSec = 0;
    try {
      const conversionId = await convert(siteId, 'Cj0-dead');
      const sends = await allSettled(db.pool);
      const send = sends.find((s) => s.conversion_id === conversionId)!;
      expect(send.status).toBe('failed');
      expect(send.last_error).toContain('UNAUTHENTICATED');
      expect(fakes.google.uploadRequests().map((u) => u.status)).toEqual([401, 401]);
      expect(fakes.google.tokenRequests()).toHaveLength(1);
    } finally {
      fakes.google.accessTokenLifetimeSec = 3599;
    }
  });

  it('invalid_grant fails the send with a message that says what to do, and nothing is uploaded', async () => {
    const siteId = await googleSite(REFRESH[2]!);
    fakes.google.revokeRefreshToken(REFRESH[2]!);
    const conversionId = await convert(siteId, 'Cj0-revoked');
    const sends = await allSettled(db.pool);
    const send = sends.find((s) => s.conversion_id === conversionId)!;

    expect(send.status).toBe('failed');
    expect(send.last_error).toBe(
      'Google OAuth token refresh failed: invalid_grant (Token has been expired or revoked.): the refresh token was revoked or has expired; give the pixel a new one (pixel update --refresh-token)',
    );
    expect(fakes.google.tokenRequests()).toHaveLength(1);
    expect(fakes.google.uploadRequests()).toHaveLength(0);
    const { rows } = await db.pool.query(`SELECT capi_status FROM conversions WHERE id = $1`, [conversionId]);
    expect(rows[0].capi_status).toBe('failed');
  });

  it('a token endpoint outage is retried like any platform outage, and the send is delivered', async () => {
    const siteId = await googleSite(REFRESH[3]!);
    fakes.google.failNext(1, { type: 'status', status: 503 });
    const conversionId = await convert(siteId, 'Cj0-outage');
    const sends = await allSettled(db.pool);

    expect(sends.find((s) => s.conversion_id === conversionId)).toMatchObject({ status: 'sent' });
    expect(
      (await sendsOf(db.pool, 'conversion_id = $1', [conversionId]))[0]!.attempts,
    ).toBeGreaterThanOrEqual(1);
    expect(fakes.google.tokenRequests().map((r) => r.status)).toEqual([503, 200]);
    expect(uploadedOrders()).toEqual([conversionId]);
  });

  it('credentials never reach the sends table', async () => {
    const { rows } = await db.pool.query(
      `SELECT coalesce(last_error, '') || coalesce(response_summary::text, '') AS t FROM sends`,
    );
    const all = rows.map((r) => r.t as string).join('\n');
    expect(all).not.toMatch(/rt-[a-z]+-0+1|google-client-secret|ya29\./);
    expect(all).toContain('invalid_grant');
  });
});

describe('classifyTokenResponse', () => {
  const now = 1_000_000;
  const TOKEN_URL = 'https://oauth.example.com/wrong/token';
  const res = (status: number, body: unknown, headers: Record<string, string> = {}) => ({
    status,
    headers,
    bodyText: typeof body === 'string' ? body : JSON.stringify(body),
  });

  it.each([
    [
      'a token with its lifetime',
      res(200, { access_token: 'ya29.a', expires_in: 3599 }),
      { ok: true, accessToken: 'ya29.a', expiresAtMs: now + 3_599_000 - 60_000 },
    ],
    [
      'a short-lived token: kept for half its life',
      res(200, { access_token: 'ya29.b', expires_in: 60 }),
      { ok: true, accessToken: 'ya29.b', expiresAtMs: now + 30_000 },
    ],
    [
      "no expires_in: Google's hour",
      res(200, { access_token: 'ya29.c' }),
      { ok: true, accessToken: 'ya29.c', expiresAtMs: now + 3_540_000 },
    ],
    ['a success without a token', res(200, {}), { ok: false, retry: true, configuration: true }],
    [
      'invalid_grant',
      res(400, { error: 'invalid_grant', error_description: 'Bad Request' }),
      { ok: false, retry: false },
    ],
    ['invalid_client', res(401, { error: 'invalid_client' }), { ok: false, retry: false }],
    ['another OAuth refusal', res(400, { error: 'invalid_scope' }), { ok: false, retry: false }],
    [
      'a 404 page: not a token endpoint',
      res(404, '<html>Not Found</html>'),
      { ok: false, retry: true, configuration: true },
    ],
    [
      "a Google API's 404 (its error is an object, not an OAuth code)",
      res(404, { error: { code: 404, message: 'Method not found', status: 'NOT_FOUND' } }),
      { ok: false, retry: true, configuration: true },
    ],
    ['a 403 page', res(403, 'forbidden'), { ok: false, retry: true, configuration: true }],
    ['a 5xx', res(503, { error: 'internal_failure' }), { ok: false, retry: true }],
    ['a gateway page', res(502, '<html>Bad Gateway</html>'), { ok: false, retry: true }],
    [
      '429 with Retry-After',
      res(429, { error: 'rate_limit_exceeded' }, { 'retry-after': '7' }),
      { ok: false, retry: true, delayMs: 7000 },
    ],
    ['no answer', { networkError: 'ECONNREFUSED' }, { ok: false, retry: true }],
  ] as const)('%s', (_, response, expected) => {
    expect(classifyTokenResponse(response, now, TOKEN_URL)).toMatchObject(expected);
  });

  it('names the OAuth error and what to do', () => {
    const a = classifyTokenResponse(
      res(401, { error: 'invalid_client', error_description: 'The OAuth client was not found.' }),
      now,
      TOKEN_URL,
    );
    expect(a).toMatchObject({ ok: false, retry: false });
    expect(!a.ok && a.error).toBe(
      'Google OAuth token refresh failed: invalid_client (The OAuth client was not found.): the OAuth client id or secret is wrong; correct them (pixel update --client-id --client-secret)',
    );
  });

  it('names the URL and GOOGLE_OAUTH_URL when what answered is not a token endpoint', () => {
    const a = classifyTokenResponse(res(404, '<html>Not Found</html>'), now, TOKEN_URL);
    expect(!a.ok && a.error).toBe(
      "configuration error: https://oauth.example.com/wrong/token answered HTTP 404, which is not an OAuth token endpoint's answer: check GOOGLE_OAUTH_URL (Google's is https://oauth2.googleapis.com)",
    );
  });
});
