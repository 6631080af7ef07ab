// user add, user list, user remove: the invitation link, the scope, and the audit log of each change.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
let accountId: string;
let siteId: string;
let websiteId: string;
beforeAll(async () => {
  w = await cliWorld({ env: { PUBLIC_URL: 'https://capigram.example' } });
  ({ accountId } = await w.ok('account', 'create', '--name', 'Team'));
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

describe('user add|list|remove', () => {
  it('user add prints {"userId","inviteUrl"} under PUBLIC_URL, scoped to a site by siteId or websiteId', async () => {
    const out = await w.ok(
      'user',
      'add',
      '--email',
      'Ana@Example.com',
      '--role',
      'viewer',
      '--site',
      websiteId,
    );
    expect(Object.keys(out)).toEqual(['userId', 'inviteUrl']);
    expect(out.inviteUrl).toMatch(/^https:\/\/capigram\.example\/dashboard\/invite\/[A-Za-z0-9_-]{43}$/);
    const { users } = await w.ok('user', 'list');
    expect(users).toContainEqual(
      expect.objectContaining({
        userId: out.userId,
        email: 'ana@example.com',
        role: 'viewer',
        accountId,
        siteId,
        status: 'invited',
      }),
    );
    const audit = await w.db.pool.query(
      "SELECT actor, action, target, site_id FROM audit_log WHERE action = 'user.add'",
    );
    expect(audit.rows).toEqual([
      { actor: 'cli', action: 'user.add', target: 'ana@example.com', site_id: siteId },
    ]);
  });

  it('refuses a bad role, a bad e-mail, an e-mail in use (any case) and a site of another account', async () => {
    expect(await w.refused('user', 'add', '--email', 'bo@example.com', '--role', 'god')).toMatch(/role/);
    expect(await w.refused('user', 'add', '--email', 'not-an-email', '--role', 'admin')).toMatch(/email/);
    expect(await w.refused('user', 'add', '--email', 'ANA@example.com', '--role', 'admin')).toMatch(/exists/);
    const other = (await w.ok('account', 'create', '--name', 'Other')).accountId;
    expect(
      await w.refused(
        'user',
        'add',
        '--email',
        'cy@example.com',
        '--role',
        'admin',
        '--account',
        other,
        '--site',
        siteId,
      ),
    ).toMatch(/another account/);
  });

  it('user remove ends the user; the e-mail can be invited again; removing twice is refused', async () => {
    const { userId } = await w.ok(
      'user',
      'add',
      '--email',
      'dee@example.com',
      '--role',
      'owner',
      '--account',
      accountId,
    );
    expect(await w.ok('user', 'remove', '--user', userId)).toEqual({ userId, removed: true });
    expect((await w.ok('user', 'list')).users.map((u: { userId: string }) => u.userId)).not.toContain(userId);
    expect(await w.refused('user', 'remove', '--user', userId)).toMatch(/no user/);
    await w.ok('user', 'add', '--email', 'dee@example.com', '--role', 'viewer');
    const audit = await w.db.pool.query("SELECT actor, target FROM audit_log WHERE action = 'user.remove'");
    expect(audit.rows).toEqual([{ actor: 'cli', target: 'dee@example.com' }]);
  });

  it('every other command that changes something is recorded as cli, by name, with ids and no secrets', async () => {
    const { keyId, apiKey } = await w.ok('key', 'create', '--account', accountId);
    await w.ok('site', 'update', '--site', websiteId, '--dedup-window-seconds', '120');
    await w.ok('site', 'list', '--account', accountId);
    const { rows } = await w.db.pool.query(
      "SELECT action, target, site_id, account_id, detail::text AS detail FROM audit_log WHERE actor = 'cli' AND action LIKE 'site.%' ORDER BY id",
    );
    expect(rows.map((r) => r.action)).toEqual(['site.create', 'site.update']);
    expect(rows[0]).toMatchObject({ target: `siteId ${siteId}`, site_id: siteId, account_id: accountId });
    expect(rows[1]).toMatchObject({ site_id: siteId, account_id: accountId });
    const all = await w.db.pool.query(
      "SELECT string_agg(detail::text || target, ' ') AS text FROM audit_log",
    );
    expect(all.rows[0].text).toContain(`keyId ${keyId}`);
    expect(all.rows[0].text).not.toContain(apiKey);
  });
});
