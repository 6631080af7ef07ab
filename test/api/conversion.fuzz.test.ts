// Fuzzed business events: whatever the body, path or headers, the answer is never a 5xx, and a
// refused request writes nothing (no conversion, lead, send or idempotency row), while an
// accepted one writes exactly what its answer says.
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from '../harness/db.js';
import type { TestApp } from '../harness/app.js';
import { apiWorld, attributedJoin, newUser, type Tenant } from './support.js';

const world = apiWorld({ tenant: { platforms: ['meta', 'tiktok'] } });
let db: TestDatabase;
let t: TestApp;
let tenant: Tenant;
let warm: number;

beforeAll(async () => {
  ({ db, t, tenant } = world);
  warm = newUser();
  await attributedJoin(db.pool, {
    siteId: tenant.site.siteId,
    channelId: tenant.site.channels.main,
    telegramUserId: warm,
  });
});

const anyString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ minLength: 300, maxLength: 3000 }),
);
const junk = fc.oneof(
  anyString,
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.object({ maxDepth: 2 }),
);
const edge = fc.constantFrom<unknown>(
  0,
  -1,
  1.5,
  2 ** 53,
  1e13,
  Number.MAX_VALUE,
  '',
  ' ',
  'XAU',
  'usd',
  'ws_x',
  '00000000-0000-4000-8000-000000000000',
  Math.floor(Date.now() / 1000),
  Date.now() + 86_400_000,
  '999.1.1.1',
  'javascript:1',
  'a\u0000b',
  '\ud800',
  { email: 'a@b.co', phone: '0' },
  'PageView',
);

const FIELDS = [
  'telegramUserId',
  'eventType',
  'customEventName',
  'value',
  'currency',
  'channelId',
  'siteId',
  'websiteId',
  'eventTime',
  'pii',
  'externalUserId',
  'fbc',
  'fbp',
  'gclid',
  'ttclid',
  'sccid',
  'clientIp',
  'userAgent',
  'eventSourceUrl',
  'contentName',
] as const;

/** A valid event, then up to three fields replaced by junk or edge values, or removed. */
function bodyArb(withUser: boolean) {
  const valid = fc
    .record({
      eventType: fc.constantFrom(
        'Contact',
        'Lead',
        'Purchase',
        'CompleteRegistration',
        'Subscribe',
        'Custom',
      ),
      value: fc.double({ min: 0.01, max: 1e6, noNaN: true }),
      currency: fc.constantFrom('USD', 'eur', 'JPY'),
      optional: fc.record(
        {
          channelId: fc.constant(tenant.site.channels.second),
          eventTime: fc.integer({ min: Date.now() - 86_400_000, max: Date.now() }),
          pii: fc.record(
            {
              email: fc.emailAddress(),
              phone: fc.constant('+14155550123'),
              firstName: fc.string({ maxLength: 20 }),
            },
            { requiredKeys: [] },
          ),
          externalUserId: fc.string({ minLength: 1, maxLength: 30 }),
          fbc: fc.constant('fb.1.1700000000000.abc'),
          clientIp: fc.constantFrom('203.0.113.1', '2001:db8::2'),
          userAgent: fc.string({ minLength: 1, maxLength: 80 }),
          eventSourceUrl: fc.constant('https://shop.example.com/x'),
        },
        { requiredKeys: [] },
      ),
    })
    .map(({ eventType, value, currency, optional }) => ({
      ...(withUser ? { telegramUserId: warm } : {}),
      eventType,
      ...(eventType === 'Purchase' ? { value, currency } : {}),
      ...(eventType === 'Custom' ? { customEventName: 'Webinar' } : {}),
      ...optional,
    }));
  const mutation = fc.tuple(fc.constantFrom(...FIELDS), fc.option(fc.oneof(junk, edge), { nil: undefined }));
  return fc.tuple(valid, fc.array(mutation, { maxLength: 3 })).map(([body, mutations]) => {
    const out: Record<string, unknown> = { ...body };
    for (const [field, v] of mutations) {
      if (v === undefined) delete out[field];
      else out[field] = v;
    }
    return out;
  });
}

async function counts() {
  const { rows } = await db.pool.query<{ c: number; l: number; s: number; i: number }>(
    `SELECT (SELECT count(*)::int FROM conversions) AS c, (SELECT count(*)::int FROM leads) AS l,
            (SELECT count(*)::int FROM sends) AS s, (SELECT count(*)::int FROM idempotency_keys WHERE status_code IS NULL) AS i`,
  );
  return rows[0]!;
}

const ACCEPTABLE = [200, 201, 400, 403, 404, 409, 413];
const seen = new Map<number, number>();

async function check(path: string, body: string, headers: Record<string, string>): Promise<void> {
  const before = await counts();
  const res = await fetch(`${t.url}/api/v1${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tenant.accountKey}`, 'content-type': 'application/json', ...headers },
    body,
  });
  const answer = (await res.json()) as { conversionId?: string; sends?: unknown[] };
  expect(ACCEPTABLE, `${res.status} for ${path} ${body.slice(0, 300)}`).toContain(res.status);
  seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
  const after = await counts();
  expect(after.i).toBe(0);
  if (res.status >= 400) {
    expect(after).toEqual(before);
  } else if (res.status === 201 && res.headers.get('x-idempotent-replay') === null) {
    expect(after.c).toBe(before.c + 1);
    expect(after.s).toBe(before.s + (answer.sends?.length ?? 0));
  } else {
    expect(after.c).toBe(before.c);
  }
}

describe('fuzzed bodies never produce a 5xx or a partial write', () => {
  it('POST /events/conversion', async () => {
    await fc.assert(
      fc.asyncProperty(bodyArb(true), async (body) => check('/events/conversion', JSON.stringify(body), {})),
      { numRuns: 150 },
    );
  });

  it('POST /leads/{telegramUserId}/events with fuzzed paths and headers', async () => {
    const path = fc.oneof(
      fc.constant(String(warm)),
      fc.string({ maxLength: 20 }).map(encodeURIComponent),
      fc.constantFrom('0', '-1', '1e3', '99999999999999999999'),
    );
    const header = fc.string({ maxLength: 140 }).filter((s) => /^[\x20-\x7e]*$/.test(s));
    await fc.assert(
      fc.asyncProperty(path, bodyArb(false), header, header, async (user, body, ip, idem) =>
        check(`/leads/${user}/events`, JSON.stringify(body), {
          'x-capigram-client-ip': ip,
          'x-capigram-client-user-agent': ip,
          'idempotency-key': idem,
        }),
      ),
      { numRuns: 120 },
    );
  });

  it('raw bodies that are not JSON objects', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ maxLength: 200 }),
          fc.jsonValue().map((v) => JSON.stringify(v) ?? 'null'),
        ),
        async (raw) => check('/events/conversion', raw, {}),
      ),
      { numRuns: 80 },
    );
  });

  it('reached both sides: accepted events and refusals', () => {
    expect((seen.get(201) ?? 0) + (seen.get(200) ?? 0)).toBeGreaterThan(20);
    expect(seen.get(400) ?? 0).toBeGreaterThan(5);
  });
});
