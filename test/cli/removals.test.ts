// `… remove`: removed things leave the lists and stop serving, their history stays; removing twice
// is NOT_FOUND; an account goes only once it has no site; a domain serves one site per account.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_BOT, DEFAULT_CHAT, cliWorld, seed, type CliWorld } from './harness.js';

let w: CliWorld;
let s: Awaited<ReturnType<typeof seed>>;
beforeAll(async () => {
  w = await cliWorld({ bots: [DEFAULT_BOT], chats: [DEFAULT_CHAT] });
  s = await seed(w);
});
afterAll(async () => {
  await w.close();
});

const addChannel = async (siteId: string) =>
  (
    await w.ok<{ channelId: string }>(
      'channel',
      'add',
      '--site',
      siteId,
      '--bot',
      s.botId,
      '--telegram-channel-id',
      String(DEFAULT_CHAT.id),
      '--title',
      'Main',
    )
  ).channelId;
const removedAt = async (table: string, id: string) =>
  (await w.db.pool.query<{ removed_at: Date | null }>(`SELECT removed_at FROM ${table} WHERE id = $1`, [id]))
    .rows[0]?.removed_at;

describe('a domain serves one site of an account', () => {
  it('a second site with a domain another site has is refused, naming that site; an update adding one too', async () => {
    expect(
      await w.refused(
        'site',
        'create',
        '--account',
        s.accountId,
        '--name',
        'Copy',
        '--domain',
        'shop.example.com',
      ),
    ).toContain(`shop.example.com is already a domain of site ${s.websiteId} ("Shop") of this account`);
    const { siteId } = await w.ok<{ siteId: string }>(
      'site',
      'create',
      '--account',
      s.accountId,
      '--name',
      'Blog',
      '--domain',
      'blog.example.com',
    );
    expect(await w.refused('site', 'update', '--site', siteId, '--add-domain', 'shop.example.com')).toContain(
      'is already a domain of site',
    );
    // Another account may use it: domains are checked within an account.
    const { accountId } = await w.ok<{ accountId: string }>('account', 'create', '--name', 'Other');
    await w.ok('site', 'create', '--account', accountId, '--name', 'Theirs', '--domain', 'shop.example.com');
  });
});

describe('remove', () => {
  it('channel, entry and pixel: gone from the lists, kept in the table, NOT_FOUND the second time', async () => {
    const channelId = await addChannel(s.siteId);
    const { entryId } = await w.ok<{ entryId: string }>('entry', 'add', '--site', s.siteId, '--bot', s.botId);
    const { rows } = await w.db.pool.query<{ id: string }>(
      `INSERT INTO pixels (site_id, platform, public_config, secrets_enc) VALUES ($1, 'meta', '{"pixelId":"1"}', 'x') RETURNING id`,
      [s.siteId],
    );
    const pixelId = rows[0]!.id;

    expect(await w.ok('channel', 'remove', '--channel', channelId)).toEqual({ removed: true });
    expect(await w.ok('entry', 'remove', '--entry', entryId)).toEqual({ removed: true });
    expect(await w.ok('pixel', 'remove', '--pixel', pixelId)).toEqual({ removed: true });

    const channels = await w.ok<{ channels: { channelId: string }[] }>('channel', 'list', '--site', s.siteId);
    expect(channels.channels.map((c) => c.channelId)).not.toContain(channelId);
    const entries = await w.ok<{ entries: { entryId: string }[] }>('entry', 'list', '--site', s.siteId);
    expect(entries.entries.map((e) => e.entryId)).not.toContain(entryId);
    const pixels = await w.ok<{ pixels: { pixelId: string }[] }>('pixel', 'list', '--site', s.siteId);
    expect(pixels.pixels.map((p) => p.pixelId)).not.toContain(pixelId);
    for (const [table, id] of [
      ['channels', channelId],
      ['entries', entryId],
      ['pixels', pixelId],
    ] as const)
      expect(await removedAt(table, id)).toBeInstanceOf(Date);
    // The site no longer names a removed channel as its default.
    const site = await w.db.pool.query('SELECT default_channel_id FROM sites WHERE id = $1', [s.siteId]);
    expect(site.rows[0].default_channel_id).not.toBe(channelId);

    expect(await w.refused('channel', 'remove', '--channel', channelId)).toContain('does not exist');
    expect(await w.refused('pixel', 'remove', '--pixel', pixelId)).toContain('does not exist');
    expect(await w.refused('pixel', 'activate', '--pixel', pixelId)).toContain('does not exist');
    expect(await w.refused('entry', 'remove', '--entry', 'not-an-id')).toContain('is not a valid id');
  });

  it('an account is refused while it has sites; a removed site frees its domain, revokes its keys, keeps its history', async () => {
    const { accountId } = await w.ok<{ accountId: string }>('account', 'create', '--name', 'Gone');
    const { siteId, websiteId } = await w.ok<{ siteId: string; websiteId: string }>(
      'site',
      'create',
      '--account',
      accountId,
      '--name',
      'Old',
      '--domain',
      'old.example.com',
    );
    const { keyId } = await w.ok<{ keyId: string }>(
      'key',
      'create',
      '--account',
      accountId,
      '--site',
      siteId,
    );
    await w.db.pool.query(
      `INSERT INTO visits (site_id, temp_id, session_id, created_at) VALUES ($1, gen_random_uuid(), gen_random_uuid(), now())`,
      [siteId],
    );

    expect(await w.refused('account', 'remove', '--account', accountId)).toContain(
      `still has sites (${websiteId})`,
    );
    expect(await w.ok('site', 'remove', '--site', websiteId)).toEqual({ removed: true });
    const sites = await w.ok<{ sites: { siteId: string }[] }>('site', 'list', '--account', accountId);
    expect(sites.sites).toEqual([]);
    expect(await w.refused('site', 'update', '--site', siteId, '--add-domain', 'x.example.com')).toContain(
      'does not exist',
    );
    const key = await w.db.pool.query('SELECT revoked_at FROM api_keys WHERE id = $1', [keyId]);
    expect(key.rows[0].revoked_at).toBeInstanceOf(Date);
    const visits = await w.db.pool.query('SELECT count(*)::int AS n FROM visits WHERE site_id = $1', [
      siteId,
    ]);
    expect(visits.rows[0].n).toBe(1);
    // Its domain may now serve a new site of the account.
    await w.ok('site', 'create', '--account', accountId, '--name', 'New', '--domain', 'old.example.com');
    expect(await w.refused('account', 'remove', '--account', accountId)).toContain('still has sites');
  });

  it('an account without sites: removed, its keys revoked, gone from the list', async () => {
    const { accountId } = await w.ok<{ accountId: string }>('account', 'create', '--name', 'Empty');
    const { keyId } = await w.ok<{ keyId: string }>('key', 'create', '--account', accountId);
    expect(await w.ok('account', 'remove', '--account', accountId, '--json')).toEqual({ removed: true });
    const accounts = await w.ok<{ accounts: { accountId: string }[] }>('account', 'list');
    expect(accounts.accounts.map((a) => a.accountId)).not.toContain(accountId);
    const key = await w.db.pool.query('SELECT revoked_at FROM api_keys WHERE id = $1', [keyId]);
    expect(key.rows[0].revoked_at).toBeInstanceOf(Date);
    expect(await w.refused('account', 'remove', '--account', accountId)).toContain('does not exist');
    expect(
      await w.refused('site', 'create', '--account', accountId, '--name', 'X', '--domain', 'x.example.com'),
    ).toContain('does not exist');
  });
});
