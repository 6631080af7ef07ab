// Chats as Telegram really has them: a basic group's upgrade to a supergroup (a new id, told by
// migrate_to_chat_id), updates from chats no channel is in, administrators appointed directly, and
// the bot's rights re-checked with getChatMember after a refusal and periodically.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { checkRights } from '../../backend/domain/bot-api/rights-check.js';
import { createLogger } from '../../backend/log.js';
import { DEFAULT_BOT, type FakeChat } from '../fakes/index.js';
import { CHATS, eventually, newUser, startWorld, type World } from './world.js';

let w: World;
const logLines: { level: number; msg: string; chatId?: number }[] = [];

beforeAll(async () => {
  w = await startWorld();
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(JSON.parse(chunk.toString()));
      done();
    },
  });
  w.app.deps.log = createLogger('warn', sink);
});
afterAll(async () => {
  await w.close();
});
beforeEach(() => {
  logLines.length = 0;
});

/** A channel added before basic groups were refused: inserted as it was stored then. */
async function legacyBasicGroup(chatId: number): Promise<string> {
  const chat: FakeChat = {
    id: chatId,
    title: `Basic ${chatId}`,
    type: 'group',
    admins: { [DEFAULT_BOT.id]: { can_invite_users: true } },
  };
  w.fakes.telegram.chats.set(chatId, chat);
  const { rows } = await w.db.pool.query<{ id: string }>(
    `INSERT INTO channels (site_id, bot_id, telegram_chat_id, title, bot_status, bot_is_admin, bot_can_invite, bot_status_at, pool_target)
     VALUES ($1, $2, $3, $4, 'administrator', true, true, now(), 1) RETURNING id`,
    [w.siteId, w.botId, chatId, chat.title],
  );
  return rows[0]!.id;
}

const chatIdOf = async (channelId: string) =>
  Number(
    (
      await w.db.pool.query<{ c: string }>('SELECT telegram_chat_id::text AS c FROM channels WHERE id = $1', [
        channelId,
      ])
    ).rows[0]!.c,
  );

describe('a basic group upgraded to a supergroup', () => {
  it('migrate_to_chat_id in a Bot API refusal moves the channel to the new id; its joins are then found', async () => {
    const channelId = await legacyBasicGroup(-4000000071);
    w.fakes.telegram.upgradeToSupergroup(-4000000071, -1004000000071);
    // The pool refill asks for a link in the old chat; Telegram answers with the new id.
    const outcome = await refillChannelPool(w.app.deps, channelId);
    expect(outcome.error).toMatch(/group chat was upgraded to a supergroup chat/);
    expect(await chatIdOf(channelId)).toBe(-1004000000071);
    // The next refill creates links in the supergroup.
    expect((await refillChannelPool(w.app.deps, channelId)).created).toBe(1);
    expect(w.fakes.telegram.links(-1004000000071)).toHaveLength(1);
    const user = newUser();
    await w.deliver(w.fakes.telegram.chatMemberJoined({ chatId: -1004000000071, user }));
    expect(
      await w.count('memberships WHERE channel_id = $1 AND telegram_user_id = $2', [channelId, user.id]),
    ).toBe(1);
  });

  it('migrate_to_chat_id in a service message moves the channel too', async () => {
    const channelId = await legacyBasicGroup(-4000000072);
    const { inOld } = w.fakes.telegram.upgradeToSupergroup(-4000000072, -1004000000072);
    expect((await w.fakes.telegram.sendUpdate(w.webhookUrl, w.secret, inOld)).status).toBe(200);
    expect(await chatIdOf(channelId)).toBe(-1004000000072);
  });

  it('a migration to a chat another channel of the bot already follows leaves both as they are, and the update is still recorded', async () => {
    const first = await legacyBasicGroup(-4000000073);
    const second = await legacyBasicGroup(-4000000074);
    // The first group was upgraded (and followed) before; now the second reports the same supergroup.
    w.fakes.telegram.upgradeToSupergroup(-4000000073, -1004000000073);
    await refillChannelPool(w.app.deps, first);
    expect(await chatIdOf(first)).toBe(-1004000000073);
    const { inOld } = w.fakes.telegram.upgradeToSupergroup(-4000000074, -1004000000073);
    expect((await w.fakes.telegram.sendUpdate(w.webhookUrl, w.secret, inOld)).status).toBe(200);
    expect(await chatIdOf(second)).toBe(-4000000074);
    expect(
      await w.count('telegram_updates WHERE update_id = $1', [(inOld as { update_id: number }).update_id]),
    ).toBe(1);
  });
});

describe('updates from chats no channel is in', () => {
  it('are counted in a metric and logged at warn once per chat', async () => {
    const metric = async () => {
      const text = await w.app.deps.metrics.registry.getSingleMetricAsString(
        'capigram_telegram_unknown_chat_updates_total',
      );
      return Number(/kind="chat_member"\} (\d+)/.exec(text)?.[1] ?? 0);
    };
    const before = await metric();
    const update = (id: number, chatId: number) => ({
      update_id: id,
      chat_member: {
        chat: { id: chatId, type: 'supergroup', title: 'Elsewhere' },
        from: { id: 5, is_bot: false, first_name: 'A' },
        date: 1_763_776_900,
        old_chat_member: { status: 'left', user: { id: 5, is_bot: false, first_name: 'A' } },
        new_chat_member: { status: 'member', user: { id: 5, is_bot: false, first_name: 'A' } },
      },
    });
    for (const [id, chat] of [
      [991_000_001, -1009000000001],
      [991_000_002, -1009000000001],
      [991_000_003, -1009000000002],
    ] as const) {
      expect((await w.fakes.telegram.sendUpdate(w.webhookUrl, w.secret, update(id, chat))).status).toBe(200);
    }
    expect(await metric()).toBe(before + 3);
    const warned = logLines.filter((l) => l.level === 40 && /no channel of this bot is in/.test(l.msg));
    expect(warned.map((l) => l.chatId)).toEqual([-1009000000001, -1009000000002]);
  });
});

describe('administrators appointed directly', () => {
  it('left → administrator is neither a join nor a lead', async () => {
    const user = newUser();
    expect((await w.deliver(w.fakes.telegram.adminAppointed({ chatId: CHATS.main.id, user }))).status).toBe(
      200,
    );
    expect(await w.count('memberships WHERE telegram_user_id = $1', [user.id])).toBe(0);
    expect(await w.count('leads WHERE telegram_user_id = $1', [user.id])).toBe(0);
  });
});

describe("the bot's rights, re-checked", () => {
  it('a refusal ("not enough rights") queues a getChatMember check, which restores a bot that was promoted meanwhile', async () => {
    const chatId = CHATS.custom.id;
    const channelId = w.channels.custom;
    w.fakes.telegram.setBotRights(chatId, DEFAULT_BOT.id, { can_invite_users: false });
    const outcome = await refillChannelPool(w.app.deps, channelId);
    expect(outcome.error).toMatch(/not enough rights/);
    // The check ran at once and found what Telegram said: still no right to invite.
    await eventually(
      async () => w.fakes.telegram.calls('getChatMember').some((p) => Number(p.chat_id) === chatId),
      5000,
      'the rights check',
    );
    await eventually(
      async () =>
        (await w.count(`graphile_worker.jobs WHERE task_identifier = 'telegram_check_rights'`)) === 0,
      5000,
      'the check to finish',
    );
    const row = async () =>
      (await w.db.pool.query('SELECT bot_can_invite FROM channels WHERE id = $1', [channelId])).rows[0];
    expect(await row()).toEqual({ bot_can_invite: false });
    // Promoted, but no my_chat_member arrives: the periodic pass finds it.
    w.fakes.telegram.setBotRights(chatId, DEFAULT_BOT.id, { can_invite_users: true });
    const checked = await checkRights(w.app.deps, {});
    expect(checked).toContainEqual({ channelId, status: 'administrator', canInvite: true });
    expect(await row()).toEqual({ bot_can_invite: true });
    expect((await refillChannelPool(w.app.deps, channelId)).created).toBeGreaterThan(0);
  });

  it('a join-request channel whose chat became public is found by the check and warned about', async () => {
    const chat = w.fakes.telegram.chats.get(CHATS.requests.id)!;
    chat.username = 'requests_public';
    await checkRights(w.app.deps, { channelId: w.channels.requests });
    const { rows } = await w.db.pool.query('SELECT chat_is_public FROM channels WHERE id = $1', [
      w.channels.requests,
    ]);
    expect(rows[0]).toEqual({ chat_is_public: true });
    expect(
      logLines.filter((l) => l.level === 40 && /join-request mode is now a public chat/.test(l.msg)),
    ).toHaveLength(1);
  });
});
