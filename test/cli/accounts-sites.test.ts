// account create and site create: the JSON of the contract, the rows they write, their refusals.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
beforeAll(async () => {
  w = await cliWorld();
});
afterAll(async () => {
  await w.close();
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('account create', () => {
  it('prints {"accountId"} and stores the account', async () => {
    const out = await w.ok('account', 'create', '--name', '  Acme Ltd — Ünïcode  ');
    expect(Object.keys(out)).toEqual(['accountId']);
    expect(out.accountId).toMatch(UUID);
    const { rows } = await w.db.pool.query('SELECT name FROM accounts WHERE id = $1', [out.accountId]);
    expect(rows[0].name).toBe('Acme Ltd — Ünïcode');
  });

  it('without --json prints a short summary with the id', async () => {
    const r = await w.run('account', 'create', '--name', 'Plain');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Account created: [0-9a-f-]{36}\n$/);
  });

  it('refuses an empty or overlong name, naming the flag', async () => {
    expect(await w.refused('account', 'create', '--name', '   ')).toBe('error: --name: must not be empty\n');
    expect(await w.refused('account', 'create', '--name', 'x'.repeat(201))).toBe(
      'error: --name: must be at most 200 characters\n',
    );
  });
});

describe('site create', () => {
  let accountId: string;
  beforeAll(async () => {
    ({ accountId } = await w.ok('account', 'create', '--name', 'Sites'));
  });

  it('prints {"siteId","websiteId"}; repeated --domain are normalised and de-duplicated', async () => {
    const out = await w.ok(
      'site',
      'create',
      '--account',
      accountId,
      '--name',
      'Shop',
      '--domain',
      'Shop.Example.com',
      '--domain',
      'https://www.example.com/landing',
      '--domain',
      'shop.example.com',
      '--domain',
      'bücher.de',
      '--url',
      'https://shop.example.com',
    );
    expect(Object.keys(out)).toEqual(['siteId', 'websiteId']);
    expect(out.siteId).toMatch(UUID);
    expect(out.websiteId).toMatch(/^ws_[A-Za-z0-9_-]{16}$/);
    const { rows } = await w.db.pool.query(
      'SELECT account_id, website_id, domains, url FROM sites WHERE id = $1',
      [out.siteId],
    );
    expect(rows[0]).toEqual({
      account_id: accountId,
      website_id: out.websiteId,
      domains: ['shop.example.com', 'www.example.com', 'xn--bcher-kva.de'],
      url: 'https://shop.example.com',
    });
  });

  it('the human summary shows the public websiteId', async () => {
    const r = await w.run(
      'site',
      'create',
      '--account',
      accountId,
      '--name',
      'Blog',
      '--domain',
      'blog.example.com',
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Site created: [0-9a-f-]{36}\n {2}websiteId: ws_\S+ /);
  });

  it('refuses a bad domain, a bad url, an unknown or malformed account', async () => {
    const base = ['site', 'create', '--name', 'X'];
    expect(await w.refused(...base, '--account', accountId, '--domain', 'not a domain')).toBe(
      'error: --domain: "not a domain" is not a valid domain name\n',
    );
    expect(
      await w.refused(
        ...base,
        '--account',
        accountId,
        '--domain',
        'ok.example.com',
        '--url',
        'ftp://x.example.com',
      ),
    ).toContain('--url: must be an http(s) URL');
    expect(
      await w.refused(
        ...base,
        '--account',
        '00000000-0000-4000-8000-000000000000',
        '--domain',
        'a.example.com',
      ),
    ).toBe('error: account 00000000-0000-4000-8000-000000000000 does not exist\n');
    expect(await w.refused(...base, '--account', 'acme', '--domain', 'a.example.com')).toBe(
      'error: --account: must be a UUID\n',
    );
    const { rows } = await w.db.pool.query('SELECT count(*)::int AS n FROM sites WHERE name = $1', ['X']);
    expect(rows[0].n).toBe(0);
  });

  it('refuses more than 50 domains', async () => {
    const domains = Array.from({ length: 51 }, (_, i) => ['--domain', `d${i}.example.com`]).flat();
    expect(await w.refused('site', 'create', '--account', accountId, '--name', 'Many', ...domains)).toMatch(
      /^error: --domain: /,
    );
  });
});
