// key create, key list, key revoke: the key shown once, stored as prefix + SHA-256, revocation recorded.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliWorld, runWith, type CliWorld } from './harness.js';

let w: CliWorld;
let accountId: string;
let siteId: string;
let websiteId: string;
beforeAll(async () => {
  w = await cliWorld();
  ({ accountId } = await w.ok('account', 'create', '--name', 'Keys'));
  ({ siteId, websiteId } = await w.ok(
    'site',
    'create',
    '--account',
    accountId,
    '--name',
    'Shop',
    '--domain',
    'shop.example.com',
  ));
});
afterAll(async () => {
  await w.close();
});

const keyRow = async (id: string) =>
  (
    await w.db.pool.query(
      'SELECT account_id, site_id, name, prefix, secret_hash, revoked_at FROM api_keys WHERE id = $1',
      [id],
    )
  ).rows[0];

describe('key create', () => {
  it('prints {"keyId","apiKey"}; only the prefix and the SHA-256 are stored', async () => {
    const out = await w.ok('key', 'create', '--account', accountId, '--name', 'backend');
    expect(Object.keys(out)).toEqual(['keyId', 'apiKey']);
    expect(out.apiKey).toMatch(/^cgk_[A-Za-z0-9]{12}_[A-Za-z0-9_-]{43}$/);
    const row = await keyRow(out.keyId);
    expect(row).toMatchObject({
      account_id: accountId,
      site_id: null,
      name: 'backend',
      prefix: out.apiKey.slice(4, 16),
      revoked_at: null,
    });
    expect(row.secret_hash.equals(createHash('sha256').update(out.apiKey).digest())).toBe(true);
  });

  it('--site makes a site-scoped key, by siteId or websiteId', async () => {
    const a = await w.ok('key', 'create', '--account', accountId, '--site', siteId);
    const b = await w.ok('key', 'create', '--account', accountId, '--site', websiteId);
    expect((await keyRow(a.keyId)).site_id).toBe(siteId);
    expect((await keyRow(b.keyId)).site_id).toBe(siteId);
    expect(a.apiKey).not.toBe(b.apiKey);
  });

  it('the human output shows the key once, says so, and nothing of it reaches stderr even at trace level', async () => {
    const r = await runWith({ ...w.env, LOG_LEVEL: 'trace' }, [
      'key',
      'create',
      '--account',
      accountId,
      '--name',
      'ops',
    ]);
    expect(r.code).toBe(0);
    const key = /\n {2}(cgk_\S+)\n/.exec(r.stdout)?.[1];
    expect(key).toMatch(/^cgk_/);
    expect(r.stdout).toMatch(/^API key created: [0-9a-f-]{36} \(account-scoped\)\n/);
    expect(r.stdout).toContain('This is the only time the key is shown');
    expect(r.stdout.split(key!).length).toBe(2);
    expect(r.stderr).not.toContain(key!.slice(17));
  });

  it('refuses an unknown account, a site of another account, an unknown site, an overlong name', async () => {
    expect(await w.refused('key', 'create', '--account', '00000000-0000-4000-8000-000000000009')).toBe(
      'error: account 00000000-0000-4000-8000-000000000009 does not exist\n',
    );
    const { accountId: other } = await w.ok('account', 'create', '--name', 'Other');
    expect(await w.refused('key', 'create', '--account', other, '--site', siteId)).toBe(
      `error: site ${siteId} belongs to another account\n`,
    );
    expect(await w.refused('key', 'create', '--account', accountId, '--site', 'ws_missing')).toBe(
      'error: site ws_missing does not exist\n',
    );
    expect(await w.refused('key', 'create', '--account', accountId, '--name', 'n'.repeat(201))).toMatch(
      /^error: --name: /,
    );
    expect(
      (await w.db.pool.query('SELECT count(*)::int AS n FROM api_keys WHERE account_id = $1', [other]))
        .rows[0].n,
    ).toBe(0);
  });
});

describe('key list and key revoke', () => {
  it('key revoke prints {"keyId","revoked":true}, sets revoked_at once; key list shows it', async () => {
    const { accountId: acc } = await w.ok('account', 'create', '--name', 'Listing');
    const { siteId: site } = await w.ok(
      'site',
      'create',
      '--account',
      acc,
      '--name',
      'S',
      '--domain',
      's.example.com',
    );
    const k1 = await w.ok('key', 'create', '--account', acc, '--name', 'first');
    const k2 = await w.ok('key', 'create', '--account', acc, '--site', site);

    const listed = await w.ok<{ keys: Record<string, unknown>[] }>('key', 'list', '--account', acc);
    expect(Object.keys(listed)).toEqual(['keys']);
    expect(listed.keys).toHaveLength(2);
    expect(listed.keys.map((k) => Object.keys(k))).toEqual([
      ['keyId', 'name', 'siteId', 'createdAt', 'revokedAt'],
      ['keyId', 'name', 'siteId', 'createdAt', 'revokedAt'],
    ]);
    expect(listed.keys.find((k) => k.keyId === k1.keyId)).toMatchObject({
      name: 'first',
      siteId: null,
      revokedAt: null,
    });
    expect(listed.keys.find((k) => k.keyId === k2.keyId)).toMatchObject({
      name: null,
      siteId: site,
      revokedAt: null,
    });
    expect(JSON.stringify(listed)).not.toContain(k1.apiKey);

    expect(await w.ok('key', 'revoke', '--key', k1.keyId)).toEqual({ keyId: k1.keyId, revoked: true });
    const revokedAt = (await keyRow(k1.keyId)).revoked_at as Date;
    expect(revokedAt).toBeInstanceOf(Date);
    const after = await w.ok<{ keys: { keyId: string; revokedAt: string | null; createdAt: string }[] }>(
      'key',
      'list',
      '--account',
      acc,
    );
    expect(after.keys.find((k) => k.keyId === k1.keyId)?.revokedAt).toBe(revokedAt.toISOString());
    expect(after.keys.find((k) => k.keyId === k2.keyId)?.revokedAt).toBeNull();
    expect(Date.parse(after.keys[0]!.createdAt)).not.toBeNaN();

    // Revoking again is harmless and keeps the first revocation time.
    expect(await w.ok('key', 'revoke', '--key', k1.keyId)).toEqual({ keyId: k1.keyId, revoked: true });
    expect(((await keyRow(k1.keyId)).revoked_at as Date).toISOString()).toBe(revokedAt.toISOString());

    const human = await w.run('key', 'list', '--account', acc);
    expect(human.stdout).toMatch(/^keyId +name +scope +created +revoked\n/);
    expect(human.stdout).toContain(`site ${site}`);
    expect(human.stdout).toContain(revokedAt.toISOString());
    expect((await w.run('key', 'revoke', '--key', k2.keyId)).stdout).toBe(`Key revoked: ${k2.keyId}\n`);
  });

  it('an account without keys lists none', async () => {
    const { accountId: acc } = await w.ok('account', 'create', '--name', 'Empty');
    expect(await w.ok('key', 'list', '--account', acc)).toEqual({ keys: [] });
    expect((await w.run('key', 'list', '--account', acc)).stdout).toBe('No keys.\n');
  });

  it('refuses an unknown or malformed key id and an unknown account', async () => {
    expect(await w.refused('key', 'revoke', '--key', '00000000-0000-4000-8000-00000000000a')).toBe(
      'error: key 00000000-0000-4000-8000-00000000000a does not exist\n',
    );
    expect(await w.refused('key', 'revoke', '--key', 'cgk_abc')).toBe(
      'error: key "cgk_abc" is not a valid key id\n',
    );
    expect(await w.refused('key', 'list', '--account', '00000000-0000-4000-8000-00000000000b')).toBe(
      'error: account 00000000-0000-4000-8000-00000000000b does not exist\n',
    );
  });
});
