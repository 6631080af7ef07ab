import { recordConversion, upsertLead } from '../conversion-record.js';
import { enqueueRevokeInviteLink } from './actions.js';
import { secondsToDate, type UpdateContext, type UpdateOutcome } from './context.js';
import { joinConversionTerms } from './join-terms.js';
import { memberTransition } from './member-status.js';
import {
  findChannel, findLeadId, insertMembership, joinAlreadyConverted, lockInvitationByLink, lockJoinRequestInvitation,
  markInvitationUsed, visitContext, type ChannelRow,
} from './queries.js';
import type { ChatMemberUpdated } from './updates.js';

/**
 * `chat_member`: someone joined or left a channel. A join through one of our invitation links (or
 * through a join request made with one) is attributed to the visit the link was handed to; any
 * other join is organic and only recorded.
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
    await insertMembership(ctx.tx, { channelId: channel.id, telegramUserId: member.id, leadId, kind: 'leave', occurredAt });
    return 'leave';
  }
  return recordJoin(ctx, channel, u, occurredAt);
}

async function recordJoin(ctx: UpdateContext, channel: ChannelRow, u: ChatMemberUpdated, occurredAt: Date): Promise<UpdateOutcome> {
  const { tx } = ctx;
  const userId = u.new_chat_member.user.id;
  const viaJoinRequest = u.via_join_request === true;
  // A join after an approved request may carry the link again, or only via_join_request.
  const invitation = u.invite_link
    ? await lockInvitationByLink(tx, channel.id, u.invite_link.invite_link)
    : viaJoinRequest
      ? await lockJoinRequestInvitation(tx, channel.id, userId)
      : null;
  const leadId = await upsertLead(tx, channel.site_id, userId, occurredAt);
  const base = { channelId: channel.id, telegramUserId: userId, leadId, kind: 'join' as const, viaJoinRequest, occurredAt };

  if (!invitation) {
    await insertMembership(tx, base);
    return 'organic_join';
  }

  // A used link is spent: revoke it so it cannot bring anyone else in under this visit.
  if (invitation.used_at === null && invitation.revoked_at === null) {
    await enqueueRevokeInviteLink(tx, { botId: ctx.bot.id, chatId: u.chat.id, invitationId: invitation.id, inviteLink: invitation.invite_link });
  }
  await markInvitationUsed(tx, invitation.id, userId, ctx.now);

  if (invitation.visit_id === null) {
    // A pooled link never handed to a visit (leaked or guessed): ours, but nothing to attribute to.
    await insertMembership(tx, { ...base, invitationId: invitation.id });
    return 'organic_join';
  }
  const attributed = { ...base, invitationId: invitation.id, visitId: invitation.visit_id, attributed: true };
  if (await joinAlreadyConverted(tx, channel.id, userId, invitation.id)) {
    await insertMembership(tx, attributed);
    return 'repeat_join';
  }

  const visit = await visitContext(tx, invitation.visit_id);
  const terms = joinConversionTerms(channel);
  const conversion = await recordConversion(
    tx,
    {
      siteId: channel.site_id,
      channelId: channel.id,
      telegramUserId: userId,
      visitId: invitation.visit_id,
      ...terms,
      contentName: channel.title,
      eventSourceUrl: visit?.href ?? null,
      clientIp: visit?.client_ip ?? null,
      userAgent: visit?.user_agent ?? null,
      eventTime: occurredAt,
      attributedAt: ctx.now,
      receivedAt: ctx.now,
      source: 'webhook',
    },
    true,
  );
  await insertMembership(tx, { ...attributed, leadId: conversion.leadId, conversionId: conversion.conversionId });
  ctx.log.info(
    { botId: ctx.bot.id, channelId: channel.id, conversionId: conversion.conversionId, sends: conversion.sends.length, awaitingManualInput: terms.awaitingManualInput },
    'attributed channel join',
  );
  return 'attributed_join';
}
