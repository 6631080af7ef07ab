// report funnel / report match-quality: the API's numbers on the command line.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
let siteId: string;

beforeAll(async () => {
  w = await cliWorld();
  const { accountId } = await w.ok('account', 'create', '--name', 'Report Co');
  ({ siteId } = await w.ok(
    'site',
    'create',
    '--account',
    accountId,
    '--name',
    'shop',
    '--domain',
    'shop.example.com',
  ));
  // Two visits on 2026-10-10, one from a Meta ad with a purchase in EUR and one in USD.
  const { rows } = await w.db.pool.query<{ id: string }>(
    `INSERT INTO visits (site_id, temp_id, session_id, utm_campaign, fbc, created_at)
     VALUES ($1, gen_random_uuid(), gen_random_uuid(), 'spring', 'fb.1.1.x', '2026-10-10T10:00:00Z'),
            ($1, gen_random_uuid(), gen_random_uuid(), NULL, NULL, '2026-10-10T11:00:00Z') RETURNING id`,
    [siteId],
  );
  for (const [value, currency] of [
    [12.5, 'EUR'],
    [7, 'USD'],
  ] as const) {
    await w.db.pool.query(
      `INSERT INTO conversions (site_id, telegram_user_id, visit_id, event_type, value, currency, event_time, attributed_at, received_at, source)
       VALUES ($1, 42, $2, 'Purchase', $3, $4, '2026-10-10T12:00:00Z', '2026-10-10T12:00:00Z', '2026-10-10T12:00:00Z', 'api')`,
      [siteId, rows[0]!.id, value, currency],
    );
  }
});
afterAll(async () => {
  await w.close();
});

describe('report', () => {
  it('funnel prints the totals and the groups, as JSON and as a table', async () => {
    const out = await w.ok(
      'report',
      'funnel',
      '--site',
      siteId,
      '--from',
      '2026-10-10',
      '--to',
      '2026-10-11',
      '--group-by',
      'platform',
    );
    expect(out.totals).toMatchObject({ visits: 2, conversions: 2, value: { EUR: 12.5, USD: 7 } });
    expect(out.rows.map((r: any) => r.key).sort()).toEqual(['meta', 'none']);
    const human = await w.run(
      'report',
      'funnel',
      '--site',
      siteId,
      '--from',
      '2026-10-10',
      '--to',
      '2026-10-11',
    );
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^2026-10-10 +2 /m);
    expect(human.stdout).toMatch(/^total +2 .*12\.5 EUR, 7 USD$/m);
  });

  it('refuses an unknown grouping and a malformed date', async () => {
    expect(await w.refused('report', 'funnel', '--site', siteId, '--group-by', 'week')).toMatch(/--group-by/);
    expect(await w.refused('report', 'funnel', '--site', siteId, '--from', '10/10/2026')).toMatch(
      /YYYY-MM-DD/,
    );
    // Year 0 is a date ISO 8601 writes but the database cannot hold: refused as malformed, never a crash.
    const r = await w.run(
      'report',
      'funnel',
      '--site',
      siteId,
      '--from',
      '0000-12-30',
      '--to',
      '0000-12-31',
      '--json',
    );
    expect(r.code).toBe(1);
    expect(r.json()).toEqual({
      error: { code: 'VALIDATION_FAILED', message: '--from: must be a date written YYYY-MM-DD' },
    });
    expect(
      (await w.run('report', 'match-quality', '--site', siteId, '--to', '0001-01-01', '--json')).code,
    ).toBe(0);
  });

  it('match-quality prints the shares and the channels', async () => {
    const out = await w.ok(
      'report',
      'match-quality',
      '--site',
      siteId,
      '--from',
      '2026-10-10',
      '--to',
      '2026-10-11',
    );
    expect(out).toEqual({ from: '2026-10-10', to: '2026-10-11', rows: [], coverage: [] });
  });
});
