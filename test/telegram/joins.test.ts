// chat_member updates through the real webhook, database and worker: attributed joins, repeats,
// rejoins, organic joins, leaves, and the conversion each channel kind creates.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addChannel } from '../../backend/domain/admin/channels.js';
import { revokeJobKey } from '../../backend/domain/bot-api/actions.js';
import { CHATS, VISIT, eventually, newUser, startWorld, type World } from './world.js';

let w: World;

beforeAll(async () => {
  w = await startWorld();
});
afterAll(async () => {
  await w.close();
});

interface ConversionRow {
  id: string;
  site_id: string;
  channel_id: string;
  visit_id: string;
  lead_id: string;
  event_type: string;
  custom_event_name: string | null;
  value: number | null;
  currency: string | null;
  content_name: string;
  source: string;
  event_time: Date;
  attributed_at: Date;
  event_source_url: string;
  client_ip: string;
  user_agent: string;
  awaiting_manual_input: boolean;
  capi_status: string;
}

async function conversionsOf(userId: number): Promise<ConversionRow[]> {
  const { rows } = await w.db.pool.query<ConversionRow>(
    `SELECT id, site_id, channel_id, visit_id, lead_id, event_type, custom_event_name, value, currency::text AS currency, content_name, source,
       event_time, attributed_at, event_source_url, client_ip, user_agent, awaiting_manual_input, capi_status
     FROM conversions WHERE telegram_user_id = $1 ORDER BY created_at`,
    [userId],
  );
  return rows;
}

async function membershipsOf(userId: number) {
  const { rows } = await w.db.pool.query<{
    kind: string;
    channel_id: string;
    invitation_id: string | null;
    visit_id: string | null;
    attributed: boolean;
    conversion_id: string | null;
    lead_id: string | null;
    occurred_at: Date;
  }>(
    `SELECT kind, channel_id, invitation_id, visit_id, attributed, conversion_id, lead_id, occurred_at FROM memberships
     WHERE telegram_user_id = $1 ORDER BY created_at`,
    [userId],
  );
  return rows;
}

async function sendsOf(conversionId: string) {
  const { rows } = await w.db.pool.query<{ platform: string; event_id: string }>(
    'SELECT platform, event_id FROM sends WHERE conversion_id = $1',
    [conversionId],
  );
  return rows;
}

async function invitationRow(id: string) {
  const { rows } = await w.db.pool.query<{
    used_at: Date | null;
    used_by: number | null;
    revoked_at: Date | null;
  }>('SELECT used_at, used_by, revoked_at FROM invitations WHERE id = $1', [id]);
  return rows[0]!;
}

const sendCount = () => w.count('sends');

/** Whether a revoke of this invitation was ever queued: a job still waiting, or one the fake Telegram saw done. */
async function revokeEverQueued(inv: { invitationId: string; inviteLink: string }): Promise<boolean> {
  const waiting = await w.count('graphile_worker.jobs WHERE key = $1', [revokeJobKey(inv.invitationId)]);
  return (
    waiting > 0 ||
    w.fakes.telegram.calls('revokeChatInviteLink').some((p) => p.invite_link === inv.inviteLink)
  );
}

describe('a join through one of our links', () => {
  it('is attributed: one Subscribe conversion from the visit, sent to the site’s pixel, the link used and revoked', async () => {
    const inv = await w.invitation('main');
    const user = newUser();
    const date = Math.floor(Date.now() / 1000) - 30;
    const update = w.fakes.telegram.chatMemberJoined({
      chatId: CHATS.main.id,
      user,
      inviteLink: inv.inviteLink,
      date,
    });
    const before = Date.now();
    const res = await w.deliver(update);
    expect(res.status).toBe(200);
    expect(await revokeEverQueued(inv)).toBe(true);

    const [c, ...more] = await conversionsOf(user.id);
    expect(more).toHaveLength(0);
    expect(c).toMatchObject({
      site_id: w.siteId,
      channel_id: w.channels.main,
      visit_id: inv.visitId,
      event_type: 'Subscribe',
      custom_event_name: null,
      value: null,
      currency: null,
      content_name: 'Main',
      source: 'webhook',
      event_source_url: VISIT.href,
      client_ip: VISIT.clientIp,
      user_agent: VISIT.userAgent,
      awaiting_manual_input: false,
      capi_status: 'pending',
    });
    expect(c!.event_time.getTime()).toBe(date * 1000);
    expect(c!.attributed_at.getTime()).toBeGreaterThanOrEqual(before - 1000);
    expect(await sendsOf(c!.id)).toEqual([{ platform: 'meta', event_id: `cnv_${c!.id}` }]);

    expect(await membershipsOf(user.id)).toEqual([
      expect.objectContaining({
        kind: 'join',
        channel_id: w.channels.main,
        invitation_id: inv.invitationId,
        visit_id: inv.visitId,
        attributed: true,
        conversion_id: c!.id,
        lead_id: c!.lead_id,
      }),
    ]);
    const used = await invitationRow(inv.invitationId);
    expect(used.used_by).toBe(user.id);
    expect(used.used_at).not.toBeNull();
    expect(await w.count('leads WHERE site_id = $1 AND telegram_user_id = $2', [w.siteId, user.id])).toBe(1);

    await w.fakes.telegram.waitFor(
      () => w.fakes.telegram.revoked.some((l) => l.invite_link === inv.inviteLink),
      5000,
    );
    await eventually(
      async () => (await invitationRow(inv.invitationId)).revoked_at !== null,
      5000,
      'revoked_at',
    );
  });

  it('the same update delivered again changes nothing', async () => {
    const inv = await w.invitation('main');
    const user = newUser();
    const update = w.fakes.telegram.chatMemberJoined({
      chatId: CHATS.main.id,
      user,
      inviteLink: inv.inviteLink,
    });
    expect((await w.deliver(update)).status).toBe(200);
    const sends = await sendCount();
    const snapshot = {
      c: await conversionsOf(user.id),
      m: await membershipsOf(user.id),
      i: await invitationRow(inv.invitationId),
    };

    expect((await w.deliver(update)).status).toBe(200);
    expect((await w.fakes.telegram.sendUpdate(w.webhookUrl, w.secret, update)).status).toBe(200);
    // capiStatus moves on as the delivery worker sends; everything the webhook wrote stays.
    const stable = (rows: ConversionRow[]) => rows.map(({ capi_status: _status, ...rest }) => rest);
    expect(stable(await conversionsOf(user.id))).toEqual(stable(snapshot.c));
    expect(await membershipsOf(user.id)).toEqual(snapshot.m);
    expect(snapshot.c).toHaveLength(1);
    expect(snapshot.m).toHaveLength(1);
    expect(await sendCount()).toBe(sends);
    expect(await w.count('telegram_updates WHERE update_id = $1', [update.update_id])).toBe(1);
  });

  it('concurrent deliveries of one update are handled once', async () => {
    const inv = await w.invitation('main');
    const user = newUser();
    const update = w.fakes.telegram.chatMemberJoined({
      chatId: CHATS.main.id,
      user,
      inviteLink: inv.inviteLink,
    });
    const results = await Promise.all(Array.from({ length: 8 }, () => w.deliver(update)));
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(await conversionsOf(user.id)).toHaveLength(1);
    expect(await membershipsOf(user.id)).toHaveLength(1);
  });

  it('a rejoin through the same link is recorded but converts only once', async () => {
    const inv = await w.invitation('main');
    const user = newUser();
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user, inviteLink: inv.inviteLink }),
    );
    await w.deliver(w.fakes.telegram.chatMemberLeft({ chatId: CHATS.main.id, user }));
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user, inviteLink: inv.inviteLink }),
    );
    const conversions = await conversionsOf(user.id);
    expect(conversions).toHaveLength(1);
    expect((await membershipsOf(user.id)).map((m) => [m.kind, m.attributed, m.conversion_id])).toEqual([
      ['join', true, conversions[0]!.id],
      ['leave', false, null],
      ['join', true, null],
    ]);
    // A rejoin through a new link (a new visit) is a new acquisition and converts again.
    const second = await w.invitation('main');
    await w.deliver(w.fakes.telegram.chatMemberLeft({ chatId: CHATS.main.id, user }));
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user, inviteLink: second.inviteLink }),
    );
    expect((await conversionsOf(user.id)).map((c) => c.visit_id)).toEqual([inv.visitId, second.visitId]);
  });

  it('a second user through a member_limit link after the first left is organic: the link noted, no conversion', async () => {
    const inv = await w.invitation('main');
    const a = newUser();
    const b = newUser();
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user: a, inviteLink: inv.inviteLink }),
    );
    await w.deliver(w.fakes.telegram.chatMemberLeft({ chatId: CHATS.main.id, user: a }));
    // The revoke came late (or was given up): Telegram lets B in through the freed place.
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user: b, inviteLink: inv.inviteLink }),
    );
    expect(await conversionsOf(b.id)).toEqual([]);
    expect(await w.count('conversions WHERE visit_id = $1', [inv.visitId])).toBe(1);
    expect(await membershipsOf(b.id)).toEqual([
      expect.objectContaining({
        kind: 'join',
        invitation_id: inv.invitationId,
        visit_id: null,
        attributed: false,
        conversion_id: null,
      }),
    ]);
    expect(Number((await invitationRow(inv.invitationId)).used_by)).toBe(a.id);
    // A's own rejoin through it is still A's (recorded, not converted again).
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user: a, inviteLink: inv.inviteLink }),
    );
    expect(await w.count('conversions WHERE visit_id = $1', [inv.visitId])).toBe(1);
  });

  it('a Purchase channel with a fixed value converts with that value and currency', async () => {
    const inv = await w.invitation('priced');
    const user = newUser();
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.priced.id, user, inviteLink: inv.inviteLink }),
    );
    const [c] = await conversionsOf(user.id);
    expect(c).toMatchObject({
      channel_id: w.channels.priced,
      event_type: 'Purchase',
      value: 19.9,
      currency: 'EUR',
      awaiting_manual_input: false,
      content_name: 'Paid club',
    });
    expect(await sendsOf(c!.id)).toHaveLength(1);
  });

  it('a Custom channel converts under its custom event name', async () => {
    const inv = await w.invitation('custom');
    const user = newUser();
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.custom.id, user, inviteLink: inv.inviteLink }),
    );
    expect(await conversionsOf(user.id)).toEqual([
      expect.objectContaining({ event_type: 'Custom', custom_event_name: 'JoinedVip' }),
    ]);
  });

  it('a manual-value Purchase channel waits for the value: awaitingManualInput, nothing sent', async () => {
    const inv = await w.invitation('manual');
    const user = newUser();
    const sends = await sendCount();
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.manual.id, user, inviteLink: inv.inviteLink }),
    );
    const [c] = await conversionsOf(user.id);
    expect(c).toMatchObject({
      event_type: 'Purchase',
      awaiting_manual_input: true,
      value: null,
      currency: null,
      visit_id: inv.visitId,
    });
    expect(await sendsOf(c!.id)).toEqual([]);
    expect(await sendCount()).toBe(sends);
  });

  it('a site without pixels records the conversion and schedules no send', async () => {
    const inv = await w.invitation('secondSite');
    const user = newUser();
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.secondSite.id, user, inviteLink: inv.inviteLink }),
    );
    const [c] = await conversionsOf(user.id);
    expect(c).toMatchObject({
      site_id: w.secondSiteId,
      channel_id: w.channels.secondSite,
      capi_status: 'skipped',
    });
    expect(await sendsOf(c!.id)).toEqual([]);
  });
});

describe('joins that are not attributed', () => {
  it('a join without an invite link is organic: recorded, nothing converted or sent', async () => {
    const user = newUser();
    const sends = await sendCount();
    await w.deliver(w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user }));
    expect(await membershipsOf(user.id)).toEqual([
      expect.objectContaining({
        kind: 'join',
        attributed: false,
        invitation_id: null,
        visit_id: null,
        conversion_id: null,
      }),
    ]);
    expect(await conversionsOf(user.id)).toEqual([]);
    expect(await sendCount()).toBe(sends);
  });

  it('a join through a link that is not ours is organic', async () => {
    const user = newUser();
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({
        chatId: CHATS.main.id,
        user,
        inviteLink: 'https://t.me/+SomeoneElsesLink1',
      }),
    );
    expect(await membershipsOf(user.id)).toEqual([
      expect.objectContaining({ kind: 'join', attributed: false, invitation_id: null }),
    ]);
    expect(await conversionsOf(user.id)).toEqual([]);
  });

  it('a join through our link of another channel is not attributed to this one', async () => {
    const inv = await w.invitation('priced');
    const user = newUser();
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user, inviteLink: inv.inviteLink }),
    );
    expect(await conversionsOf(user.id)).toEqual([]);
    expect((await invitationRow(inv.invitationId)).used_at).toBeNull();
    expect(await revokeEverQueued(inv)).toBe(false);
  });

  it('a used link that expired before its revoke ran counts as revoked (Telegram: INVITE_HASH_EXPIRED)', async () => {
    const inv = await w.invitation('main');
    const user = newUser();
    w.fakes.telegram.expireLink(inv.inviteLink);
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user, inviteLink: inv.inviteLink }),
    );
    expect((await conversionsOf(user.id)).map((c) => c.visit_id)).toEqual([inv.visitId]);
    await eventually(
      async () => (await invitationRow(inv.invitationId)).revoked_at !== null,
      5000,
      'revoked_at',
    );
    // Telegram was asked, refused with INVITE_HASH_EXPIRED, and the job was not left to retry.
    expect(
      w.fakes.telegram.calls('revokeChatInviteLink').filter((p) => p.invite_link === inv.inviteLink),
    ).toHaveLength(1);
    expect(w.fakes.telegram.revoked.some((l) => l.invite_link === inv.inviteLink)).toBe(false);
    await eventually(
      async () =>
        (await w.count('graphile_worker.jobs WHERE key = $1', [revokeJobKey(inv.invitationId)])) === 0,
      5000,
      'the revoke job done',
    );
  });

  it('a pooled link never handed to a visit is taken out of use but attributes nothing', async () => {
    const inv = await w.invitation('main', { visit: false });
    const user = newUser();
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user, inviteLink: inv.inviteLink }),
    );
    expect(await conversionsOf(user.id)).toEqual([]);
    expect(await membershipsOf(user.id)).toEqual([
      expect.objectContaining({ kind: 'join', attributed: false, invitation_id: inv.invitationId }),
    ]);
    expect((await invitationRow(inv.invitationId)).used_by).toBe(user.id);
    await w.fakes.telegram.waitFor(
      () => w.fakes.telegram.revoked.some((l) => l.invite_link === inv.inviteLink),
      5000,
    );
  });

  it('a join through the channel’s public address, handed out as a fallback, is organic and revokes nothing', async () => {
    // Each fallback click records the public address against its visit (tracker: Telegram was down).
    const publicUrl = 'https://t.me/capigram_main_public';
    const fallback = async () => {
      const { visitId } = await w.invitation('main', { visit: true });
      await w.db.pool.query(
        `INSERT INTO invitations (channel_id, invite_link, visit_id, assigned_at, unattributed) VALUES ($1, $2, $3, now(), true)`,
        [w.channels.main, publicUrl, visitId],
      );
    };
    await fallback();
    await fallback();
    const user = newUser();
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user, inviteLink: publicUrl }),
    );
    expect(await conversionsOf(user.id)).toEqual([]);
    expect(await membershipsOf(user.id)).toEqual([
      expect.objectContaining({ attributed: false, invitation_id: null }),
    ]);
    expect(
      await w.count(
        'invitations WHERE invite_link = $1 AND (used_at IS NOT NULL OR revoked_at IS NOT NULL)',
        [publicUrl],
      ),
    ).toBe(0);
    expect(w.fakes.telegram.calls('revokeChatInviteLink').some((p) => p.invite_link === publicUrl)).toBe(
      false,
    );
    expect(await w.count('graphile_worker.jobs WHERE key LIKE $1', ['telegram_revoke_invite_link:%'])).toBe(
      0,
    );
  });

  it('a bot joining is not a lead', async () => {
    const update = w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user: { id: 4242 } });
    if ('chat_member' in update) update.chat_member.new_chat_member.user.is_bot = true;
    await w.deliver(update);
    expect(await membershipsOf(4242)).toEqual([]);
  });

  it('a promotion of a member is neither a join nor a leave', async () => {
    const user = newUser();
    const u = { id: user.id, is_bot: false, first_name: 'P' };
    const update = {
      update_id: 880_000_001,
      chat_member: {
        chat: { id: CHATS.main.id, type: 'channel' },
        from: u,
        date: 1_763_776_800,
        old_chat_member: { status: 'member', user: u },
        new_chat_member: { status: 'administrator', user: u, can_invite_users: true },
      },
    };
    expect((await w.fakes.telegram.sendUpdate(w.webhookUrl, w.secret, update)).status).toBe(200);
    expect(await membershipsOf(user.id)).toEqual([]);
  });
});

describe('leaves', () => {
  it('left and kicked are recorded as leaves, with the lead', async () => {
    const inv = await w.invitation('main');
    const user = newUser();
    await w.deliver(
      w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user, inviteLink: inv.inviteLink }),
    );
    const date = Math.floor(Date.now() / 1000);
    await w.deliver(w.fakes.telegram.chatMemberLeft({ chatId: CHATS.main.id, user, date }));
    await w.deliver(w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user }));
    await w.deliver(w.fakes.telegram.chatMemberLeft({ chatId: CHATS.main.id, user, kicked: true }));
    const rows = await membershipsOf(user.id);
    expect(rows.map((m) => m.kind)).toEqual(['join', 'leave', 'join', 'leave']);
    expect(rows[1]!.occurred_at.getTime()).toBe(date * 1000);
    expect(rows[1]!.lead_id).toBe(rows[0]!.lead_id);
    expect(await conversionsOf(user.id)).toHaveLength(1);
  });

  it('a leave of someone never seen is recorded without a lead', async () => {
    const user = newUser();
    w.fakes.telegram.setMember(CHATS.main.id, user.id, 'member');
    await w.deliver(w.fakes.telegram.chatMemberLeft({ chatId: CHATS.main.id, user }));
    expect(await membershipsOf(user.id)).toEqual([expect.objectContaining({ kind: 'leave', lead_id: null })]);
    expect(await w.count('leads WHERE telegram_user_id = $1', [user.id])).toBe(0);
  });
});

describe('one channel per (bot, chat)', () => {
  it('a chat a bot already serves for one site cannot be added to another site with that bot', async () => {
    const deps = w.app.deps;
    await expect(
      addChannel(deps, {
        siteId: w.secondSiteId,
        botId: w.botId,
        telegramChannelId: String(CHATS.main.id),
        title: 'Dup',
      }),
    ).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    // Another bot may serve the same chat for another site: its updates name that bot.
    const { channelId } = await addChannel(deps, {
      siteId: w.secondSiteId,
      botId: w.otherBotId,
      telegramChannelId: String(CHATS.main.id),
      title: 'Same chat, other bot',
    });
    expect(channelId).toMatch(/^[0-9a-f-]{36}$/);
  });
});
