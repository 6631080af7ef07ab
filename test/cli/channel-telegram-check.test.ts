// channel add (and update) ask Telegram before they store anything: the chat must exist for the
// bot, and the bot must be an administrator allowed to invite users; otherwise every click would
// find an empty invite pool. --skip-telegram-check adds it anyway.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { telegramRefusal } from '../../backend/domain/admin/channels.js';
import { TelegramError } from '../../backend/telegram/client.js';
import { DEFAULT_BOT, cliWorld, seed, type CliWorld } from './harness.js';

const chat = (id: number, title: string, admins: Record<number, { can_invite_users: boolean }> = {}) => ({
  id,
  title,
  type: 'channel' as const,
  admins,
});
const MEMBER_CHAT = chat(-1008000000001, 'Bot is a member');
const NO_BOT_CHAT = chat(-1008000000002, 'Bot not in it');
const NO_INVITE_CHAT = chat(-1008000000003, 'Admin without invite right', {
  [DEFAULT_BOT.id]: { can_invite_users: false },
});
const GOOD_CHAT = chat(-1008000000004, 'Good', { [DEFAULT_BOT.id]: { can_invite_users: true } });

let w: CliWorld;
let s: Awaited<ReturnType<typeof seed>>;
beforeAll(async () => {
  w = await cliWorld({ chats: [MEMBER_CHAT, NO_BOT_CHAT, NO_INVITE_CHAT, GOOD_CHAT] });
  w.telegram.setMember(MEMBER_CHAT.id, DEFAULT_BOT.id, 'member');
  s = await seed(w);
});
afterAll(async () => {
  await w.close();
});

const channels = async () =>
  Number(
    (await w.db.pool.query('SELECT count(*) FROM channels WHERE site_id = $1', [s.siteId])).rows[0].count,
  );
const add = (chatId: number, ...extra: string[]) => [
  'channel',
  'add',
  '--site',
  s.siteId,
  '--bot',
  s.botId,
  '--telegram-channel-id',
  String(chatId),
  '--title',
  'T',
  ...extra,
];
const BOT = `the bot @${DEFAULT_BOT.username}`;

describe('channel add', () => {
  it('refuses a bot that is only a member of the chat, saying what to do; nothing is written', async () => {
    expect(await w.refused(...add(MEMBER_CHAT.id))).toBe(
      `error: ${BOT} is only a member of chat ${MEMBER_CHAT.id}, not an administrator: make it an administrator with the right to invite users ("Invite users via link"), or add it anyway with --skip-telegram-check\n`,
    );
    expect(await channels()).toBe(0);
  });

  it('refuses a bot that is not in the chat, an admin without the invite right, and a chat Telegram does not show', async () => {
    expect(await w.refused(...add(NO_BOT_CHAT.id))).toContain(
      `${BOT} is not a member (left) of chat ${NO_BOT_CHAT.id}, not an administrator`,
    );
    expect(await w.refused(...add(NO_INVITE_CHAT.id))).toBe(
      `error: ${BOT} is an administrator of chat ${NO_INVITE_CHAT.id} without the right to invite users: give it "Invite users via link" (can_invite_users), or add it anyway with --skip-telegram-check\n`,
    );
    expect(await w.refused(...add(-1008000000099))).toBe(
      `error: Telegram does not show chat -1008000000099 to ${BOT} (Telegram getChat: Bad Request: chat not found): check the id, and add ${BOT} to the chat as an administrator allowed to invite users, or add it anyway with --skip-telegram-check\n`,
    );
    expect(await channels()).toBe(0);
  });

  it('refuses when Telegram cannot be asked; --skip-telegram-check adds the channel anyway', async () => {
    w.telegram.failNext(2, { type: 'status', status: 502 });
    expect(await w.refused(...add(NO_BOT_CHAT.id))).toMatch(
      /^error: chat -1008000000002 could not be checked with Telegram \(.+\): try again, or add it anyway with --skip-telegram-check\n$/,
    );
    const { channelId } = await w.ok(...add(NO_BOT_CHAT.id, '--skip-telegram-check'));
    expect(
      (await w.db.pool.query('SELECT bot_is_admin FROM channels WHERE id = $1', [channelId])).rows[0]
        .bot_is_admin,
    ).toBe(false);
  });

  it('adds a chat whose bot may invite users', async () => {
    const { channelId } = await w.ok(...add(GOOD_CHAT.id));
    expect(
      (await w.db.pool.query('SELECT bot_is_admin, bot_can_invite FROM channels WHERE id = $1', [channelId]))
        .rows[0],
    ).toEqual({ bot_is_admin: true, bot_can_invite: true });
  });
});

describe('channel update', () => {
  it('is checked as channel add is: refused once the bot lost its rights, unless --skip-telegram-check', async () => {
    const { siteId } = await w.ok(
      'site',
      'create',
      '--account',
      s.accountId,
      '--name',
      'Upd',
      '--domain',
      'upd.example.com',
    );
    const chatId = -1008000000005;
    w.telegram.chats.set(
      chatId,
      chat(chatId, 'Demoted later', { [DEFAULT_BOT.id]: { can_invite_users: true } }),
    );
    const { channelId } = await w.ok(
      'channel',
      'add',
      '--site',
      siteId,
      '--bot',
      s.botId,
      '--telegram-channel-id',
      String(chatId),
      '--title',
      'Before',
    );
    w.telegram.setBotRights(chatId, DEFAULT_BOT.id, null);
    expect(await w.refused('channel', 'update', '--channel', channelId, '--title', 'After')).toContain(
      `of chat ${chatId}, not an administrator`,
    );
    expect(
      (await w.db.pool.query('SELECT title FROM channels WHERE id = $1', [channelId])).rows[0].title,
    ).toBe('Before');
    await w.ok('channel', 'update', '--channel', channelId, '--title', 'After', '--skip-telegram-check');
    expect(
      (await w.db.pool.query('SELECT title, bot_is_admin FROM channels WHERE id = $1', [channelId])).rows[0],
    ).toEqual({ title: 'After', bot_is_admin: false });
  });
});

describe('the rule', () => {
  const admin = { status: 'administrator', isAdmin: true, canInvite: true };
  const channel = { type: 'channel', username: null };
  it('allows an administrator that may invite users; refuses every other answer', () => {
    expect(telegramRefusal({ chat: channel, status: admin }, -1001, 'the bot @b')).toBeNull();
    expect(
      telegramRefusal({ chat: channel, status: { ...admin, canInvite: false } }, -1001, 'the bot @b'),
    ).toMatch(/without the right to invite users/);
    expect(
      telegramRefusal(
        { chat: channel, status: { status: 'restricted', isAdmin: false, canInvite: false } },
        -1001,
        'the bot @b',
      ),
    ).toMatch(/^the bot @b is restricted of chat -1001, not an administrator/);
    expect(
      telegramRefusal(
        {
          chat: null,
          status: null,
          failure: new TelegramError('getChat', 'unauthorized', 'Unauthorized', 401),
        },
        -1001,
        'the bot @b',
      ),
    ).toMatch(/could not be checked with Telegram \(Telegram refused the bot's token\)/);
    expect(
      telegramRefusal(
        {
          chat: channel,
          status: null,
          failure: new TelegramError('getChatMember', 'api', 'Bad Request: user not found', 400),
        },
        -1001,
        'the bot @b',
      ),
    ).toMatch(
      /^Telegram does not show chat -1001 to the bot @b \(Telegram getChatMember: Bad Request: user not found\)/,
    );
  });
});
