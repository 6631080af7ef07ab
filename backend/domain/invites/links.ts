/**
 * Rules for the invite links Capigram creates. Pure: the pool, the click path and the refill task
 * all ask these, so a link is shaped the same wherever it is made.
 */
import type { InviteChannel } from './invite-channels.js';

/** Telegram's limit on an invite link's name. */
const MAX_LINK_NAME_LENGTH = 32;

/**
 * A link's name identifies its invitation row (visible to the channel's admins in Telegram):
 * `cg-` and the start of the invitation id, 32 characters at most.
 */
export function linkName(invitationId: string): string {
  return `cg-${invitationId.replace(/-/g, '')}`.slice(0, MAX_LINK_NAME_LENGTH);
}

export interface LinkRequest {
  chat_id: number;
  name: string;
  expire_date: number;
  member_limit?: number;
  creates_join_request?: boolean;
}

/** Telegram's one subscription period (Bot API, createChatSubscriptionInviteLink: "must always be 2592000"). */
export const SUBSCRIPTION_PERIOD_SECONDS = 2_592_000;

export interface SubscriptionLinkRequest {
  chat_id: number;
  name: string;
  subscription_period: number;
  subscription_price: number;
}

/**
 * `createChatSubscriptionInviteLink` parameters for a paid channel, or null for a free one. A
 * subscription link takes no expiry and no member limit (TDLib export_dialog_invite_link), so the
 * link is retired by Capigram: revoked after its first join, like any link of a visit, and by the
 * pool's refill once its lifetime (`expire_date` of `linkRequest`, kept on our side) is over.
 */
export function subscriptionLinkRequest(
  channel: Pick<InviteChannel, 'telegramChatId' | 'subscriptionPrice'>,
  name: string,
): SubscriptionLinkRequest | null {
  if (channel.subscriptionPrice === null) return null;
  return {
    chat_id: channel.telegramChatId,
    name,
    subscription_period: SUBSCRIPTION_PERIOD_SECONDS,
    subscription_price: channel.subscriptionPrice,
  };
}

/**
 * `createChatInviteLink` parameters. A link admits one person (`member_limit: 1`) or asks the bot
 * to approve each joiner (`creates_join_request`), never both: Telegram refuses the pair.
 */
export function linkRequest(
  channel: Pick<InviteChannel, 'telegramChatId' | 'inviteMode' | 'inviteTtlSeconds'>,
  name: string,
  now: Date,
): LinkRequest {
  const expire_date = Math.floor(now.getTime() / 1000) + channel.inviteTtlSeconds;
  return channel.inviteMode === 'join_request'
    ? { chat_id: channel.telegramChatId, name, expire_date, creates_join_request: true }
    : { chat_id: channel.telegramChatId, name, expire_date, member_limit: 1 };
}

/**
 * A pooled link is handed out only while at least half its lifetime is left, so a visitor always
 * has time to join; older unassigned links are retired by the refill task.
 */
export function handoutCutoff(now: Date, inviteTtlSeconds: number): Date {
  return new Date(now.getTime() + (inviteTtlSeconds * 1000) / 2);
}

/** Where a click goes when no attributed link can be had: the channel's public address. */
export function fallbackUrl(channel: Pick<InviteChannel, 'publicInviteUrl' | 'username'>): string | null {
  if (channel.publicInviteUrl !== null && channel.publicInviteUrl !== '') return channel.publicInviteUrl;
  if (channel.username !== null && channel.username !== '') return `https://t.me/${channel.username}`;
  return null;
}
