import { recordConversion } from '../outbox/conversion-record.js';
import { entryVisitInWindow } from '../entries/tie.js';
import { enqueueRevokeInviteLink } from '../bot-api/actions.js';
import type { UpdateContext, UpdateOutcome } from './context.js';
import { joinConversionTerms } from './join-terms.js';
import { visitContext } from '../tracker/visits.js';
import {
  insertMembership,
  joinAlreadyConverted,
  markInvitationUsed,
  type ChannelRow,
  type InvitationRow,
} from './queries.js';
import type { Queryable } from '../../db/pool.js';

export interface JoinToCredit {
  channel: ChannelRow;
  chatId: number;
  userId: number;
  leadId: string;
  /** One of our links, locked by the caller; null for a join through anything else. */
  invitation: InvitationRow | null;
  occurredAt: Date;
  viaJoinRequest: boolean;
  recordedBy: 'update' | 'approval';
}

/**
 * Records a join and decides what it is worth. A visit's invitation is credited with one join, its
 * first, whatever the link mode and whatever Telegram lets through (a join-request link admits
 * anyone who asks; a `member_limit` link admits a second person if its revoke came late): every
 * later join through it by someone else is organic, with the link noted, and never carries that
 * visit's click ids, IP or User-Agent. The caller holds the lead's row lock and the invitation's,
 * so two joins through one link are decided one after the other.
 */
export async function creditJoin(ctx: UpdateContext, j: JoinToCredit): Promise<UpdateOutcome> {
  const { tx } = ctx;
  const { channel, invitation, userId } = j;
  const base = {
    channelId: channel.id,
    telegramUserId: userId,
    leadId: j.leadId,
    kind: 'join' as const,
    viaJoinRequest: j.viaJoinRequest,
    occurredAt: j.occurredAt,
    recordedBy: j.recordedBy,
  };
  if (!invitation) {
    // No link of ours: a user an entry tied to a visit within the window joined (a public
    // channel's Join button, the channel's own link): the join is that visit's.
    const entryVisit = await entryVisitInWindow(tx, {
      siteId: channel.site_id,
      telegramUserId: userId,
      at: j.occurredAt,
      windowDays: ctx.attributionWindowDays,
    });
    if (entryVisit === null) {
      await insertMembership(tx, base);
      return 'organic_join';
    }
    const attributed = { ...base, visitId: entryVisit, attributed: true };
    if (await entryJoinAlreadyConverted(tx, channel.id, userId, entryVisit)) {
      await insertMembership(tx, attributed);
      return 'repeat_join';
    }
    return convertJoin(ctx, j, attributed, entryVisit);
  }

  // A used link is spent: revoke it so it cannot bring anyone else in under this visit.
  if (invitation.used_at === null && invitation.revoked_at === null) {
    await enqueueRevokeInviteLink(tx, {
      botId: ctx.bot.id,
      chatId: j.chatId,
      invitationId: invitation.id,
      inviteLink: invitation.invite_link,
    });
  }
  await markInvitationUsed(tx, invitation.id, userId, ctx.now);

  if (invitation.visit_id === null) {
    // A pooled link never handed to a visit (leaked or guessed): ours, but nothing to attribute to.
    await insertMembership(tx, { ...base, invitationId: invitation.id });
    return 'organic_join';
  }
  if (invitation.used_by !== null && invitation.used_by !== String(userId)) {
    // Someone else already joined through this visit's link: the click was theirs.
    await insertMembership(tx, { ...base, invitationId: invitation.id });
    ctx.log.info(
      { botId: ctx.bot.id, channelId: channel.id, invitationId: invitation.id },
      'a second person joined through an already credited link: organic',
    );
    return 'organic_join';
  }
  const attributed = { ...base, invitationId: invitation.id, visitId: invitation.visit_id, attributed: true };
  if (await joinAlreadyConverted(tx, channel.id, userId, invitation.id)) {
    await insertMembership(tx, attributed);
    return 'repeat_join';
  }

  return convertJoin(ctx, j, attributed, invitation.visit_id);
}

/** The join's conversion with the visit's page, IP and User-Agent, and its membership naming it. */
async function convertJoin(
  ctx: UpdateContext,
  j: JoinToCredit,
  attributed: Parameters<typeof insertMembership>[1],
  visitId: string,
): Promise<UpdateOutcome> {
  const { tx } = ctx;
  const { channel, userId } = j;
  const visit = await visitContext(tx, visitId);
  const terms = joinConversionTerms(channel);
  const conversion = await recordConversion(
    tx,
    {
      siteId: channel.site_id,
      channelId: channel.id,
      telegramUserId: userId,
      visitId,
      ...terms,
      contentName: channel.title,
      eventSourceUrl: visit?.href ?? null,
      clientIp: visit?.client_ip ?? null,
      userAgent: visit?.user_agent ?? null,
      eventTime: j.occurredAt,
      attributedAt: ctx.now,
      receivedAt: ctx.now,
      source: 'webhook',
    },
    true,
  );
  await insertMembership(tx, {
    ...attributed,
    leadId: conversion.leadId,
    conversionId: conversion.conversionId,
  });
  ctx.log.info(
    {
      botId: ctx.bot.id,
      channelId: channel.id,
      conversionId: conversion.conversionId,
      sends: conversion.sends.length,
      awaitingManualInput: terms.awaitingManualInput,
      recordedBy: j.recordedBy,
    },
    'attributed channel join',
  );
  return 'attributed_join';
}

/** Whether this user's join of the channel was already credited to the entry's visit (a rejoin converts once). */
async function entryJoinAlreadyConverted(
  tx: Queryable,
  channelId: string,
  telegramUserId: number,
  visitId: string,
): Promise<boolean> {
  const { rowCount } = await tx.query(
    `SELECT 1 FROM memberships WHERE channel_id = $1 AND telegram_user_id = $2 AND visit_id = $3 AND invitation_id IS NULL AND conversion_id IS NOT NULL`,
    [channelId, telegramUserId, visitId],
  );
  return (rowCount ?? 0) > 0;
}
