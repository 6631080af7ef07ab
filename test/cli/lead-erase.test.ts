// lead erase: the operator's erasure of one person, on every site of the account or on one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
let accountId: string;
let otherAccountId: string;
let sites: string[];

/** A lead with a visit and a conversion on the site, as the service leaves them. */
async function lead(siteId: string, user: number): Promise<{ visitId: string; conversionId: string }> {
  const visitId = (
    await w.db.pool.query(
      `INSERT INTO visits (site_id, temp_id, session_id, client_ip, user_agent, gclid) VALUES ($1, gen_random_uuid(), gen_random_uuid(), '203.0.113.5', 'UA', 'G') RETURNING id`,
      [siteId],
    )
  ).rows[0].id;
  await w.db.pool.query(
    `INSERT INTO leads (site_id, telegram_user_id, external_user_id) VALUES ($1, $2, 'crm-1')`,
    [siteId, user],
  );
  const conversionId = (
    await w.db.pool.query(
      `INSERT INTO conversions (site_id, telegram_user_id, visit_id, event_type, event_time, attributed_at, source, pii_hashed, client_ip)
     VALUES ($1, $2, $3, 'Lead', now(), now(), 'api', '{"em":"ab"}', '203.0.113.5') RETURNING id`,
      [siteId, user, visitId],
    )
  ).rows[0].id;
  return { visitId, conversionId };
}

beforeAll(async () => {
  w = await cliWorld();
  ({ accountId } = await w.ok('account', 'create', '--name', 'Erase Co'));
  ({ accountId: otherAccountId } = await w.ok('account', 'create', '--name', 'Other Co'));
  sites = [];
  for (const name of ['a', 'b'])
    sites.push(
      (
        await w.ok(
          'site',
          'create',
          '--account',
          accountId,
          '--name',
          name,
          '--domain',
          `${name}.example.com`,
        )
      ).siteId,
    );
});
afterAll(async () => {
  await w.close();
});

describe('lead erase', () => {
  it('erases the person on every site of the account, then refuses a second time', async () => {
    const user = 700_000_001;
    const rows = [await lead(sites[0]!, user), await lead(sites[1]!, user)];
    expect(
      await w.refused('lead', 'erase', '--account', otherAccountId, '--telegram-user-id', String(user)),
    ).toMatch(/not known/);
    const out = await w.ok<{ erasures: { siteId: string; conversions: number; visits: number }[] }>(
      'lead',
      'erase',
      '--account',
      accountId,
      '--telegram-user-id',
      String(user),
    );
    expect(out.erasures.map((e) => e.siteId).sort()).toEqual([...sites].sort());
    for (const e of out.erasures) expect(e).toMatchObject({ conversions: 1, visits: 1 });
    for (const r of rows) {
      const {
        rows: [v],
      } = await w.db.pool.query('SELECT client_ip, user_agent, gclid FROM visits WHERE id = $1', [r.visitId]);
      expect(v).toEqual({ client_ip: null, user_agent: null, gclid: null });
      const {
        rows: [c],
      } = await w.db.pool.query(
        'SELECT pii_hashed, client_ip, telegram_user_id FROM conversions WHERE id = $1',
        [r.conversionId],
      );
      expect(c.pii_hashed).toEqual({});
      expect(c.client_ip).toBeNull();
      expect(Number(c.telegram_user_id)).toBeLessThan(0);
    }
    const { rows: audit } = await w.db.pool.query('SELECT actor FROM erasures WHERE account_id = $1', [
      accountId,
    ]);
    expect(audit).toEqual([{ actor: 'cli' }, { actor: 'cli' }]);
    expect(
      await w.refused('lead', 'erase', '--account', accountId, '--telegram-user-id', String(user)),
    ).toMatch(/not known/);
  });

  it('--site limits it to one site; bad input is refused with the reason', async () => {
    const user = 700_000_002;
    await lead(sites[0]!, user);
    const kept = await lead(sites[1]!, user);
    const out = await w.ok<{ erasures: { siteId: string }[] }>(
      'lead',
      'erase',
      '--account',
      accountId,
      '--telegram-user-id',
      String(user),
      '--site',
      sites[0]!,
    );
    expect(out.erasures.map((e) => e.siteId)).toEqual([sites[0]]);
    expect(
      (await w.db.pool.query('SELECT client_ip FROM visits WHERE id = $1', [kept.visitId])).rows[0].client_ip,
    ).toBe('203.0.113.5');
    expect(await w.refused('lead', 'erase', '--account', accountId, '--telegram-user-id', '0')).toMatch(
      /positive/,
    );
    expect(await w.refused('lead', 'erase', '--account', accountId, '--telegram-user-id', 'abc')).toMatch(
      /--telegram-user-id/,
    );
    expect(await w.refused('lead', 'erase', '--account', 'nope', '--telegram-user-id', '5')).toMatch(
      /does not exist/,
    );
    const human = await w.run('lead', 'erase', '--account', accountId, '--telegram-user-id', String(user));
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/1 conversion\(s\), 1 visit\(s\)/);
  });
});
