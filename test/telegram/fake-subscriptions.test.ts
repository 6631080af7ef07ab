// The tests' Telegram fake on paid subscriptions, blocked bots and webhook errors, as strict as
// Telegram: createChatSubscriptionInviteLink's refusals (Bot API text; Client.cpp
// process_create_chat_subscription_invite_link_query; TDLib export_dialog_invite_link; the
// MTProto errors of messages.exportChatInvite), a paid join's until_date, the Bot API 10.2
// `subscription` update's shape, sendMessage to a user who blocked the bot, and getWebhookInfo's
// last error after a refused delivery.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_BOT,
  DEFAULT_CHAT,
  startTelegram,
  SUBSCRIPTION_PERIOD,
  type ChatInviteLink,
  type TelegramFake,
} from '../fakes/telegram.js';

const GROUP = -1002000000010;
const NO_RIGHTS = -1002000000011;
let tg: TelegramFake;
let hook: Server;
let hookUrl = '';
let hookStatus = 200;

beforeAll(async () => {
  tg = await startTelegram({
    chats: [
      DEFAULT_CHAT,
      {
        id: GROUP,
        title: 'Group',
        type: 'supergroup',
        admins: { [DEFAULT_BOT.id]: { can_invite_users: true } },
      },
      {
        id: NO_RIGHTS,
        title: 'Other',
        type: 'channel',
        admins: { [DEFAULT_BOT.id]: { can_invite_users: false } },
      },
    ],
  });
  hook = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(hookStatus).end());
  });
  await new Promise<void>((ok) => hook.listen(0, '127.0.0.1', ok));
  hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
});
afterAll(async () => {
  await tg?.close();
  await new Promise((ok) => hook?.close(ok));
});

async function api(method: string, body: unknown): Promise<[number, Record<string, unknown>]> {
  const res = await fetch(`${tg.url}/bot${DEFAULT_BOT.token}/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return [res.status, (await res.json()) as Record<string, unknown>];
}

describe('createChatSubscriptionInviteLink', () => {
  const base = {
    chat_id: DEFAULT_CHAT.id,
    subscription_period: SUBSCRIPTION_PERIOD,
    subscription_price: 250,
  };
  it.each<[string, Record<string, unknown>, string]>([
    ['no period', { subscription_period: undefined }, 'Bad Request: Invalid subscription pricing specified'],
    ['no price', { subscription_price: 0 }, 'Bad Request: Invalid subscription pricing specified'],
    [
      'a negative price (clamped to 0)',
      { subscription_price: -5 },
      'Bad Request: Invalid subscription pricing specified',
    ],
    ['a period of one day', { subscription_period: 86_400 }, 'Bad Request: SUBSCRIPTION_PERIOD_INVALID'],
    ['a price over 2500 Stars', { subscription_price: 2501 }, 'Bad Request: PRICING_CHAT_INVALID'],
    ['a supergroup', { chat_id: GROUP }, 'Bad Request: PRICING_CHAT_INVALID'],
    [
      'a channel the bot may not invite to',
      { chat_id: NO_RIGHTS },
      'Bad Request: not enough rights to manage chat invite link',
    ],
    ['an unknown chat', { chat_id: -1009999 }, 'Bad Request: chat not found'],
  ])('refuses %s', async (_what, change, description) => {
    const [status, body] = await api('createChatSubscriptionInviteLink', { ...base, ...change });
    expect([status, body]).toEqual([400, { ok: false, error_code: 400, description }]);
  });

  it('makes a link that carries its price, with the name cut to 32 characters', async () => {
    const [status, body] = await api('createChatSubscriptionInviteLink', {
      ...base,
      subscription_price: '2500',
      name: `cg-${'x'.repeat(40)}`,
    });
    expect(status).toBe(200);
    expect(body.result).toEqual({
      invite_link: expect.stringMatching(/^https:\/\/t\.me\/\+[A-Za-z0-9_-]{16}$/),
      creator: expect.objectContaining({ id: DEFAULT_BOT.id, is_bot: true }),
      creates_join_request: false,
      is_primary: false,
      is_revoked: false,
      name: `cg-${'x'.repeat(29)}`,
      subscription_period: SUBSCRIPTION_PERIOD,
      subscription_price: 2500,
    });
  });

  it("a paid join through it carries the link's price and the paid period's end", async () => {
    const [, body] = await api('createChatSubscriptionInviteLink', base);
    const link = body.result as ChatInviteLink;
    const date = 1_790_000_000;
    const update = tg.paidJoin({
      chatId: DEFAULT_CHAT.id,
      user: { id: 555_000_001 },
      inviteLink: link.invite_link,
      date,
    });
    expect(update).toMatchObject({
      chat_member: {
        invite_link: {
          invite_link: link.invite_link,
          subscription_price: 250,
          subscription_period: SUBSCRIPTION_PERIOD,
        },
        old_chat_member: { status: 'left' },
        new_chat_member: { status: 'member', until_date: date + SUBSCRIPTION_PERIOD },
      },
    });
    const [, plain] = await api('createChatInviteLink', { chat_id: DEFAULT_CHAT.id });
    expect(() =>
      tg.paidJoin({
        chatId: DEFAULT_CHAT.id,
        user: { id: 555_000_002 },
        inviteLink: (plain.result as ChatInviteLink).invite_link,
      }),
    ).toThrow(/subscription link/);
  });
});

it('builds the Bot API 10.2 subscription update', () => {
  expect(
    tg.subscriptionUpdated({ user: { id: 555_000_003 }, invoicePayload: 'plan-pro', state: 'failed' }),
  ).toEqual({
    update_id: expect.any(Number),
    subscription: {
      user: { id: 555_000_003, is_bot: false, first_name: 'User555000003' },
      invoice_payload: 'plan-pro',
      state: 'failed',
    },
  });
});

it('refuses sendMessage to a user who blocked the bot', async () => {
  tg.startCommand({ user: { id: 555_000_004 } });
  expect((await api('sendMessage', { chat_id: 555_000_004, text: 'hi' }))[0]).toBe(200);
  const blocked = tg.blockBot({ user: { id: 555_000_004 } });
  expect(blocked).toMatchObject({
    my_chat_member: {
      chat: { id: 555_000_004, type: 'private' },
      old_chat_member: { status: 'member' },
      new_chat_member: { status: 'kicked' },
    },
  });
  expect(await api('sendMessage', { chat_id: 555_000_004, text: 'hi' })).toEqual([
    403,
    { ok: false, error_code: 403, description: 'Forbidden: bot was blocked by the user' },
  ]);
});

it("getWebhookInfo tells a refused delivery's error, as Telegram words it", async () => {
  expect((await api('setWebhook', { url: hookUrl, allowed_updates: ['message'] }))[0]).toBe(200);
  expect((await api('getWebhookInfo', {}))[1].result).not.toHaveProperty('last_error_message');
  hookStatus = 401;
  expect(
    (await tg.deliverUpdate(DEFAULT_BOT.token, tg.startCommand({ user: { id: 555_000_005 } }))).status,
  ).toBe(401);
  expect((await api('getWebhookInfo', {}))[1].result).toMatchObject({
    last_error_date: expect.any(Number),
    last_error_message: 'Wrong response from the webhook: 401 Unauthorized',
  });
  hookStatus = 200;
});
