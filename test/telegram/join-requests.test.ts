// chat_join_request through the real webhook and worker: our links are approved by a job (Telegram
// flood control and outages included), the conversion waits for the join; other links are left
// to the channel's owner.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approveJobKey } from '../../backend/domain/telegram/actions.js';
import { CHATS, eventually, newUser, startWorld, type World } from './world.js';

let w: World;

beforeAll(async () => {
  w = await startWorld();
});
afterAll(async () => {
  await w.close();
});

const chatId = CHATS.requests.id;

async function conversionsOf(userId: number) {
  const { rows } = await w.db.pool.query<{ id: string; visit_id: string; event_type: string; channel_id: string }>(
    'SELECT id, visit_id, event_type, channel_id FROM conversions WHERE telegram_user_id = $1',
    [userId],
  );
  return rows;
}

async function membershipsOf(userId: number) {
  const { rows } = await w.db.pool.query<{ kind: string; invitation_id: string | null; visit_id: string | null; attributed: boolean; conversion_id: string | null; via_join_request: boolean }>(
    'SELECT kind, invitation_id, visit_id, attributed, conversion_id, via_join_request FROM memberships WHERE telegram_user_id = $1 ORDER BY created_at',
    [userId],
  );
  return rows;
}

const approvalsOf = (userId: number) => w.fakes.telegram.approvals.filter((a) => a.userId === userId);
const approveCallsOf = (userId: number) => w.fakes.telegram.calls('approveChatJoinRequest').filter((p) => Number(p.user_id) === userId);
const approveWaiting = (userId: number) => w.count('graphile_worker.jobs WHERE key = $1', [approveJobKey({ botId: w.botId, chatId, userId })]);
/** No Telegram action of the webhook is waiting or running. */
const telegramIdle = () => eventually(async () => (await w.count(`graphile_worker.jobs WHERE task_identifier LIKE 'telegram_%'`)) === 0, 10_000, 'telegram jobs to finish');

describe('a join request through one of our links', () => {
  it('is recorded and approved, and the join that follows is attributed to the visit', async () => {
    const inv = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    expect((await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: inv.inviteLink }))).status).toBe(200);
    expect(await membershipsOf(user.id)).toEqual([expect.objectContaining({ kind: 'join_request', invitation_id: inv.invitationId, visit_id: inv.visitId, attributed: false })]);
    expect(await conversionsOf(user.id)).toEqual([]);

    await w.fakes.telegram.waitFor(() => approvalsOf(user.id).length === 1, 5000);
    expect(approvalsOf(user.id)[0]).toMatchObject({ chatId, userId: user.id });

    // Telegram then reports the join, with the link and via_join_request.
    await w.deliver(w.fakes.telegram.chatMemberJoined({ chatId, user, inviteLink: inv.inviteLink, viaJoinRequest: true }));
    const [c, ...more] = await conversionsOf(user.id);
    expect(more).toEqual([]);
    expect(c).toMatchObject({ visit_id: inv.visitId, event_type: 'Lead', channel_id: w.channels.requests });
    expect((await membershipsOf(user.id)).map((m) => [m.kind, m.attributed, m.via_join_request, m.conversion_id])).toEqual([
      ['join_request', false, false, null],
      ['join', true, true, c!.id],
    ]);
    await w.fakes.telegram.waitFor(() => w.fakes.telegram.revoked.some((l) => l.invite_link === inv.inviteLink), 5000);
  });

  it('a join carrying only via_join_request is matched to the recorded request', async () => {
    const inv = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: inv.inviteLink }));
    await w.fakes.telegram.waitFor(() => approvalsOf(user.id).length === 1, 5000);
    await w.deliver(w.fakes.telegram.chatMemberJoined({ chatId, user, viaJoinRequest: true }));
    expect(await conversionsOf(user.id)).toEqual([expect.objectContaining({ visit_id: inv.visitId })]);
    expect((await membershipsOf(user.id))[1]).toMatchObject({ kind: 'join', invitation_id: inv.invitationId, attributed: true });
  });

  it('the latest request decides when a user asked through several of our links', async () => {
    const first = await w.invitation('requests', { joinRequest: true });
    const second = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    const now = Math.floor(Date.now() / 1000);
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: first.inviteLink, date: now - 60 }));
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: second.inviteLink, date: now }));
    await w.deliver(w.fakes.telegram.chatMemberJoined({ chatId, user, viaJoinRequest: true }));
    expect(await conversionsOf(user.id)).toEqual([expect.objectContaining({ visit_id: second.visitId })]);
  });
});

describe('join requests Capigram leaves to the channel owner', () => {
  it('a request through a link that is not ours is recorded and not approved; its join is organic', async () => {
    const user = newUser();
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: 'https://t.me/+OwnersOwnLink0001' }));
    expect(await membershipsOf(user.id)).toEqual([expect.objectContaining({ kind: 'join_request', invitation_id: null })]);
    expect(await approveWaiting(user.id)).toBe(0);
    expect(approveCallsOf(user.id)).toEqual([]);
    // The owner approves by hand; the join arrives via the request, which was not ours.
    await w.deliver(w.fakes.telegram.chatMemberJoined({ chatId, user, viaJoinRequest: true }));
    expect(await conversionsOf(user.id)).toEqual([]);
    expect((await membershipsOf(user.id))[1]).toMatchObject({ kind: 'join', attributed: false, invitation_id: null });
  });

  it('a request without any link is recorded and not approved', async () => {
    const user = newUser();
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user }));
    expect(await membershipsOf(user.id)).toEqual([expect.objectContaining({ kind: 'join_request', invitation_id: null })]);
    expect(await approveWaiting(user.id)).toBe(0);
    expect(approveCallsOf(user.id)).toEqual([]);
  });

  it('a request for a chat with no channel of this bot does nothing', async () => {
    const user = newUser();
    const update = { update_id: 990_000_001, chat_join_request: { chat: { id: -1007777777777, type: 'channel' }, from: { id: user.id, is_bot: false, first_name: 'X' }, user_chat_id: user.id, date: 1_763_776_900 } };
    expect((await w.fakes.telegram.sendUpdate(w.webhookUrl, w.secret, update)).status).toBe(200);
    expect(await membershipsOf(user.id)).toEqual([]);
    expect(await approveWaiting(user.id)).toBe(0);
  });
});

describe('approving when Telegram is not cooperating', () => {
  it('a 429 is honoured: the approval is retried after retry_after', async () => {
    await telegramIdle();
    const inv = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    w.fakes.telegram.floodNext(1, 1);
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: inv.inviteLink }));
    await w.fakes.telegram.waitFor(() => approvalsOf(user.id).length === 1, 8000);
    const attempts = w.fakes.telegram.received.filter((r) => r.path.endsWith('/approveChatJoinRequest') && Number((r.body as { user_id: unknown }).user_id) === user.id);
    expect(attempts.map((a) => a.status)).toEqual([429, 200]);
    expect(attempts[1]!.receivedAt - attempts[0]!.receivedAt).toBeGreaterThanOrEqual(950);
    // The bot's flood wait is shared with everything else that calls Telegram for it.
    const { rows } = await w.db.pool.query<{ flood_wait_until: Date | null }>('SELECT flood_wait_until FROM bots WHERE id = $1', [w.botId]);
    expect(rows[0]!.flood_wait_until).not.toBeNull();
  });

  it('a bot already in flood wait is not called until the wait is over', async () => {
    await telegramIdle();
    await w.db.pool.query(`UPDATE bots SET flood_wait_until = now() + interval '1 second' WHERE id = $1`, [w.botId]);
    const inv = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    const sentAt = performance.now();
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: inv.inviteLink }));
    await w.fakes.telegram.waitFor(() => approvalsOf(user.id).length === 1, 8000);
    const attempts = w.fakes.telegram.received.filter((r) => r.path.endsWith('/approveChatJoinRequest') && Number((r.body as { user_id: unknown }).user_id) === user.id);
    expect(attempts.map((a) => a.status)).toEqual([200]);
    expect(attempts[0]!.receivedAt - sentAt).toBeGreaterThanOrEqual(800);
  });

  it('a Telegram outage (5xx) is retried until the approval goes through', async () => {
    await telegramIdle();
    const inv = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    w.fakes.telegram.failNext(1, { type: 'status', status: 502, gateway: true });
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: inv.inviteLink }));
    await w.fakes.telegram.waitFor(() => approvalsOf(user.id).length === 1, 10_000);
    expect(approveCallsOf(user.id)).toHaveLength(2);
  });

  it('a refusal that retrying cannot fix (request already gone) is given up after one call', async () => {
    const inv = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    // Built by hand, so the fake Telegram has no pending request to approve.
    const update = {
      update_id: 990_000_002,
      chat_join_request: { chat: { id: chatId, type: 'channel' }, from: { id: user.id, is_bot: false, first_name: 'Y' }, user_chat_id: user.id, date: 1_763_776_900, invite_link: { invite_link: inv.inviteLink } },
    };
    await w.fakes.telegram.sendUpdate(w.webhookUrl, w.secret, update);
    await eventually(async () => approveCallsOf(user.id).length === 1 && (await approveWaiting(user.id)) === 0, 5000, 'the approval attempt');
    await telegramIdle();
    expect(approveCallsOf(user.id)).toHaveLength(1);
    expect(approvalsOf(user.id)).toEqual([]);
  });
});
