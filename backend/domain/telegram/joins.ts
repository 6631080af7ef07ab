import { upsertLead } from '../outbox/conversion-record.js';
import { secondsToDate, type UpdateContext, type UpdateOutcome } from './context.js';
import { creditJoin } from './credit.js';
import { memberTransition } from '../bot-api/member-status.js';
import {
  findChannel,
  findLeadId,
  insertMembership,
  lockInvitationByLink,
  lockPendingRequestInvitation,
  markJoinMatched,
  unmatchedApprovedJoin,
  type ChannelRow,
} from './queries.js';
import type { ChatMemberUpdated } from './updates.js';

/**
 * `chat_member`: someone joined or left a channel. A join through one of our invitation links (or
 * through a join request made with one) is attributed to the visit the link was handed to, once
 * per visit (see `creditJoin`); any other join is organic and only recorded. A join Capigram
 * already recorded when it approved the user's request is matched and adds nothing.
 */
export async function handleChatMember(ctx: UpdateContext, u: ChatMemberUpdated): Promise<UpdateOutcome> {
  const member = u.new_chat_member.user;
  // Bots (ours included, when promoted) are not leads.
  if (member.is_bot) return 'ignored';
  const transition = memberTransition(u.old_chat_member, u.new_chat_member);
  if (transition === 'none') return 'ignored';
  const channel = await findChannel(ctx.tx, ctx.bot.id, u.chat.id);
  if (!channel) return 'unknown_chat';
  const occurredAt = secondsToDate(u.date);

  if (transition === 'leave') {
    const leadId = await findLeadId(ctx.tx, channel.site_id, member.id);
    await insertMembership(ctx.tx, {
      channelId: channel.id,
      telegramUserId: member.id,
      leadId,
      kind: 'leave',
      occurredAt,
    });
    return 'leave';
  }
  return recordJoin(ctx, channel, u, occurredAt);
}

async function recordJoin(
  ctx: UpdateContext,
  channel: ChannelRow,
  u: ChatMemberUpdated,
  occurredAt: Date,
): Promise<UpdateOutcome> {
  const { tx } = ctx;
  const userId = u.new_chat_member.user.id;
  const viaJoinRequest = u.via_join_request === true;
  // The lead's row lock comes first, here as on the approval path: the two are decided one after
  // the other, whichever of Telegram's update and Capigram's approval is first.
  const leadId = await upsertLead(tx, channel.site_id, userId, occurredAt);
  // Capigram approved this user's request and recorded the join then: the update confirms it.
  const approved = await unmatchedApprovedJoin(tx, channel.id, userId);
  if (approved !== null) {
    await markJoinMatched(tx, approved, ctx.now);
    return 'approved_join_matched';
  }
  // A join after a request through a link carries that link; Telegram sets via_join_request alone
  // only for a request made without any link. Such a join is matched to a pending request of the
  // user through one of our links, made and joined while the link was alive, or to nothing.
  const invitation = u.invite_link
    ? await lockInvitationByLink(tx, channel.id, u.invite_link.invite_link)
    : viaJoinRequest
      ? await lockPendingRequestInvitation(tx, channel.id, userId, occurredAt)
      : null;
  return creditJoin(ctx, {
    channel,
    chatId: u.chat.id,
    userId,
    leadId,
    invitation,
    occurredAt,
    viaJoinRequest,
    recordedBy: 'update',
    paidStars: u.invite_link?.subscription_price ?? null,
  });
}
