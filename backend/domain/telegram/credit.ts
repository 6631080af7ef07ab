import { recordConversion } from '../outbox/conversion-record.js';
import { entryVisitInWindow } from '../entries/tie.js';
import { enqueueRevokeInviteLink } from '../bot-api/actions.js';
import type { UpdateContext, UpdateOutcome } from './context.js';
import { decideJoinCredit } from './join-credit.js';
import { joinConversionTerms, paidJoinTerms } from './join-terms.js';
import { visitContext } from '../tracker/visits.js';
import {
  insertMembership,
  joinAlreadyConverted,
  markInvitationUsed,
  type ChannelRow,
  type NewMembership,
  type InvitationRow,
} from './queries.js';
import type { Queryable } from '../../db/pool.js';
import type { StarsValue } from './payment-value.js';

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
  /**
   * Without one of our links: a visit the guard bot's gate Mini App proved for this user
   * (`join-gate.ts`), taken before an entry's tie.
   */
  provenVisit?: string | null;
  /** A subscription link's price in Stars, as Telegram's update carries it: a paid join. */
  paidStars?: number | null;
}

/**
 * Records a join and credits it as `decideJoinCredit` rules, over the facts read here once. The
 * caller holds the lead's row lock and the invitation's, so two joins through one link are decided
 * one after the other.
 */
export async function creditJoin(ctx: UpdateContext, j: JoinToCredit): Promise<UpdateOutcome> {
  const { tx } = ctx;
  const { channel, invitation, userId } = j;
  const entryVisit = invitation
    ? null
    : (j.provenVisit ??
      (await entryVisitInWindow(tx, {
        siteId: channel.site_id,
        telegramUserId: userId,
        at: j.occurredAt,
        windowDays: ctx.attributionWindowDays,
      })));
  const visitId = invitation ? invitation.visit_id : entryVisit;
  const alreadyConverted =
    visitId !== null &&
    (invitation
      ? await joinAlreadyConverted(tx, channel.id, userId, invitation.id)
      : await entryJoinAlreadyConverted(tx, channel.id, userId, visitId));
  const credit = decideJoinCredit({ userId, invitation, entryVisit, alreadyConverted });

  if (invitation) {
    if (credit.revokeLink)
      await enqueueRevokeInviteLink(tx, {
        botId: ctx.bot.id,
        chatId: j.chatId,
        invitationId: invitation.id,
        inviteLink: invitation.invite_link,
      });
    await markInvitationUsed(tx, invitation.id, userId, ctx.now);
  }
  if (credit.secondPerson)
    ctx.log.info(
      { botId: ctx.bot.id, channelId: channel.id, invitationId: invitation?.id },
      'a second person joined through an already credited link: organic',
    );
  const membership: NewMembership = {
    channelId: channel.id,
    telegramUserId: userId,
    leadId: j.leadId,
    kind: 'join',
    invitationId: invitation?.id ?? null,
    viaJoinRequest: j.viaJoinRequest,
    occurredAt: j.occurredAt,
    recordedBy: j.recordedBy,
    ...(credit.visitId === null ? {} : { visitId: credit.visitId, attributed: true }),
  };
  if (credit.outcome !== 'attributed_join' || credit.visitId === null) {
    await insertMembership(tx, membership);
    return credit.outcome;
  }
  return convertJoin(ctx, j, membership, credit.visitId);
}

/** The join's conversion with the visit's page, IP and User-Agent, and its membership naming it. */
async function convertJoin(
  ctx: UpdateContext,
  j: JoinToCredit,
  attributed: NewMembership,
  visitId: string,
): Promise<UpdateOutcome> {
  const { tx } = ctx;
  const conversion = await recordJoinConversion(ctx, {
    channel: j.channel,
    userId: j.userId,
    visitId,
    occurredAt: j.occurredAt,
    recordedBy: j.recordedBy,
    paidStars: j.paidStars ?? null,
  });
  if (conversion === null) {
    // A visit without consent leads to an organic join: recorded, nothing sent (docs/consent.md).
    const { visitId: _visit, attributed: _attributed, ...organic } = attributed;
    await insertMembership(tx, organic);
    return 'organic_join';
  }
  await insertMembership(tx, {
    ...attributed,
    leadId: conversion.leadId,
    conversionId: conversion.conversionId,
  });
  return 'attributed_join';
}

/**
 * Records a join's conversion for a visit with the visit's page, IP and User-Agent; null (nothing
 * recorded) when the visit has no consent. The caller records or updates the membership naming it.
 */
export async function recordJoinConversion(
  ctx: UpdateContext,
  j: {
    channel: ChannelRow;
    userId: number;
    visitId: string;
    occurredAt: Date;
    recordedBy: JoinToCredit['recordedBy'] | 'late_start';
    paidStars?: number | null;
  },
): Promise<{ conversionId: string; leadId: string } | null> {
  const { tx } = ctx;
  const { channel, userId, visitId } = j;
  const visit = await visitContext(tx, visitId);
  if (visit !== null && !visit.consented) return null;
  const paidStars = j.paidStars ?? null;
  const terms = paidJoinTerms(
    joinConversionTerms(channel),
    paidStars,
    paidStars === null ? null : await siteStarsValue(tx, channel.site_id),
  );
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
  return { conversionId: conversion.conversionId, leadId: conversion.leadId };
}

/** Whether this user's join of the channel was already credited to the entry's visit (a rejoin converts once). */
export async function entryJoinAlreadyConverted(
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

/** The site's value of one Star (`site update --stars-value`), or null while it has none. */
async function siteStarsValue(tx: Queryable, siteId: string): Promise<StarsValue | null> {
  const { rows } = await tx.query<{ amount: string | null; currency: string | null }>(
    'SELECT stars_value::text AS amount, stars_value_currency AS currency FROM sites WHERE id = $1',
    [siteId],
  );
  const r = rows[0];
  return r?.amount != null && r.currency != null ? { amount: Number(r.amount), currency: r.currency } : null;
}
