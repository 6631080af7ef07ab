// Join-request rules per channel, end to end: the real webhook and worker, the fake Telegram, and
// the real CLI (`channel update|requests|approve|decline`) on the same database.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_SECRET_KEY } from '../harness/app.js';
import { scratchDir } from '../harness/scratch.js';
import { runWith } from '../cli/harness.js';
import { DEFAULT_BOT } from '../fakes/index.js';
import { CHATS, eventually, newUser, startWorld, type World } from './world.js';

let w: World;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  w = await startWorld();
  env = {
    PATH: process.env.PATH,
    DATABASE_URL: w.db.url,
    DATA_DIR: scratchDir('cli'),
    SECRET_KEY: TEST_SECRET_KEY.toString('hex'),
    TELEGRAM_API_URL: w.fakes.env.TELEGRAM_API_URL,
    PUBLIC_URL: w.app.url,
  };
});
afterAll(async () => {
  await w.close();
});

const chatId = CHATS.requests.id;
const tg = () => w.fakes.telegram;

async function cli<T = Record<string, any>>(...argv: string[]): Promise<T> {
  const r = await runWith(env, [...argv, '--json']);
  expect(r.code, r.stderr).toBe(0);
  return r.json<T>();
}
async function cliRefused(...argv: string[]): Promise<string> {
  const r = await runWith(env, argv);
  expect(r.code, r.stdout).toBe(1);
  return r.stderr;
}
const setRule = (...flags: string[]) => cli('channel', 'update', '--channel', w.channels.requests, ...flags);
const held = () =>
  cli<{ requests: { telegramUserId: number; attributed: boolean; requestedAt: string }[] }>(
    'channel',
    'requests',
    '--channel',
    w.channels.requests,
  );
const approvalsOf = (userId: number) => tg().approvals.filter((a) => a.userId === userId);
const approveCallsOf = (userId: number) =>
  tg()
    .calls('approveChatJoinRequest')
    .filter((p) => Number(p.user_id) === userId);
const conversionsOf = (userId: number) => w.count('conversions WHERE telegram_user_id = $1', [userId]);
const telegramIdle = () =>
  eventually(
    async () =>
      (await w.count(
        `graphile_worker.jobs WHERE task_identifier LIKE 'telegram_%' AND attempts < max_attempts`,
      )) === 0,
    10_000,
    'telegram jobs',
  );

describe('hold', () => {
  it('leaves a request through our link waiting until channel approve; the approval then credits the visit', async () => {
    await setRule('--join-requests', 'hold');
    const { channels } = await cli<{
      channels: { channelId: string; joinRequests: string; welcomeText: boolean }[];
    }>('channel', 'list', '--site', w.siteId);
    expect(channels.find((c) => c.channelId === w.channels.requests)).toMatchObject({
      joinRequests: 'hold',
      welcomeText: false,
    });
    // A new channel's default (the contract's): every request approved.
    expect(channels.find((c) => c.channelId === w.channels.main)).toMatchObject({
      joinRequests: 'approve-all',
    });
    const inv = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    const requestedAt = Math.floor(Date.now() / 1000);
    await w.deliver(tg().chatJoinRequest({ chatId, user, inviteLink: inv.inviteLink, date: requestedAt }));
    await telegramIdle();
    expect(approveCallsOf(user.id)).toEqual([]);
    expect(await conversionsOf(user.id)).toBe(0);
    expect((await held()).requests).toEqual([
      {
        telegramUserId: user.id,
        attributed: true,
        requestedAt: new Date(requestedAt * 1000).toISOString(),
        status: 'held',
        reason: null,
      },
    ]);

    expect(
      await cli(
        'channel',
        'approve',
        '--channel',
        w.channels.requests,
        '--telegram-user-id',
        String(user.id),
      ),
    ).toEqual({ telegramUserId: user.id, status: 'approved' });
    expect(approvalsOf(user.id)).toHaveLength(1);
    // The approval is the join: credited to the visit of the link, as Capigram's own approval is.
    expect(
      await w.count('conversions WHERE telegram_user_id = $1 AND visit_id = $2', [user.id, inv.visitId]),
    ).toBe(1);
    expect((await held()).requests).toEqual([]);

    // Approving it again: Telegram says it is a member already, which is what was asked.
    expect(
      await cli(
        'channel',
        'approve',
        '--channel',
        w.channels.requests,
        '--telegram-user-id',
        String(user.id),
      ),
    ).toMatchObject({ status: 'approved' });
    expect(await conversionsOf(user.id)).toBe(1);
  });

  it('channel decline declines with Telegram; a request that no longer exists gets a clear refusal', async () => {
    const user = newUser();
    await w.deliver(tg().chatJoinRequest({ chatId, user }));
    expect((await held()).requests.map((r) => [r.telegramUserId, r.attributed])).toEqual([[user.id, false]]);
    expect(
      await cli(
        'channel',
        'decline',
        '--channel',
        w.channels.requests,
        '--telegram-user-id',
        String(user.id),
      ),
    ).toEqual({ telegramUserId: user.id, status: 'declined' });
    expect(tg().declines.filter((d) => d.userId === user.id)).toHaveLength(1);
    expect((await held()).requests).toEqual([]);
    const again = await cliRefused(
      'channel',
      'decline',
      '--channel',
      w.channels.requests,
      '--telegram-user-id',
      String(user.id),
    );
    expect(again).toMatch(
      /no pending join request.*HIDE_REQUESTER_MISSING.*approved or declined already, or withdrawn/,
    );
    const stranger = await cliRefused(
      'channel',
      'approve',
      '--channel',
      w.channels.requests,
      '--telegram-user-id',
      '424242',
    );
    expect(stranger).toMatch(/user 424242 has no pending join request/);
  });
});

describe("held, then decided in Telegram's app", () => {
  it('leaves the list when the join comes', async () => {
    await setRule('--join-requests', 'hold');
    const user = newUser();
    await w.deliver(tg().chatJoinRequest({ chatId, user }));
    expect((await held()).requests.map((r) => r.telegramUserId)).toContain(user.id);
    await w.deliver(tg().chatMemberJoined({ chatId, user, viaJoinRequest: true }));
    expect((await held()).requests.map((r) => r.telegramUserId)).not.toContain(user.id);
  });
});

describe('approve-attributed', () => {
  it('approves the request through our link and holds the other', async () => {
    await setRule('--join-requests', 'approve-attributed');
    const inv = await w.invitation('requests', { joinRequest: true });
    const ours = newUser();
    const other = newUser();
    await w.deliver(tg().chatJoinRequest({ chatId, user: ours, inviteLink: inv.inviteLink }));
    await w.deliver(
      tg().chatJoinRequest({ chatId, user: other, inviteLink: 'https://t.me/+OwnersOwnLink0002' }),
    );
    await tg().waitFor(() => approvalsOf(ours.id).length === 1, 5000);
    await eventually(async () => (await conversionsOf(ours.id)) === 1, 5000, 'the conversion');
    await telegramIdle();
    expect(approveCallsOf(other.id)).toEqual([]);
    expect((await held()).requests).toEqual([
      expect.objectContaining({ telegramUserId: other.id, attributed: false }),
    ]);
    await cli('channel', 'decline', '--channel', w.channels.requests, '--telegram-user-id', String(other.id));
  });
});

describe('approve-all', () => {
  it('approves a request through any link; a link that is not ours joins as organic', async () => {
    await setRule('--join-requests', 'approve-all');
    const user = newUser();
    await w.deliver(tg().chatJoinRequest({ chatId, user, inviteLink: 'https://t.me/+OwnersOwnLink0003' }));
    await tg().waitFor(() => approvalsOf(user.id).length === 1, 5000);
    await telegramIdle();
    expect(await conversionsOf(user.id)).toBe(0);
    expect((await held()).requests).toEqual([]);
    const { rows } = await w.db.pool.query<{ request_status: string }>(
      `SELECT request_status FROM memberships WHERE telegram_user_id = $1 AND kind = 'join_request'`,
      [user.id],
    );
    expect(rows).toEqual([{ request_status: 'approved' }]);
  });
});

describe('welcome text', () => {
  const TEXT = 'Welcome! Your request is being reviewed — the first post is pinned.';

  it("reaches the request's user_chat_id while the request waits, before the approval", async () => {
    await setRule('--join-requests', 'approve-all', '--welcome-text', TEXT);
    const inv = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    const update = tg().chatJoinRequest({ chatId, user, inviteLink: inv.inviteLink });
    await w.deliver(update);
    await tg().waitFor(() => approvalsOf(user.id).length === 1, 8000);
    const { user_chat_id: userChatId } = (update as { chat_join_request: { user_chat_id: number } })
      .chat_join_request;
    const sent = tg().messages.filter((m) => m.chatId === userChatId);
    expect(sent.map((m) => m.text)).toEqual([TEXT]);
    // Telegram only lets the bot write until the request is decided: the welcome went first.
    expect(sent[0]!.at).toBeLessThan(approvalsOf(user.id)[0]!.at);
    await eventually(async () => (await conversionsOf(user.id)) === 1, 5000, 'the conversion');
  });

  it('reaches a held requester too, who stays held', async () => {
    await setRule('--join-requests', 'hold');
    const user = newUser();
    await w.deliver(tg().chatJoinRequest({ chatId, user }));
    await tg().waitFor(() => tg().messages.some((m) => m.chatId === user.id), 5000);
    await telegramIdle();
    expect(approveCallsOf(user.id)).toEqual([]);
    expect((await held()).requests.map((r) => r.telegramUserId)).toEqual([user.id]);
    await cli('channel', 'decline', '--channel', w.channels.requests, '--telegram-user-id', String(user.id));
  });

  it('is not sent for a request older than the 5 minutes Telegram allows; the approval still comes', async () => {
    await setRule('--join-requests', 'approve-all');
    const user = newUser();
    await w.deliver(tg().chatJoinRequest({ chatId, user, date: Math.floor(Date.now() / 1000) - 6 * 60 }));
    await tg().waitFor(() => approvalsOf(user.id).length === 1, 8000);
    expect(
      tg()
        .calls('sendMessage')
        .filter((p) => Number(p.chat_id) === user.id),
    ).toEqual([]);
  });

  it('--clear welcome-text stops it', async () => {
    await cli('channel', 'update', '--channel', w.channels.requests, '--clear', 'welcome-text');
    const user = newUser();
    await w.deliver(tg().chatJoinRequest({ chatId, user }));
    await tg().waitFor(() => approvalsOf(user.id).length === 1, 8000);
    expect(
      tg()
        .calls('sendMessage')
        .filter((p) => Number(p.chat_id) === user.id),
    ).toEqual([]);
    await setRule('--join-requests', 'approve-attributed');
  });
});

describe('refused settings', () => {
  it("an unknown rule and a welcome text over Telegram's 4096 characters are refused", async () => {
    expect(
      await cliRefused(
        'channel',
        'update',
        '--channel',
        w.channels.requests,
        '--join-requests',
        'approve-some',
      ),
    ).toMatch(/--join-requests: .*approve-all.*approve-attributed.*hold/);
    expect(
      await cliRefused(
        'channel',
        'update',
        '--channel',
        w.channels.requests,
        '--welcome-text',
        'x'.repeat(4097),
      ),
    ).toMatch(/--welcome-text: .*4096/);
  });
});

describe('an approval Telegram refuses', () => {
  const requests = () =>
    cli<{ requests: { telegramUserId: number; status: string; reason: string | null }[] }>(
      'channel',
      'requests',
      '--channel',
      w.channels.requests,
    );
  const rowOf = async (userId: number) =>
    (await requests()).requests.find((r) => r.telegramUserId === userId);

  it.each(['USER_CHANNELS_TOO_MUCH', 'CHANNELS_TOO_MUCH'] as const)(
    '%s: listed as failed with the reason, and approved on a retry once the user can join',
    async (error) => {
      await setRule('--join-requests', 'approve-all');
      const inv = await w.invitation('requests', { joinRequest: true });
      const user = newUser();
      tg().chatLimitReached.set(user.id, error);
      await w.deliver(tg().chatJoinRequest({ chatId, user, inviteLink: inv.inviteLink }));
      await eventually(async () => (await rowOf(user.id))?.status === 'failed', 10_000, 'the failed request');
      expect(await rowOf(user.id)).toMatchObject({
        status: 'failed',
        reason: expect.stringContaining(error),
      });
      expect(await conversionsOf(user.id)).toBe(0);

      // The operator tries again while Telegram still refuses: refused, still listed.
      const refused = await cliRefused(
        'channel',
        'approve',
        '--channel',
        w.channels.requests,
        '--telegram-user-id',
        String(user.id),
      );
      expect(refused).toContain(error === 'USER_CHANNELS_TOO_MUCH' ? 'too many channels' : error);
      expect((await rowOf(user.id))?.status).toBe('failed');

      // The user left some chats: the retry approves, credits the visit, and the row goes.
      tg().chatLimitReached.delete(user.id);
      expect(
        await cli(
          'channel',
          'approve',
          '--channel',
          w.channels.requests,
          '--telegram-user-id',
          String(user.id),
        ),
      ).toEqual({ telegramUserId: user.id, status: 'approved' });
      expect(await rowOf(user.id)).toBeUndefined();
      expect(
        await w.count('conversions WHERE telegram_user_id = $1 AND visit_id = $2', [user.id, inv.visitId]),
      ).toBe(1);
    },
  );

  it('a missing right to add members: failed, a rights check queued, and a retry works once the right is back', async () => {
    await setRule('--join-requests', 'approve-all');
    const user = newUser();
    const botId = DEFAULT_BOT.id;
    const rightsAsked = () =>
      tg()
        .calls('getChatMember')
        .filter((p) => Number(p.chat_id) === chatId && Number(p.user_id) === botId).length;
    tg().setBotRights(chatId, botId, { can_invite_users: false });
    try {
      const before = rightsAsked();
      await w.deliver(tg().chatJoinRequest({ chatId, user }));
      await eventually(async () => (await rowOf(user.id))?.status === 'failed', 10_000, 'the failed request');
      expect((await rowOf(user.id))?.reason).toContain('not enough rights to add a new member');
      // The refusal had the channel's rights checked again (getChatMember of the bot).
      await eventually(async () => rightsAsked() > before, 10_000, 'the rights check');
    } finally {
      tg().setBotRights(chatId, botId, { can_invite_users: true });
    }
    await telegramIdle();
    expect(
      await cli(
        'channel',
        'decline',
        '--channel',
        w.channels.requests,
        '--telegram-user-id',
        String(user.id),
      ),
    ).toEqual({ telegramUserId: user.id, status: 'declined' });
    expect(await rowOf(user.id)).toBeUndefined();
  });
});
