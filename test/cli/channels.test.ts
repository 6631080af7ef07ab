// channel add and channel list: every flag reaches the row; refusals name the flag.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_BOT, DEFAULT_CHAT, cliWorld, seed, type CliWorld } from './harness.js';

const NOT_ADMIN_CHAT = { id: -1002000000002, title: 'No rights', type: 'channel' as const, admins: {} };
// A bot's chat leads to one channel, so each site below uses chats of its own.
const adminChat = (id: number) => ({
  id,
  title: `Chat ${id}`,
  type: 'channel' as const,
  admins: { [DEFAULT_BOT.id]: { can_invite_users: true } },
});
const LIST_CHAT = adminChat(-1007000000001);
const LIST_PLAIN_CHAT = { id: -1007000000002, title: 'Plain', type: 'channel' as const, admins: {} };
const HUMAN_CHAT = adminChat(-1007000000003);
const PUBLIC_CHAT = { ...adminChat(-1007000000004), title: 'Public', username: 'public_club' };
const UPDATE_CHAT = adminChat(-1007000000006);
const PUBLIC_UPDATE_CHAT = { ...adminChat(-1007000000005), title: 'Public too', username: 'public_club_two' };
const BASIC_GROUP = {
  id: -4000000001,
  title: 'Basic',
  type: 'group' as const,
  admins: { [DEFAULT_BOT.id]: { can_invite_users: true } },
};
// A bot belongs to one account (Telegram delivers its updates to one webhook only): another
// account's bot is another bot.
const FOREIGN_BOT = {
  token: '777333:Foreign-bot-token-abcdefghij',
  id: 777333,
  first_name: 'Foreign',
  username: 'foreign_test_bot',
};

let w: CliWorld;
let s: Awaited<ReturnType<typeof seed>>;
beforeAll(async () => {
  w = await cliWorld({
    bots: [DEFAULT_BOT, FOREIGN_BOT],
    chats: [
      DEFAULT_CHAT,
      NOT_ADMIN_CHAT,
      LIST_CHAT,
      LIST_PLAIN_CHAT,
      HUMAN_CHAT,
      UPDATE_CHAT,
      PUBLIC_CHAT,
      PUBLIC_UPDATE_CHAT,
      BASIC_GROUP,
    ],
  });
  s = await seed(w);
});
afterAll(async () => {
  await w.close();
});

const channelRow = async (id: string) =>
  (await w.db.pool.query('SELECT * FROM channels WHERE id = $1', [id])).rows[0];
const defaultOf = async (siteId: string) =>
  (await w.db.pool.query('SELECT default_channel_id FROM sites WHERE id = $1', [siteId])).rows[0]
    .default_channel_id;

let sites = 0;
async function freshSite(): Promise<string> {
  const { siteId } = await w.ok(
    'site',
    'create',
    '--account',
    s.accountId,
    '--name',
    'More',
    '--domain',
    `more${++sites}.example.com`,
  );
  return siteId;
}

describe('channel add', () => {
  it('prints {"channelId"}; the first channel becomes the default; the bot admin status is read from Telegram', async () => {
    const out = await w.ok(
      'channel',
      'add',
      '--site',
      s.siteId,
      '--bot',
      s.botId,
      '--telegram-channel-id',
      String(DEFAULT_CHAT.id),
      '--title',
      'Main',
    );
    expect(Object.keys(out)).toEqual(['channelId']);
    const row = await channelRow(out.channelId);
    expect(row).toMatchObject({
      site_id: s.siteId,
      bot_id: s.botId,
      telegram_chat_id: DEFAULT_CHAT.id,
      title: 'Main',
      username: null,
      funnel_order: 0,
      event_type: 'Subscribe',
      fixed_value: null,
      fixed_currency: null,
      manual_value: false,
      invite_mode: 'member_limit',
      public_invite_url: null,
      bot_status: 'administrator',
      bot_is_admin: true,
      bot_can_invite: true,
    });
    expect(await defaultOf(s.siteId)).toBe(out.channelId);
    expect(w.telegram.calls('getChatMember').at(-1)).toMatchObject({
      chat_id: DEFAULT_CHAT.id,
      user_id: DEFAULT_BOT.id,
    });
  });

  it('takes every flag: username, funnel order, event type, fixed value, invite mode, public link, --default (by websiteId)', async () => {
    const out = await w.ok(
      'channel',
      'add',
      '--site',
      s.websiteId,
      '--bot',
      s.botId,
      `--telegram-channel-id=${NOT_ADMIN_CHAT.id}`,
      '--title',
      'VIP 💎',
      '--username',
      '@vip_channel',
      '--funnel-order',
      '2',
      '--event-type',
      'Purchase',
      '--value',
      '9.99',
      '--currency',
      'eur',
      '--invite-mode',
      'join_request',
      '--public-invite-url',
      'https://t.me/vip_channel',
      '--default',
      '--skip-telegram-check',
    );
    const row = await channelRow(out.channelId);
    expect(row).toMatchObject({
      site_id: s.siteId,
      telegram_chat_id: NOT_ADMIN_CHAT.id,
      title: 'VIP 💎',
      username: 'vip_channel',
      funnel_order: 2,
      event_type: 'Purchase',
      fixed_value: 9.99,
      fixed_currency: 'EUR',
      manual_value: false,
      invite_mode: 'join_request',
      public_invite_url: 'https://t.me/vip_channel',
      bot_status: 'left',
      bot_is_admin: false,
      bot_can_invite: false,
    });
    expect(await defaultOf(s.siteId)).toBe(out.channelId);
  });

  it('--manual-value on a Purchase channel; a Custom event with its name', async () => {
    const site = await freshSite();
    const manual = await w.ok(
      'channel',
      'add',
      '--site',
      site,
      '--bot',
      s.botId,
      '--telegram-channel-id',
      '-1003000000003',
      '--title',
      'Paid',
      '--event-type',
      'Purchase',
      '--manual-value',
      '--skip-telegram-check',
    );
    expect(await channelRow(manual.channelId)).toMatchObject({
      manual_value: true,
      event_type: 'Purchase',
      fixed_value: null,
    });
    const custom = await w.ok(
      'channel',
      'add',
      '--site',
      site,
      '--bot',
      s.botId,
      '--telegram-channel-id',
      '-1003000000004',
      '--title',
      'Webinar',
      '--event-type',
      'Custom',
      '--custom-event-name',
      'WebinarJoin',
      '--skip-telegram-check',
    );
    expect(await channelRow(custom.channelId)).toMatchObject({
      event_type: 'Custom',
      custom_event_name: 'WebinarJoin',
    });
    // A chat Telegram does not know, added with --skip-telegram-check: its bot status stays unknown.
    expect(await channelRow(manual.channelId)).toMatchObject({ bot_status: null, bot_is_admin: null });
  });

  it('refuses inconsistent or malformed values, naming the flag, and writes nothing', async () => {
    const site = await freshSite();
    const base = [
      'channel',
      'add',
      '--site',
      site,
      '--bot',
      s.botId,
      '--telegram-channel-id',
      '-1004000000001',
      '--title',
      'T',
    ];
    expect(await w.refused(...base, '--value', '5')).toBe('error: --value and --currency go together\n');
    expect(await w.refused(...base, '--manual-value')).toBe(
      'error: --manual-value needs --event-type Purchase\n',
    );
    expect(
      await w.refused(
        ...base,
        '--event-type',
        'Purchase',
        '--manual-value',
        '--value',
        '5',
        '--currency',
        'USD',
      ),
    ).toBe('error: --manual-value and a fixed --value exclude each other\n');
    expect(await w.refused(...base, '--event-type', 'Signup')).toMatch(/^error: --event-type: .*"Subscribe"/);
    expect(await w.refused(...base, '--event-type', 'Custom')).toBe(
      'error: --custom-event-name: a Custom event type needs a custom event name\n',
    );
    expect(await w.refused(...base, '--invite-mode', 'both')).toMatch(
      /^error: --invite-mode: .*"join_request"/,
    );
    expect(await w.refused(...base, '--currency', 'EURO', '--value', '1')).toBe(
      'error: --currency: must be a 3-letter ISO 4217 code\n',
    );
    expect(await w.refused(...base, '--value', '-5', '--currency', 'USD')).toMatch(/^error: --value: /);
    expect(await w.refused(...base, '--username', 'a b')).toBe(
      'error: --username: must be a Telegram username\n',
    );
    expect(await w.refused(...base, '--public-invite-url', 'not a url')).toMatch(
      /^error: --public-invite-url: /,
    );
    expect(
      await w.refused(
        'channel',
        'add',
        '--site',
        site,
        '--bot',
        s.botId,
        '--telegram-channel-id',
        '1001234567',
        '--title',
        'T',
      ),
    ).toBe('error: --telegram-channel-id: must be a negative Telegram chat id like -1001234567890\n');
    // A public @username gets the way to its id, not a bare "must be a negative id".
    expect(
      await w.refused(
        'channel',
        'add',
        '--site',
        site,
        '--bot',
        s.botId,
        '--telegram-channel-id',
        '@acme_news',
        '--title',
        'T',
      ),
    ).toContain(
      "--telegram-channel-id: is a public username, not the chat's id: give the numeric id (-100…), which getChat",
    );
    expect(
      await w.refused(
        'channel',
        'add',
        '--site',
        site,
        '--bot',
        s.botId,
        '--telegram-channel-id',
        '-1004000000001',
        '--title',
        '',
      ),
    ).toMatch(/^error: --title: [^;]+\n$/);
    expect(
      await w.refused(
        'channel',
        'add',
        '--site',
        site,
        '--bot',
        s.botId,
        '--telegram-channel-id',
        '42',
        '--title',
        ' ',
      ),
    ).toBe(
      'error: --telegram-channel-id: must be a negative Telegram chat id like -1001234567890; --title: Too small: expected string to have >=1 characters\n',
    );
    expect(
      (await w.db.pool.query('SELECT count(*)::int AS n FROM channels WHERE site_id = $1', [site])).rows[0].n,
    ).toBe(0);
  });

  it('refuses an unknown site or bot, a bot of another account, the same channel twice on a site or with the same bot', async () => {
    const site = await freshSite();
    const args = (siteId: string, botId: string, chat = '-1005000000001') => [
      'channel',
      'add',
      '--site',
      siteId,
      '--bot',
      botId,
      '--telegram-channel-id',
      chat,
      '--title',
      'T',
      '--skip-telegram-check',
    ];
    expect(await w.refused(...args('ws_nope', s.botId))).toBe('error: site ws_nope does not exist\n');
    expect(await w.refused(...args(site, '00000000-0000-4000-8000-000000000002'))).toBe(
      'error: bot 00000000-0000-4000-8000-000000000002 does not exist\n',
    );
    expect(await w.refused(...args(site, 'bot-1'))).toBe('error: --bot: must be a UUID\n');

    const { accountId: other } = await w.ok('account', 'create', '--name', 'Other');
    const { botId: foreignBot } = await w.ok(
      'bot',
      'add',
      '--account',
      other,
      '--token',
      FOREIGN_BOT.token,
      '--no-webhook',
    );
    expect(await w.refused(...args(site, foreignBot))).toBe(
      'error: the bot belongs to another account than the site\n',
    );

    await w.ok(...args(site, s.botId));
    expect(await w.refused(...args(site, s.botId))).toBe(
      'error: channel -1005000000001 is already on this site\n',
    );
    expect(await w.refused(...args(await freshSite(), s.botId))).toBe(
      "error: channel -1005000000001 is already added with this bot (on another site); a bot's chat leads to one channel\n",
    );
  });
});

describe('what Telegram lets a channel attribute', () => {
  it('refuses a basic group (an id not starting with -100), with the reason, and writes nothing', async () => {
    const site = await freshSite();
    const reason = await w.refused(
      'channel',
      'add',
      '--site',
      site,
      '--bot',
      s.botId,
      '--telegram-channel-id',
      String(BASIC_GROUP.id),
      '--title',
      'Basic',
    );
    expect(reason).toMatch(/^error: --telegram-channel-id: is a basic group .*supergroup/);
    expect(
      (await w.db.pool.query('SELECT count(*)::int AS n FROM channels WHERE site_id = $1', [site])).rows[0].n,
    ).toBe(0);
  });

  it('refuses --invite-mode join_request for a public chat (getChat says it has a username); warns for member_limit there', async () => {
    const site = await freshSite();
    const args = [
      'channel',
      'add',
      '--site',
      site,
      '--bot',
      s.botId,
      '--telegram-channel-id',
      String(PUBLIC_CHAT.id),
      '--title',
      'Public',
    ];
    expect(await w.refused(...args, '--invite-mode', 'join_request')).toMatch(
      /^error: --invite-mode join_request cannot attribute in a public chat \(@public_club\): Telegram sends join requests to public chats without their invite link/,
    );
    expect(w.telegram.calls('getChat').at(-1)).toMatchObject({ chat_id: PUBLIC_CHAT.id });
    const run = await w.run(...args, '--json');
    expect(run.code).toBe(0);
    expect(Object.keys(JSON.parse(run.stdout))).toEqual(['channelId']);
    expect(run.stderr).toMatch(
      /warning: chat -1007000000004 is public \(@public_club\): a visitor who opens its invite link can join from the chat's preview/,
    );
    const row = await channelRow(JSON.parse(run.stdout).channelId);
    expect(row).toMatchObject({ chat_is_public: true, username: 'public_club', invite_mode: 'member_limit' });
  });
});

describe('channel update', () => {
  it('changes the flags given, keeps the rest, prints {"channelId"}; checks the result as channel add does', async () => {
    const site = await freshSite();
    const { channelId } = await w.ok(
      'channel',
      'add',
      '--site',
      site,
      '--bot',
      s.botId,
      '--telegram-channel-id',
      String(UPDATE_CHAT.id),
      '--title',
      'Before',
      '--event-type',
      'Purchase',
      '--value',
      '5',
      '--currency',
      'USD',
    );
    expect(
      await w.ok(
        'channel',
        'update',
        '--channel',
        channelId,
        '--title',
        'After',
        '--invite-mode',
        'join_request',
        '--funnel-order',
        '3',
      ),
    ).toEqual({ channelId });
    expect(await channelRow(channelId)).toMatchObject({
      title: 'After',
      invite_mode: 'join_request',
      funnel_order: 3,
      event_type: 'Purchase',
      fixed_value: 5,
      fixed_currency: 'USD',
      chat_is_public: false,
    });
    expect(await w.refused('channel', 'update', '--channel', channelId, '--manual-value')).toBe(
      'error: --manual-value and a fixed --value exclude each other\n',
    );
    await w.ok('channel', 'update', '--channel', channelId, '--value', '7');
    expect(await channelRow(channelId)).toMatchObject({ fixed_value: 7, fixed_currency: 'USD' });
    expect(
      await w.refused(
        'channel',
        'update',
        '--channel',
        '00000000-0000-4000-8000-000000000009',
        '--title',
        'X',
      ),
    ).toBe('error: channel 00000000-0000-4000-8000-000000000009 does not exist\n');
    expect((await channelRow(channelId)).title).toBe('After');

    // Settings can be taken back: the fixed value (with its currency), then manual values instead.
    await w.ok('channel', 'update', '--channel', channelId, '--clear', 'value', '--manual-value');
    expect(await channelRow(channelId)).toMatchObject({
      fixed_value: null,
      fixed_currency: null,
      manual_value: true,
    });
    await w.ok(
      'channel',
      'update',
      '--channel',
      channelId,
      '--clear',
      'manual-value',
      '--clear',
      'public-invite-url',
    );
    expect(await channelRow(channelId)).toMatchObject({ manual_value: false, public_invite_url: null });
    expect(
      await w.refused(
        'channel',
        'update',
        '--channel',
        channelId,
        '--clear',
        'value',
        '--value',
        '3',
        '--currency',
        'EUR',
      ),
    ).toBe('error: --clear value and a new value for it cannot go together\n');
    expect(await w.refused('channel', 'update', '--channel', channelId, '--clear', 'title')).toMatch(
      /^error: --clear: /,
    );
  });

  it('refuses join-request mode once the chat is public', async () => {
    const site = await freshSite();
    const { channelId } = await w.ok(
      'channel',
      'add',
      '--site',
      site,
      '--bot',
      s.botId,
      '--telegram-channel-id',
      String(PUBLIC_UPDATE_CHAT.id),
      '--title',
      'P',
    );
    expect(
      await w.refused('channel', 'update', '--channel', channelId, '--invite-mode', 'join_request'),
    ).toMatch(/cannot attribute in a public chat/);
    expect((await channelRow(channelId)).invite_mode).toBe('member_limit');
  });
});

describe('channel list', () => {
  it('prints {"channels":[…]} with the contract fields, ordered by funnel order, with pool sizes', async () => {
    const site = await freshSite();
    const a = await w.ok(
      'channel',
      'add',
      '--site',
      site,
      '--bot',
      s.botId,
      '--telegram-channel-id',
      String(LIST_CHAT.id),
      '--title',
      'Main',
      '--funnel-order',
      '1',
    );
    const b = await w.ok(
      'channel',
      'add',
      '--site',
      site,
      '--bot',
      s.botId,
      '--telegram-channel-id',
      String(LIST_PLAIN_CHAT.id),
      '--title',
      'First',
      '--funnel-order',
      '0',
      '--event-type',
      'Lead',
      '--skip-telegram-check',
    );
    await w.db.pool.query(
      `INSERT INTO invitations (channel_id, invite_link, expires_at, visit_id, revoked_at)
       VALUES ($1, 'https://t.me/+a1', now() + interval '1 hour', NULL, NULL),
              ($1, 'https://t.me/+a2', NULL, NULL, NULL),
              ($1, 'https://t.me/+expired', now() - interval '1 hour', NULL, NULL),
              ($1, 'https://t.me/+revoked', NULL, NULL, now())`,
      [a.channelId],
    );

    const out = await w.ok<{ channels: Record<string, unknown>[] }>('channel', 'list', '--site', site);
    expect(Object.keys(out)).toEqual(['channels']);
    expect(out.channels.map((c) => c.channelId)).toEqual([b.channelId, a.channelId]);
    for (const c of out.channels) {
      expect(Object.keys(c).slice(0, 6)).toEqual([
        'channelId',
        'telegramChannelId',
        'title',
        'eventType',
        'botIsAdmin',
        'poolSize',
      ]);
    }
    expect(out.channels[0]).toMatchObject({
      telegramChannelId: String(LIST_PLAIN_CHAT.id),
      title: 'First',
      eventType: 'Lead',
      botIsAdmin: false,
      poolSize: 0,
      isDefault: false,
    });
    expect(out.channels[1]).toMatchObject({
      telegramChannelId: String(LIST_CHAT.id),
      title: 'Main',
      eventType: 'Subscribe',
      botIsAdmin: true,
      poolSize: 2,
      isDefault: true,
    });
  });

  it('lists by websiteId, shows an empty site, and a human table', async () => {
    const { siteId, websiteId } = await w.ok(
      'site',
      'create',
      '--account',
      s.accountId,
      '--name',
      'Empty',
      '--domain',
      'empty.example.com',
    );
    expect(await w.ok('channel', 'list', '--site', websiteId)).toEqual({ channels: [] });
    expect((await w.run('channel', 'list', '--site', siteId)).stdout).toBe('No channels.\n');
    await w.ok(
      'channel',
      'add',
      '--site',
      siteId,
      '--bot',
      s.botId,
      '--telegram-channel-id',
      String(HUMAN_CHAT.id),
      '--title',
      'Main',
    );
    const human = await w.run('channel', 'list', '--site', websiteId);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(
      /^channelId +telegram id +title +event +order +bot admin +links\n[0-9a-f-]{36} +-1007000000003 +Main +Subscribe +0 +yes +0 +default\n$/,
    );
  });

  it('refuses an unknown site', async () => {
    expect(await w.refused('channel', 'list', '--site', '00000000-0000-4000-8000-000000000003')).toBe(
      'error: site 00000000-0000-4000-8000-000000000003 does not exist\n',
    );
  });
});
