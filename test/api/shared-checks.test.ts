// The checks every /api/v1 endpoint shares, run for each endpoint from one table: the API key
// (none, unknown), the tenant (another account's key naming this account's site or conversion),
// the Idempotency-Key (malformed) and the JSON Content-Type. Each endpoint's own file tests what is
// particular to it.
import { beforeAll, describe, expect, it } from 'vitest';
import {
  apiWorld,
  count,
  newUser,
  seedTenant,
  waitingJoin,
  type ApiClient,
  type ApiResponse,
  type CallOptions,
  type Tenant,
} from './support.js';

const world = apiWorld();
let api: ApiClient;
let tenant: Tenant;
let rival: Tenant;
/** A lead of the tenant with a conversion awaiting its value. */
let lead: { user: number; conversionId: string };

beforeAll(async () => {
  ({ api, tenant } = world);
  rival = await seedTenant(world.db.pool, world.t.deps.box);
  const user = newUser();
  lead = { user, conversionId: (await waitingJoin(world.db.pool, tenant.site, user)).conversionId };
});

interface Endpoint {
  name: string;
  /** The request, valid but for what each check changes (`site`: the site it names). */
  call(o: CallOptions, site: string): Promise<ApiResponse>;
  /** A raw body for the Content-Type check (endpoints with a JSON body only). */
  rawBody?: (o: CallOptions) => Promise<ApiResponse>;
  /** Whether the endpoint takes an Idempotency-Key (the erasure is idempotent by itself). */
  idempotent: boolean;
  /** The answer to another account's key naming this account's site or conversion. */
  foreign: { status: number; code: string };
}

const UNKNOWN_SITE = { status: 404, code: 'UNKNOWN_WEBSITE' };
const text = { 'content-type': 'text/plain' };

const ENDPOINTS: Endpoint[] = [
  {
    name: 'POST /events/conversion',
    call: (o, site) =>
      api.post('/events/conversion', { telegramUserId: lead.user, eventType: 'Lead', siteId: site }, o),
    rawBody: (o) =>
      api.post('/events/conversion', JSON.stringify({ telegramUserId: lead.user, eventType: 'Lead' }), {
        ...o,
        headers: text,
      }),
    idempotent: true,
    foreign: UNKNOWN_SITE,
  },
  {
    name: 'POST /leads/{telegramUserId}/events',
    call: (o, site) => api.post(`/leads/${lead.user}/events`, { eventType: 'Lead', siteId: site }, o),
    rawBody: (o) =>
      api.post(`/leads/${lead.user}/events`, JSON.stringify({ eventType: 'Lead' }), { ...o, headers: text }),
    idempotent: true,
    foreign: UNKNOWN_SITE,
  },
  {
    name: 'POST /leads/{telegramUserId}/conversions/{conversionId}/value',
    call: (o) =>
      api.post(
        `/leads/${lead.user}/conversions/${lead.conversionId}/value`,
        { value: 1, currency: 'USD' },
        o,
      ),
    rawBody: (o) =>
      api.post(
        `/leads/${lead.user}/conversions/${lead.conversionId}/value`,
        JSON.stringify({ value: 1, currency: 'USD' }),
        { ...o, headers: text },
      ),
    idempotent: true,
    foreign: { status: 404, code: 'CONVERSION_NOT_FOUND' },
  },
  {
    name: 'GET /leads/{telegramUserId}',
    call: (o, site) => api.get(`/leads/${lead.user}?siteId=${site}`, o),
    idempotent: true,
    foreign: UNKNOWN_SITE,
  },
  {
    name: 'DELETE /leads/{telegramUserId}',
    call: (o, site) => api.delete(`/leads/${lead.user}?siteId=${site}`, o),
    idempotent: false,
    foreign: UNKNOWN_SITE,
  },
  {
    name: 'GET /channels',
    call: (o, site) => api.get(`/channels?siteId=${site}`, o),
    idempotent: true,
    foreign: UNKNOWN_SITE,
  },
  {
    name: 'GET /reports/funnel',
    call: (o, site) => api.get(`/reports/funnel?siteId=${site}`, o),
    idempotent: true,
    foreign: UNKNOWN_SITE,
  },
  {
    name: 'GET /reports/match-quality',
    call: (o, site) => api.get(`/reports/match-quality?siteId=${site}`, o),
    idempotent: true,
    foreign: UNKNOWN_SITE,
  },
  {
    name: 'GET /exports/{kind}',
    call: (o, site) => api.get(`/exports/conversions?siteId=${site}`, o),
    idempotent: false,
    foreign: UNKNOWN_SITE,
  },
];

const writes = () => count(world.db.pool, 'conversions WHERE telegram_user_id = $1', [lead.user]);

describe.each(ENDPOINTS)('$name', (e) => {
  it('refuses a request without an API key: 401 UNAUTHORIZED with WWW-Authenticate', async () => {
    const res = await e.call({}, tenant.site.siteId);
    expect(res).toMatchObject({ status: 401, body: { code: 'UNAUTHORIZED' } });
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer /);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  });

  it('refuses an unknown key and a malformed one alike: 401 UNAUTHORIZED', async () => {
    for (const key of ['cgk_000000000000_unknown-key-of-nobody', 'not-a-key']) {
      expect(await e.call({ key }, tenant.site.siteId), key).toMatchObject({
        status: 401,
        body: { code: 'UNAUTHORIZED' },
      });
    }
  });

  it("does not let another account's key reach this account's site or conversion", async () => {
    const before = await writes();
    const res = await e.call({ key: rival.accountKey }, tenant.site.siteId);
    expect(res).toMatchObject({ status: e.foreign.status, body: { code: e.foreign.code } });
    expect(await writes()).toBe(before);
    // The lead is still there for its own account (the erasure above did nothing).
    expect(
      (await api.get(`/leads/${lead.user}?siteId=${tenant.site.siteId}`, { key: tenant.accountKey })).status,
    ).toBe(200);
  });

  // Only the checks an endpoint has are registered (none is skipped).
  if (e.idempotent) {
    it('refuses a malformed Idempotency-Key: 400 IDEMPOTENCY_KEY_INVALID, nothing runs', async () => {
      const before = await writes();
      for (const idempotencyKey of ['x'.repeat(129), '']) {
        const res = await e.call({ key: tenant.accountKey, idempotencyKey }, tenant.site.siteId);
        expect(res, idempotencyKey).toMatchObject({ status: 400, body: { code: 'IDEMPOTENCY_KEY_INVALID' } });
      }
      expect(await writes()).toBe(before);
    });
  }

  const rawBody = e.rawBody;
  if (rawBody !== undefined) {
    it('refuses a body that is not declared JSON: 400 VALIDATION_FAILED on Content-Type', async () => {
      const res = await rawBody({ key: tenant.accountKey });
      expect(res).toMatchObject({
        status: 400,
        body: { code: 'VALIDATION_FAILED', errors: [{ path: 'Content-Type' }] },
      });
    });
  }
});
