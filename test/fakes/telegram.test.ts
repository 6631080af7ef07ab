import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { call } from './client.js';
import { DEFAULT_BOT, DEFAULT_CHAT, startTelegram, type TelegramFake } from './telegram.js';

const TOKEN = DEFAULT_BOT.token;
const CHAT = DEFAULT_CHAT.id;
const NO_RIGHTS_CHAT = -1002000000002;
const PUBLIC_CHAT = -1002000000003;
let tg: TelegramFake;
const api = (method: string, token = TOKEN) => `${tg.url}/bot${token}/${method}`;

// A stand-in for the service's webhook endpoint, to see what Telegram would POST.
let hook: Server;
let hookUrl: string;
const delivered: { headers: IncomingHttpHeaders; body: any }[] = [];

beforeAll(async () => {
  tg = await startTelegram({
    chats: [
      DEFAULT_CHAT,
      {
        id: NO_RIGHTS_CHAT,
        title: 'Other',
        type: 'supergroup',
        admins: { [DEFAULT_BOT.id]: { can_invite_users: false } },
      },
      {
        id: PUBLIC_CHAT,
        title: 'Public',
        type: 'supergroup',
        username: 'public_club',
        admins: { [DEFAULT_BOT.id]: { can_invite_users: true } },
      },
    ],
  });
  hook = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      delivered.push({ headers: req.headers, body: JSON.parse(raw) });
      res.end('ok');
    });
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/backend/telegram/bot-1`;
});
afterAll(async () => {
  await tg.close();
  hook.closeAllConnections();
  await new Promise((r) => hook.close(r));
});
beforeEach(() => {
  tg.reset();
  delivered.length = 0;
});

describe('Telegram fake: bots and webhooks', () => {
  it('answers getMe by GET and POST, 401 for an unknown token, 404 for an unknown method', async () => {
    const get = await call(api('getMe'));
    expect(get.body).toEqual({
      ok: true,
      result: expect.objectContaining({
        id: 999000,
        is_bot: true,
        first_name: 'Capigram',
        username: 'capigram_test_bot',
      }),
    });
    expect((await call(api('getme'), { json: {} })).body.ok).toBe(true);
    const unknown = await call(api('getMe', '1:nope'));
    expect(unknown.status).toBe(401);
    expect(unknown.body).toEqual({ ok: false, error_code: 401, description: 'Unauthorized' });
    expect((await call(api('sendTelepathy'))).status).toBe(404);
  });

  it('records setWebhook (JSON) and reports it in getWebhookInfo; deleteWebhook removes it', async () => {
    const set = await call(api('setWebhook'), {
      json: {
        url: hookUrl,
        secret_token: 's3cr3t_-X',
        allowed_updates: ['chat_member', 'chat_join_request', 'my_chat_member'],
        max_connections: 10,
      },
    });
    expect(set.body).toEqual({ ok: true, result: true, description: 'Webhook was set' });
    expect(tg.webhook(TOKEN)).toEqual({
      url: hookUrl,
      secret_token: 's3cr3t_-X',
      allowed_updates: ['chat_member', 'chat_join_request', 'my_chat_member'],
      max_connections: 10,
    });
    const info = await call(api('getWebhookInfo'));
    expect(info.body.result).toMatchObject({
      url: hookUrl,
      pending_update_count: 0,
      max_connections: 10,
      allowed_updates: ['chat_member', 'chat_join_request', 'my_chat_member'],
    });
    await call(api('deleteWebhook'), { json: {} });
    expect((await call(api('getWebhookInfo'))).body.result.url).toBe('');
  });

  it('accepts form-encoded setWebhook with allowed_updates as a JSON string, and refuses bad values', async () => {
    await call(api('setWebhook'), {
      form: { url: hookUrl, allowed_updates: '["chat_member"]', max_connections: '5' },
    });
    expect(tg.webhook(TOKEN)).toMatchObject({ allowed_updates: ['chat_member'], max_connections: 5 });
    expect((await call(api('setWebhook'), { json: { url: 'ftp://x.example' } })).status).toBe(400);
    const badSecret = await call(api('setWebhook'), { json: { url: hookUrl, secret_token: 'has space' } });
    expect(badSecret.body.description).toBe('Bad Request: secret token contains unallowed characters');
    expect(tg.calls('setWebhook')).toHaveLength(3);
  });

  it('refuses webhooks api.telegram.org refuses (http://, other ports), in its words; loopback is let through for tests', async () => {
    const set = async (url: string) => (await call(api('setWebhook'), { json: { url } })).body;
    expect(await set('http://hooks.example.com/tg')).toEqual({
      ok: false,
      error_code: 400,
      description: 'Bad Request: bad webhook: An HTTPS URL must be provided for webhook',
    });
    expect(await set('https://hooks.example.com:8080/tg')).toEqual({
      ok: false,
      error_code: 400,
      description: 'Bad Request: bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443',
    });
    for (const url of [
      'https://hooks.example.com/tg',
      'https://hooks.example.com:8443/tg',
      'https://hooks.example.com:88/tg',
      hookUrl,
    ]) {
      expect((await set(url)).ok).toBe(true);
    }
    // max_connections is clamped to 1..100, not refused
    await call(api('setWebhook'), { json: { url: hookUrl, max_connections: 1000 } });
    expect(tg.webhook(TOKEN)?.max_connections).toBe(100);
  });
});

describe('Telegram fake: invite links and join requests', () => {
  it('creates unique t.me/+ links with the requested options and lists them per chat', async () => {
    const res = await call(api('createChatInviteLink'), {
      json: { chat_id: CHAT, name: 'cg-7f3a9c', member_limit: 1, expire_date: 1900000000 },
    });
    expect(res.body.ok).toBe(true);
    expect(res.body.result).toMatchObject({
      name: 'cg-7f3a9c',
      member_limit: 1,
      expire_date: 1900000000,
      creates_join_request: false,
      is_revoked: false,
      is_primary: false,
      creator: { id: 999000, is_bot: true },
    });
    expect(res.body.result.invite_link).toMatch(/^https:\/\/t\.me\/\+[A-Za-z0-9_-]{16}$/);
    for (let i = 0; i < 30; i++)
      await call(api('createChatInviteLink'), {
        form: { chat_id: String(CHAT), creates_join_request: 'true' },
      });
    const links = tg.links(CHAT);
    expect(links).toHaveLength(31);
    expect(new Set(links.map((l) => l.invite_link)).size).toBe(31);
    expect(links[1]?.creates_join_request).toBe(true);
  });

  it("refuses member_limit with creates_join_request in TDLib's words; cuts a long name and clamps the limit as Telegram does", async () => {
    const both = await call(api('createChatInviteLink'), {
      json: { chat_id: CHAT, member_limit: 1, creates_join_request: true },
    });
    expect(both.status).toBe(400);
    expect(both.body).toEqual({
      ok: false,
      error_code: 400,
      description: "Bad Request: member limit can't be specified for links requiring administrator approval",
    });
    const longName = await call(api('createChatInviteLink'), {
      json: { chat_id: CHAT, name: 'x'.repeat(40) },
    });
    expect(longName.body.result.name).toBe('x'.repeat(32));
    const noLimit = await call(api('createChatInviteLink'), {
      json: { chat_id: CHAT, member_limit: 0, creates_join_request: true },
    });
    expect(noLimit.body.result).not.toHaveProperty('member_limit');
    const clamped = await call(api('createChatInviteLink'), {
      json: { chat_id: CHAT, member_limit: 250000 },
    });
    expect(clamped.body.result.member_limit).toBe(100000);
    const past = await call(api('createChatInviteLink'), { json: { chat_id: CHAT, expire_date: 1_000_000 } });
    expect(past.body).toEqual({
      ok: false,
      error_code: 400,
      description: 'Bad Request: EXPIRE_DATE_INVALID',
    });
    expect(tg.links(CHAT)).toHaveLength(3);
  });

  it('refuses an unknown chat and a chat where the bot may not invite', async () => {
    const unknown = await call(api('createChatInviteLink'), { json: { chat_id: -100123 } });
    expect(unknown.body.description).toBe('Bad Request: chat not found');
    const noRights = await call(api('createChatInviteLink'), { json: { chat_id: NO_RIGHTS_CHAT } });
    expect(noRights.body.description).toBe('Bad Request: not enough rights to manage chat invite link');
  });

  it('revokes a link and lists it as revoked', async () => {
    const link = (await call(api('createChatInviteLink'), { json: { chat_id: CHAT } })).body.result
      .invite_link;
    const res = await call(api('revokeChatInviteLink'), { json: { chat_id: CHAT, invite_link: link } });
    expect(res.body.result).toMatchObject({ invite_link: link, is_revoked: true });
    expect(tg.revoked.map((l) => l.invite_link)).toEqual([link]);
    expect(tg.links(CHAT)[0]?.is_revoked).toBe(true);
  });

  it('refuses to revoke a link that expired or that it never made: INVITE_HASH_EXPIRED', async () => {
    const link = (
      await call(api('createChatInviteLink'), {
        json: { chat_id: CHAT, expire_date: Math.floor(Date.now() / 1000) + 3600 },
      })
    ).body.result.invite_link;
    tg.expireLink(link);
    for (const invite_link of [link, 'https://t.me/+never-made']) {
      const res = await call(api('revokeChatInviteLink'), { json: { chat_id: CHAT, invite_link } });
      expect(res.status).toBe(400);
      expect(res.body.description).toBe('Bad Request: INVITE_HASH_EXPIRED');
    }
    expect(tg.revoked).toEqual([]);
  });

  it('approves a pending join request once; refuses one that is not pending', async () => {
    tg.chatJoinRequest({ chatId: CHAT, user: { id: 777000222, first_name: 'Bo' } });
    const ok = await call(api('approveChatJoinRequest'), { json: { chat_id: CHAT, user_id: 777000222 } });
    expect(ok.body).toEqual({ ok: true, result: true });
    expect(tg.approvals).toEqual([
      expect.objectContaining({ chatId: CHAT, userId: 777000222, botToken: TOKEN }),
    ]);
    const again = await call(api('approveChatJoinRequest'), { json: { chat_id: CHAT, user_id: 777000222 } });
    expect(again.body.description).toBe('Bad Request: USER_ALREADY_PARTICIPANT');
    const never = await call(api('declineChatJoinRequest'), { json: { chat_id: CHAT, user_id: 1 } });
    expect(never.body.description).toBe('Bad Request: HIDE_REQUESTER_MISSING');
    const member = await call(api('getChatMember'), { json: { chat_id: CHAT, user_id: 777000222 } });
    expect(member.body.result).toEqual({
      status: 'member',
      user: { id: 777000222, is_bot: false, first_name: 'Bo' },
    });
  });

  it("lets the bot write to a requester's user_chat_id only while the request waits, within Telegram's text limits", async () => {
    const user = 777000333;
    const send = (text: unknown, chatId = user) =>
      call(api('sendMessage'), { json: { chat_id: chatId, text } });
    expect((await send('hi')).body.description).toBe(
      "Forbidden: bot can't initiate conversation with a user",
    );
    tg.chatJoinRequest({ chatId: CHAT, user: { id: user } });
    expect((await send('')).body.description).toBe('Bad Request: message text is empty');
    expect((await send('x'.repeat(4097))).body.description).toBe('Bad Request: message is too long');
    const ok = await send('x'.repeat(4096));
    expect(ok.body).toMatchObject({ ok: true, result: { chat: { id: user } } });
    expect(tg.messages).toEqual([expect.objectContaining({ chatId: user, text: 'x'.repeat(4096) })]);
    await call(api('declineChatJoinRequest'), { json: { chat_id: CHAT, user_id: user } });
    expect((await send('too late')).status).toBe(403);
    // A request made more than 5 minutes ago no longer opens the chat.
    tg.chatJoinRequest({ chatId: CHAT, user: { id: user + 1 }, date: Math.floor(Date.now() / 1000) - 301 });
    expect((await send('late', user + 1)).status).toBe(403);
  });

  it('reports the bot as an administrator and the chat via getChat', async () => {
    const bot = await call(api('getChatMember'), { json: { chat_id: CHAT, user_id: DEFAULT_BOT.id } });
    expect(bot.body.result).toMatchObject({
      status: 'administrator',
      can_invite_users: true,
      user: { id: DEFAULT_BOT.id },
    });
    const chat = await call(api('getChat'), { json: { chat_id: String(CHAT) } });
    expect(chat.body.result).toMatchObject({ id: CHAT, title: 'Main', type: 'channel' });
  });
});

describe('Telegram fake: flood control and outages', () => {
  it('answers 429 with parameters.retry_after for the flooded requests only', async () => {
    tg.floodNext(2, 3);
    const first = await call(api('createChatInviteLink'), { json: { chat_id: CHAT } });
    expect(first.status).toBe(429);
    expect(first.body).toEqual({
      ok: false,
      error_code: 429,
      description: 'Too Many Requests: retry after 3',
      parameters: { retry_after: 3 },
    });
    expect((await call(api('createChatInviteLink'), { json: { chat_id: CHAT } })).status).toBe(429);
    expect((await call(api('createChatInviteLink'), { json: { chat_id: CHAT } })).status).toBe(200);
    expect(tg.links(CHAT)).toHaveLength(1);
  });

  it('answers 502 to everything while down', async () => {
    tg.down = true;
    const res = await call(api('getMe'));
    expect(res.status).toBe(502);
    expect(res.body).toContain('502 Bad Gateway');
    tg.down = false;
    expect((await call(api('getMe'))).status).toBe(200);
  });
});

describe('Telegram fake: updates', () => {
  it('builds chat_member, chat_join_request and my_chat_member updates like the samples, with increasing update_id', async () => {
    const link = (
      await call(api('createChatInviteLink'), { json: { chat_id: CHAT, name: 'cg-7f3a9c', member_limit: 1 } })
    ).body.result;
    const join = tg.chatMemberJoined({
      chatId: CHAT,
      user: { id: 777000111, first_name: 'Ann' },
      inviteLink: link.invite_link,
      date: 1763776800,
    });
    expect(join).toEqual({
      update_id: 815000001,
      chat_member: {
        chat: { id: CHAT, title: 'Main', type: 'channel' },
        from: { id: 777000111, is_bot: false, first_name: 'Ann' },
        date: 1763776800,
        old_chat_member: { status: 'left', user: { id: 777000111, is_bot: false, first_name: 'Ann' } },
        new_chat_member: { status: 'member', user: { id: 777000111, is_bot: false, first_name: 'Ann' } },
        invite_link: link,
      },
    });
    const request = tg.chatJoinRequest({ chatId: CHAT, user: { id: 777000222, first_name: 'Bo' } });
    expect(request).toMatchObject({
      update_id: 815000002,
      chat_join_request: { user_chat_id: 777000222, from: { first_name: 'Bo' } },
    });
    const left = tg.chatMemberLeft({ chatId: CHAT, user: { id: 777000111 }, kicked: true });
    expect(left).toMatchObject({
      update_id: 815000003,
      chat_member: { old_chat_member: { status: 'member' }, new_chat_member: { status: 'kicked' } },
    });
    const demoted = tg.myChatMember({
      chatId: CHAT,
      from: { id: 5000, first_name: 'Owner' },
      oldStatus: 'administrator',
      newStatus: 'member',
    });
    expect(demoted).toMatchObject({
      update_id: 815000004,
      my_chat_member: {
        old_chat_member: { status: 'administrator', can_invite_users: true },
        new_chat_member: { status: 'member', user: { id: DEFAULT_BOT.id, is_bot: true } },
      },
    });
    // the demotion is real for the fake: the bot may no longer create links
    const refused = await call(api('createChatInviteLink'), { json: { chat_id: CHAT } });
    expect(refused.body.description).toBe('Bad Request: not enough rights to manage chat invite link');
  });

  it('sendUpdate POSTs JSON with the secret header', async () => {
    const update = tg.chatJoinRequest({ chatId: CHAT, user: { id: 1 } });
    const res = await tg.sendUpdate(hookUrl, 'sekret', update);
    expect(res).toEqual({ status: 200, body: 'ok' });
    expect(delivered[0]?.headers['x-telegram-bot-api-secret-token']).toBe('sekret');
    expect(delivered[0]?.headers['content-type']).toBe('application/json');
    expect(delivered[0]?.body).toEqual(update);
  });

  it('a join carries its link or via_join_request, never both; after an approval, the link of the request', async () => {
    const link = (
      await call(api('createChatInviteLink'), { json: { chat_id: CHAT, creates_join_request: true } })
    ).body.result;
    expect(() =>
      tg.chatMemberJoined({
        chatId: CHAT,
        user: { id: 5 },
        inviteLink: link.invite_link,
        viaJoinRequest: true,
      }),
    ).toThrow(/never both/);
    tg.chatJoinRequest({ chatId: CHAT, user: { id: 5 }, inviteLink: link.invite_link });
    tg.chatJoinRequest({ chatId: CHAT, user: { id: 6 } });
    await call(api('approveChatJoinRequest'), { json: { chat_id: CHAT, user_id: 5 } });
    await call(api('approveChatJoinRequest'), { json: { chat_id: CHAT, user_id: 6 } });
    const withLink = tg.joinAfterApproval({ chatId: CHAT, user: { id: 5 } }) as any;
    expect(withLink.chat_member.invite_link.invite_link).toBe(link.invite_link);
    expect(withLink.chat_member).not.toHaveProperty('via_join_request');
    const withoutLink = tg.joinAfterApproval({ chatId: CHAT, user: { id: 6 } }) as any;
    expect(withoutLink.chat_member).toMatchObject({ via_join_request: true });
    expect(withoutLink.chat_member).not.toHaveProperty('invite_link');
  });

  it('public chats: join requests and joins come without the link that was opened', async () => {
    const link = (
      await call(api('createChatInviteLink'), { json: { chat_id: PUBLIC_CHAT, creates_join_request: true } })
    ).body.result;
    expect(
      (tg.chatJoinRequest({ chatId: PUBLIC_CHAT, user: { id: 7 }, inviteLink: link.invite_link }) as any)
        .chat_join_request,
    ).not.toHaveProperty('invite_link');
    expect(
      (tg.chatMemberJoined({ chatId: PUBLIC_CHAT, user: { id: 8 }, inviteLink: link.invite_link }) as any)
        .chat_member,
    ).not.toHaveProperty('invite_link');
  });

  it("delivers another admin's links with their second part replaced by '...', the bot's own whole", async () => {
    await call(api('setWebhook'), {
      json: { url: hookUrl, secret_token: 'abc', allowed_updates: ['chat_member', 'chat_join_request'] },
    });
    const own = (await call(api('createChatInviteLink'), { json: { chat_id: CHAT } })).body.result;
    await tg.deliverUpdate(
      TOKEN,
      tg.chatMemberJoined({ chatId: CHAT, user: { id: 9 }, inviteLink: own.invite_link }),
    );
    await tg.deliverUpdate(
      TOKEN,
      tg.chatJoinRequest({ chatId: CHAT, user: { id: 10 }, inviteLink: 'https://t.me/+OwnersVeryOwnLink1' }),
    );
    expect(delivered[0]!.body.chat_member.invite_link.invite_link).toBe(own.invite_link);
    expect(delivered[1]!.body.chat_join_request.invite_link.invite_link).toBe('https://t.me/+Owne...');
  });

  it('deliverUpdate uses the registered webhook and refuses chat_member unless it was asked for', async () => {
    await call(api('setWebhook'), { json: { url: hookUrl, secret_token: 'abc' } });
    const join = tg.chatMemberJoined({ chatId: CHAT, user: { id: 2 } });
    await expect(tg.deliverUpdate(TOKEN, join)).rejects.toThrow(/allowed_updates/);
    await tg.deliverUpdate(TOKEN, tg.chatJoinRequest({ chatId: CHAT, user: { id: 3 } }));
    await call(api('setWebhook'), {
      json: { url: hookUrl, secret_token: 'abc', allowed_updates: ['chat_member'] },
    });
    await tg.deliverUpdate(TOKEN, join);
    expect(delivered.map((d) => Object.keys(d.body)[1])).toEqual(['chat_join_request', 'chat_member']);
    expect(delivered.every((d) => d.headers['x-telegram-bot-api-secret-token'] === 'abc')).toBe(true);
  });
});
