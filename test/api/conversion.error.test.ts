// POST /api/v1/events/conversion: every refusal of CONTRACT.md's error table that applies, each as
// problem+json with its code, and none leaving a row behind.
import { beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { createApiKey, revokeApiKey } from '../../backend/domain/admin/api-keys.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import {
  apiClient,
  type ApiClient,
  apiWorld,
  attributedJoin,
  count,
  newUser,
  seedTenant,
  type Tenant,
} from './support.js';

const world = apiWorld();
let db: TestDatabase;
let t: TestApp;
let api: ApiClient;
let tenant: Tenant;
let other: Tenant;
let warmUser: number;

beforeAll(async () => {
  ({ db, t, api, tenant } = world);
  other = await seedTenant(db.pool, t.deps.box);
  warmUser = newUser();
  await attributedJoin(db.pool, {
    siteId: tenant.site.siteId,
    channelId: tenant.site.channels.main,
    telegramUserId: warmUser,
  });
});

async function expectProblem(
  res: { status: number; headers: Headers; body: any },
  status: number,
  code: string,
) {
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(res.body).toMatchObject({
    status,
    code,
    type: `https://capigram.dev/errors/${code.toLowerCase().replace(/_/g, '-')}`,
  });
  expect(res.status).toBe(status);
}

describe('401 UNAUTHORIZED: one answer for every bad key', () => {
  const body = () => ({ telegramUserId: warmUser, eventType: 'Lead' });

  it.each([
    ['no Authorization header', undefined],
    ['another scheme', 'Basic dXNlcjpwYXNz'],
    ['a bare word', 'Bearer'],
    ['a malformed key', 'Bearer not-a-capigram-key'],
    ['an unknown, well-formed key', `Bearer cgk_ABCDEFGHIJKL_${'x'.repeat(43)}`],
  ])('%s', async (_label, authorization) => {
    const before = await count(db.pool, 'conversions');
    const res = await api.post('/events/conversion', body(), {
      headers: authorization ? { authorization } : {},
    });
    await expectProblem(res, 401, 'UNAUTHORIZED');
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(res.body.detail).toBe('a valid API key is required: Authorization: Bearer <API_KEY>');
    expect(await count(db.pool, 'conversions')).toBe(before);
  });

  it('a known prefix with a wrong secret', async () => {
    const forged = tenant.accountKey.slice(0, -4) + (tenant.accountKey.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    await expectProblem(await api.post('/events/conversion', body(), { key: forged }), 401, 'UNAUTHORIZED');
  });

  it('a revoked key, and the key works until revoked', async () => {
    const { accountId } = await createAccount(db.pool, { name: 'Revoked Co' });
    const k = await createApiKey(db.pool, { accountId });
    const ok = await api.get('/channels', { key: k.apiKey });
    expect(ok.status).toBe(200);
    await revokeApiKey(db.pool, k.keyId);
    await expectProblem(await api.get('/channels', { key: k.apiKey }), 401, 'UNAUTHORIZED');
  });
});

describe('400 VALIDATION_FAILED', () => {
  const now = Date.now();
  const cases: [string, Record<string, unknown>, string][] = [
    ['Purchase without value', { eventType: 'Purchase', currency: 'USD' }, 'value'],
    ['Purchase without currency', { eventType: 'Purchase', value: 10 }, 'currency'],
    ['Purchase with value 0', { eventType: 'Purchase', value: 0, currency: 'USD' }, 'value'],
    ['a negative value', { eventType: 'Purchase', value: -5, currency: 'USD' }, 'value'],
    ['a value beyond a trillion', { eventType: 'Purchase', value: 1e13, currency: 'USD' }, 'value'],
    [
      'a Purchase value that would be stored as 0 (below 0.0001)',
      { eventType: 'Purchase', value: 0.0000001, currency: 'USD' },
      'value',
    ],
    [
      'a value on another type that would be stored as 0',
      { eventType: 'Lead', value: 0.00004, currency: 'USD' },
      'value',
    ],
    ['a value as a string', { eventType: 'Purchase', value: '10', currency: 'USD' }, 'value'],
    ['a currency that is not ISO 4217', { eventType: 'Purchase', value: 10, currency: 'XYZ' }, 'currency'],
    ['a metal instead of a currency', { eventType: 'Purchase', value: 10, currency: 'XAU' }, 'currency'],
    ['a value without a currency on another type', { eventType: 'Lead', value: 3 }, 'currency'],
    ['Custom without customEventName', { eventType: 'Custom' }, 'customEventName'],
    [
      'Custom with a blank customEventName',
      { eventType: 'Custom', customEventName: '   ' },
      'customEventName',
    ],
    ['an unknown eventType', { eventType: 'PageView' }, 'eventType'],
    ['a missing eventType', {}, 'eventType'],
    ['telegramUserId as a string', { telegramUserId: '123', eventType: 'Lead' }, 'telegramUserId'],
    ['telegramUserId 0', { telegramUserId: 0, eventType: 'Lead' }, 'telegramUserId'],
    ['a negative telegramUserId', { telegramUserId: -5, eventType: 'Lead' }, 'telegramUserId'],
    ['a fractional telegramUserId', { telegramUserId: 1.5, eventType: 'Lead' }, 'telegramUserId'],
    ['a telegramUserId beyond 2^53', { telegramUserId: 2 ** 60, eventType: 'Lead' }, 'telegramUserId'],
    ['eventTime in seconds', { eventType: 'Lead', eventTime: Math.floor(now / 1000) }, 'eventTime'],
    ['eventTime an hour ahead', { eventType: 'Lead', eventTime: now + 3_600_000 }, 'eventTime'],
    ['eventTime a year back', { eventType: 'Lead', eventTime: now - 365 * 86_400_000 }, 'eventTime'],
    ['a fractional eventTime', { eventType: 'Lead', eventTime: now + 0.5 }, 'eventTime'],
    ['a channelId that is not a UUID', { eventType: 'Lead', channelId: 'main' }, 'channelId'],
    ['a clientIp that is not an IP', { eventType: 'Lead', clientIp: 'localhost' }, 'clientIp'],
    [
      'an eventSourceUrl that is not http(s)',
      { eventType: 'Lead', eventSourceUrl: 'javascript:alert(1)' },
      'eventSourceUrl',
    ],
    ['an overlong contentName', { eventType: 'Lead', contentName: 'x'.repeat(501) }, 'contentName'],
    ['an overlong userAgent', { eventType: 'Lead', userAgent: 'x'.repeat(1025) }, 'userAgent'],
    ['an overlong email', { eventType: 'Lead', pii: { email: `${'a'.repeat(320)}@x.io` } }, 'pii.email'],
    ['a NUL in a string', { eventType: 'Lead', contentName: 'a\u0000b' }, 'contentName'],
    ['a lone surrogate in a string', { eventType: 'Lead', fbc: 'fb.1.\ud800' }, 'fbc'],
    ['pii that is not an object', { eventType: 'Lead', pii: 'ann@example.com' }, 'pii'],
  ];

  it.each(cases)('%s', async (_label, fields, path) => {
    const before = await count(db.pool, 'conversions');
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: warmUser, ...fields },
      { key: tenant.accountKey },
    );
    await expectProblem(res, 400, 'VALIDATION_FAILED');
    expect(res.body.errors.map((e: { path: string }) => e.path)).toContain(path);
    expect(await count(db.pool, 'conversions')).toBe(before);
  });

  it('a value below what is stored names the smallest accepted value', async () => {
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: warmUser, eventType: 'Purchase', value: 0.00009, currency: 'JPY' },
      { key: tenant.accountKey },
    );
    expect(res.body.errors).toEqual([
      {
        path: 'value',
        message: 'a Purchase value must be at least 0.0001 (values are kept to 4 decimal places)',
      },
    ]);
  });

  it('the contract example: Purchase without value says so', async () => {
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: warmUser, eventType: 'Purchase', currency: 'USD' },
      { key: tenant.accountKey },
    );
    expect(res.body.detail).toMatch(/value is required when eventType is Purchase/);
  });

  it.each([
    ['malformed JSON', '{"telegramUserId": 1,', 'application/json'],
    ['a JSON array', '[1,2]', 'application/json'],
    ['JSON null', 'null', 'application/json'],
    ['an empty body', '', 'application/json'],
    ['a form body', 'telegramUserId=1&eventType=Lead', 'application/x-www-form-urlencoded'],
    ['a text body', '{"telegramUserId":1,"eventType":"Lead"}', 'text/plain'],
  ])('%s', async (_label, raw, type) => {
    const res = await api.post('/events/conversion', raw, {
      key: tenant.accountKey,
      headers: { 'content-type': type },
    });
    await expectProblem(res, 400, 'VALIDATION_FAILED');
  });

  it('an X-Capigram-Client-IP header that is not an IP', async () => {
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: warmUser, eventType: 'Lead' },
      { key: tenant.accountKey, headers: { 'x-capigram-client-ip': 'nope' } },
    );
    await expectProblem(res, 400, 'VALIDATION_FAILED');
  });

  it('siteId and websiteId naming different sites', async () => {
    const two = await seedTenant(db.pool, t.deps.box, { sites: 2 });
    const res = await api.post(
      '/events/conversion',
      {
        telegramUserId: newUser(),
        eventType: 'Lead',
        siteId: two.sites[0]!.siteId,
        websiteId: two.sites[1]!.websiteId,
        channelId: two.sites[0]!.channels.main,
      },
      { key: two.accountKey },
    );
    await expectProblem(res, 400, 'VALIDATION_FAILED');
  });

  it('unknown fields are ignored, not refused', async () => {
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: warmUser, eventType: 'Lead', somethingNew: { nested: true } },
      { key: tenant.accountKey },
    );
    expect(res.status).toBe(201);
  });
});

describe('cold leads', () => {
  it('400 SITE_REQUIRED: an account key, an unknown user and no site', async () => {
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: newUser(), eventType: 'Lead', channelId: tenant.site.channels.main },
      { key: tenant.accountKey },
    );
    await expectProblem(res, 400, 'SITE_REQUIRED');
  });

  it('400 CHANNEL_REQUIRED: a site but no channel', async () => {
    const before = await count(db.pool, 'leads');
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: newUser(), eventType: 'Lead', fbp: 'fb.1.1700000000000.1' },
      { key: tenant.site.siteKey },
    );
    await expectProblem(res, 400, 'CHANNEL_REQUIRED');
    expect(await count(db.pool, 'leads')).toBe(before);
  });

  it("403 FORBIDDEN: a channel that is not the site's", async () => {
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: newUser(), eventType: 'Lead', channelId: other.site.channels.main },
      { key: tenant.site.siteKey },
    );
    await expectProblem(res, 403, 'FORBIDDEN');
  });
});

describe('404 UNKNOWN_WEBSITE', () => {
  it('an account key naming a site that does not exist', async () => {
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: warmUser, eventType: 'Lead', websiteId: 'ws_doesnotexist' },
      { key: tenant.accountKey },
    );
    await expectProblem(res, 404, 'UNKNOWN_WEBSITE');
  });

  it("an account key naming another account's site gets the very same answer", async () => {
    const unknown = await api.post(
      '/events/conversion',
      { telegramUserId: warmUser, eventType: 'Lead', websiteId: 'ws_doesnotexist' },
      { key: tenant.accountKey },
    );
    const foreign = await api.post(
      '/events/conversion',
      { telegramUserId: warmUser, eventType: 'Lead', websiteId: other.site.websiteId },
      { key: tenant.accountKey },
    );
    await expectProblem(foreign, 404, 'UNKNOWN_WEBSITE');
    expect(foreign.body.detail.replace(other.site.websiteId, 'X')).toBe(
      unknown.body.detail.replace('ws_doesnotexist', 'X'),
    );
  });
});

describe('transport limits', () => {
  it('413 PAYLOAD_TOO_LARGE for a body over 64 KiB', async () => {
    const res = await api.post(
      '/events/conversion',
      { telegramUserId: warmUser, eventType: 'Lead', pad: 'x'.repeat(70_000) },
      { key: tenant.accountKey },
    );
    await expectProblem(res, 413, 'PAYLOAD_TOO_LARGE');
  });

  it('404 NOT_FOUND for an unknown path under /api/v1', async () => {
    await expectProblem(await api.get('/nothing-here', { key: tenant.accountKey }), 404, 'NOT_FOUND');
  });

  it('503 UNAVAILABLE when the database is gone, never a 500', async () => {
    const gone = await createTestDatabase();
    const t2 = await startTestApp(gone.pool);
    await gone.drop();
    const res = await apiClient(t2.url).post(
      '/events/conversion',
      { telegramUserId: 1, eventType: 'Lead' },
      { key: tenant.accountKey },
    );
    await expectProblem(res, 503, 'UNAVAILABLE');
    await t2.stop();
  });
});
