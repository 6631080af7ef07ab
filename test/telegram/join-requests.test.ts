// chat_join_request through the real webhook and worker: our links are approved by a job (Telegram
// flood control and outages included), and the approval records the join and its conversion; the
// chat_member update that may follow adds nothing. Other links are left to the channel's owner.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approveJobKey } from '../../backend/domain/bot-api/actions.js';
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
  const { rows } = await w.db.pool.query<{
    id: string;
    visit_id: string;
    event_type: string;
    channel_id: string;
  }>('SELECT id, visit_id, event_type, channel_id FROM conversions WHERE telegram_user_id = $1', [userId]);
  return rows;
}

async function membershipsOf(userId: number) {
  const { rows } = await w.db.pool.query<{
    kind: string;
    invitation_id: string | null;
    visit_id: string | null;
    attributed: boolean;
    conversion_id: string | null;
    via_join_request: boolean;
    recorded_by: string;
    update_matched_at: Date | null;
  }>(
    `SELECT kind, invitation_id, visit_id, attributed, conversion_id, via_join_request, recorded_by, update_matched_at
     FROM memberships WHERE telegram_user_id = $1 ORDER BY created_at`,
    [userId],
  );
  return rows;
}

const approvalsOf = (userId: number) => w.fakes.telegram.approvals.filter((a) => a.userId === userId);
const approveCallsOf = (userId: number) =>
  w.fakes.telegram.calls('approveChatJoinRequest').filter((p) => Number(p.user_id) === userId);
const approveWaiting = (userId: number) =>
  w.count('graphile_worker.jobs WHERE key = $1', [approveJobKey({ botId: w.botId, chatId, userId })]);
/** No Telegram action of the webhook is waiting or running. */
const telegramIdle = () =>
  eventually(
    async () => (await w.count(`graphile_worker.jobs WHERE task_identifier LIKE 'telegram_%'`)) === 0,
    10_000,
    'telegram jobs to finish',
  );

describe('a join request through one of our links', () => {
  it('is approved, and the approval is the join: converted at once, without waiting for chat_member', async () => {
    const inv = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    expect(
      (await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: inv.inviteLink })))
        .status,
    ).toBe(200);
    await w.fakes.telegram.waitFor(() => approvalsOf(user.id).length === 1, 5000);
    expect(approvalsOf(user.id)[0]).toMatchObject({ chatId, userId: user.id });

    // No chat_member update is sent (bot developers report them missing): the conversion is there
    // and its send is delivered all the same.
    const [c] = await eventually(
      async () => {
        const cs = await conversionsOf(user.id);
        return cs.length === 1 && cs;
      },
      5000,
      'the conversion',
    );
    expect(c).toMatchObject({ visit_id: inv.visitId, event_type: 'Lead', channel_id: w.channels.requests });
    const sent = await eventually(
      async () => {
        const { rows } = await w.db.pool.query<{ event_id: string; status: string }>(
          'SELECT event_id, status FROM sends WHERE conversion_id = $1',
          [c!.id],
        );
        return rows.length === 1 && rows[0]!.status === 'sent' && rows[0];
      },
      8000,
      'the send to be delivered',
    );
    expect(w.fakes.meta.events().filter((e) => e.event.event_id === sent.event_id)).toHaveLength(1);
    expect(
      (await membershipsOf(user.id)).map((m) => [m.kind, m.attributed, m.recorded_by, m.conversion_id]),
    ).toEqual([
      ['join_request', false, 'update', null],
      ['join', true, 'approval', c!.id],
    ]);
    await w.fakes.telegram.waitFor(
      () => w.fakes.telegram.revoked.some((l) => l.invite_link === inv.inviteLink),
      5000,
    );

    // The chat_member that comes late (with the link the request came through, as Telegram sends
    // it) is matched to the join and adds nothing: no second join, conversion or send.
    const late = w.fakes.telegram.joinAfterApproval({ chatId, user });
    expect(late).toMatchObject({ chat_member: { invite_link: { invite_link: inv.inviteLink } } });
    expect(late).not.toMatchObject({ chat_member: { via_join_request: true } });
    await w.deliver(late);
    expect(await conversionsOf(user.id)).toEqual([c]);
    expect(await w.count('sends WHERE conversion_id = $1', [c!.id])).toBe(1);
    const joins = (await membershipsOf(user.id)).filter((m) => m.kind === 'join');
    expect(joins).toEqual([
      expect.objectContaining({ recorded_by: 'approval', update_matched_at: expect.any(Date) }),
    ]);
  });

  it('a chat_member that comes before the approval job records its result is the one join', async () => {
    const inv = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    await w.db.pool.query(`UPDATE bots SET flood_wait_until = now() + interval '1 second' WHERE id = $1`, [
      w.botId,
    ]);
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: inv.inviteLink }));
    // A person approves first; Telegram reports the join with the link.
    await w.deliver(w.fakes.telegram.chatMemberJoined({ chatId, user, inviteLink: inv.inviteLink }));
    expect(await conversionsOf(user.id)).toEqual([expect.objectContaining({ visit_id: inv.visitId })]);
    // The job then runs: USER_ALREADY_PARTICIPANT, which records nothing more.
    await eventually(
      async () => approveCallsOf(user.id).length === 1 && (await approveWaiting(user.id)) === 0,
      8000,
      'the approval attempt',
    );
    await telegramIdle();
    expect(await conversionsOf(user.id)).toHaveLength(1);
    expect((await membershipsOf(user.id)).filter((m) => m.kind === 'join')).toHaveLength(1);
  });

  it('two users through one join-request link: only the first is attributed; the second is organic with the link noted', async () => {
    const inv = await w.invitation('requests', { joinRequest: true });
    const a = newUser();
    const b = newUser();
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user: a, inviteLink: inv.inviteLink }));
    await eventually(async () => (await conversionsOf(a.id)).length === 1, 5000, "A's conversion");
    // B asks through the same link before its revoke took effect (a join-request link has no member limit).
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user: b, inviteLink: inv.inviteLink }));
    await w.fakes.telegram.waitFor(() => approvalsOf(b.id).length === 1, 5000);
    await eventually(
      async () => (await membershipsOf(b.id)).some((m) => m.kind === 'join'),
      5000,
      "B's join",
    );
    expect(await conversionsOf(b.id)).toEqual([]);
    expect(await w.count('conversions WHERE visit_id = $1', [inv.visitId])).toBe(1);
    expect((await membershipsOf(b.id)).find((m) => m.kind === 'join')).toMatchObject({
      invitation_id: inv.invitationId,
      visit_id: null,
      attributed: false,
      conversion_id: null,
    });
    await w.deliver(w.fakes.telegram.joinAfterApproval({ chatId, user: b }));
    expect(await conversionsOf(b.id)).toEqual([]);
  });

  it('a join carrying only via_join_request is matched to the pending request through our link', async () => {
    const inv = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    // The bot is held off, so the join (approved by a person) comes before Capigram's approval.
    await w.db.pool.query(`UPDATE bots SET flood_wait_until = now() + interval '1 second' WHERE id = $1`, [
      w.botId,
    ]);
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: inv.inviteLink }));
    await w.deliver(w.fakes.telegram.chatMemberJoined({ chatId, user, viaJoinRequest: true }));
    expect(await conversionsOf(user.id)).toEqual([expect.objectContaining({ visit_id: inv.visitId })]);
    expect((await membershipsOf(user.id))[1]).toMatchObject({
      kind: 'join',
      invitation_id: inv.invitationId,
      attributed: true,
    });
    await telegramIdle();
  });

  it('the latest pending request decides when a user asked through several of our links', async () => {
    const first = await w.invitation('requests', { joinRequest: true });
    const second = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    const now = Math.floor(Date.now() / 1000);
    await w.db.pool.query(`UPDATE bots SET flood_wait_until = now() + interval '1 second' WHERE id = $1`, [
      w.botId,
    ]);
    await w.deliver(
      w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: first.inviteLink, date: now - 60 }),
    );
    await w.deliver(
      w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: second.inviteLink, date: now }),
    );
    await w.deliver(w.fakes.telegram.chatMemberJoined({ chatId, user, viaJoinRequest: true }));
    expect(await conversionsOf(user.id)).toEqual([expect.objectContaining({ visit_id: second.visitId })]);
    await telegramIdle();
  });

  it('a request 20 days old, whose link expired long ago, is not used for a linkless join today', async () => {
    const inv = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    await w.db.pool.query(
      `UPDATE invitations SET created_at = now() - interval '20 days', assigned_at = now() - interval '20 days', expires_at = now() - interval '19 days' WHERE id = $1`,
      [inv.invitationId],
    );
    // The request of 20 days ago, recorded then; its join never came.
    await w.db.pool.query(
      `INSERT INTO memberships (channel_id, telegram_user_id, kind, invitation_id, visit_id, occurred_at, created_at)
       VALUES ($1, $2, 'join_request', $3, $4, now() - interval '20 days', now() - interval '20 days')`,
      [w.channels.requests, user.id, inv.invitationId, inv.visitId],
    );
    // Today a person approves a new request made without any link.
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user }));
    await w.deliver(w.fakes.telegram.chatMemberJoined({ chatId, user, viaJoinRequest: true }));
    expect(await conversionsOf(user.id)).toEqual([]);
    expect((await membershipsOf(user.id)).find((m) => m.kind === 'join')).toMatchObject({
      invitation_id: null,
      attributed: false,
      via_join_request: true,
    });
  });
});

describe('join requests Capigram leaves to the channel owner', () => {
  it('a request through a link that is not ours is recorded and not approved; its join is organic', async () => {
    const user = newUser();
    await w.deliver(
      w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: 'https://t.me/+OwnersOwnLink0001' }),
    );
    expect(await membershipsOf(user.id)).toEqual([
      expect.objectContaining({ kind: 'join_request', invitation_id: null }),
    ]);
    expect(await approveWaiting(user.id)).toBe(0);
    expect(approveCallsOf(user.id)).toEqual([]);
    // The owner approves by hand; the join arrives via the request, which was not ours.
    await w.deliver(w.fakes.telegram.chatMemberJoined({ chatId, user, viaJoinRequest: true }));
    expect(await conversionsOf(user.id)).toEqual([]);
    expect((await membershipsOf(user.id))[1]).toMatchObject({
      kind: 'join',
      attributed: false,
      invitation_id: null,
    });
  });

  it('a request without any link is recorded and not approved', async () => {
    const user = newUser();
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user }));
    expect(await membershipsOf(user.id)).toEqual([
      expect.objectContaining({ kind: 'join_request', invitation_id: null }),
    ]);
    expect(await approveWaiting(user.id)).toBe(0);
    expect(approveCallsOf(user.id)).toEqual([]);
  });

  it('a request for a chat with no channel of this bot does nothing', async () => {
    const user = newUser();
    const update = {
      update_id: 990_000_001,
      chat_join_request: {
        chat: { id: -1007777777777, type: 'channel' },
        from: { id: user.id, is_bot: false, first_name: 'X' },
        user_chat_id: user.id,
        date: 1_763_776_900,
      },
    };
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
    const attempts = w.fakes.telegram.received.filter(
      (r) =>
        r.path.endsWith('/approveChatJoinRequest') &&
        Number((r.body as { user_id: unknown }).user_id) === user.id,
    );
    expect(attempts.map((a) => a.status)).toEqual([429, 200]);
    expect(attempts[1]!.receivedAt - attempts[0]!.receivedAt).toBeGreaterThanOrEqual(950);
    // The bot's flood wait is shared with everything else that calls Telegram for it.
    const { rows } = await w.db.pool.query<{ flood_wait_until: Date | null }>(
      'SELECT flood_wait_until FROM bots WHERE id = $1',
      [w.botId],
    );
    expect(rows[0]!.flood_wait_until).not.toBeNull();
  });

  it('a bot already in flood wait is not called until the wait is over', async () => {
    await telegramIdle();
    await w.db.pool.query(`UPDATE bots SET flood_wait_until = now() + interval '1 second' WHERE id = $1`, [
      w.botId,
    ]);
    const inv = await w.invitation('requests', { joinRequest: true });
    const user = newUser();
    const sentAt = performance.now();
    await w.deliver(w.fakes.telegram.chatJoinRequest({ chatId, user, inviteLink: inv.inviteLink }));
    await w.fakes.telegram.waitFor(() => approvalsOf(user.id).length === 1, 8000);
    const attempts = w.fakes.telegram.received.filter(
      (r) =>
        r.path.endsWith('/approveChatJoinRequest') &&
        Number((r.body as { user_id: unknown }).user_id) === user.id,
    );
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
      chat_join_request: {
        chat: { id: chatId, type: 'channel' },
        from: { id: user.id, is_bot: false, first_name: 'Y' },
        user_chat_id: user.id,
        date: 1_763_776_900,
        invite_link: { invite_link: inv.inviteLink },
      },
    };
    await w.fakes.telegram.sendUpdate(w.webhookUrl, w.secret, update);
    await eventually(
      async () => approveCallsOf(user.id).length === 1 && (await approveWaiting(user.id)) === 0,
      5000,
      'the approval attempt',
    );
    await telegramIdle();
    expect(approveCallsOf(user.id)).toHaveLength(1);
    expect(approvalsOf(user.id)).toEqual([]);
  });
});
