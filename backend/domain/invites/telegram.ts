import { randomUUID } from 'node:crypto';
import type { Deps } from '../../deps.js';
import { createTelegramClient, TelegramError } from '../../telegram/client.js';
import type { InviteChannel } from './invite-channels.js';
import { linkName, linkRequest, subscriptionLinkRequest } from './links.js';
import { followMigrationError } from '../bot-api/migration.js';
import { queueRightsCheck } from '../bot-api/rights-check.js';

/**
 * Creating an invite link at Telegram, and learning from its refusals: a 429 puts the whole bot
 * in flood wait (recorded in the database so every process holds off), a refusal for lack of
 * rights marks the channel as one the bot cannot invite to and queues a getChatMember re-check
 * (my_chat_member, or that check, clears it on promotion); a basic group's upgrade moves the
 * channel to the supergroup's id.
 */
export type InviteDeps = Pick<Deps, 'pool' | 'box' | 'config' | 'log' | 'now' | 'local'>;

export interface CreatedLink {
  invitationId: string;
  inviteLink: string;
  name: string;
  createsJoinRequest: boolean;
  expiresAt: Date;
}

// Telegram's answers when the bot is not an admin allowed to invite, or not in the chat at all.
const NO_RIGHTS = /not enough rights|CHAT_ADMIN_REQUIRED|chat not found|bot is not a member|bot was kicked/i;

export async function createLinkAtTelegram(
  deps: InviteDeps,
  channel: InviteChannel,
  timeoutMs: number,
): Promise<CreatedLink> {
  const invitationId = randomUUID();
  const name = linkName(invitationId);
  const request = linkRequest(channel, name, deps.now());
  const tg = createTelegramClient({
    baseUrl: deps.config.TELEGRAM_API_URL,
    token: deps.box.open(channel.botTokenEnc),
    timeoutMs,
  });
  try {
    const paid = subscriptionLinkRequest(channel, name);
    const link = paid
      ? await tg.createChatSubscriptionInviteLink(paid)
      : await tg.createChatInviteLink(request);
    return {
      invitationId,
      inviteLink: link.invite_link,
      name,
      createsJoinRequest: paid === null && request.creates_join_request === true,
      expiresAt: new Date((link.expire_date ?? request.expire_date) * 1000),
    };
  } catch (err) {
    if (err instanceof TelegramError) await learnFromRefusal(deps, channel, err);
    throw err;
  }
}

/** Revokes a link at Telegram; a link Telegram no longer knows (expired, revoked) counts as revoked. */
export async function revokeLinkAtTelegram(
  deps: InviteDeps,
  channel: InviteChannel,
  inviteLink: string,
  timeoutMs: number,
): Promise<void> {
  const tg = createTelegramClient({
    baseUrl: deps.config.TELEGRAM_API_URL,
    token: deps.box.open(channel.botTokenEnc),
    timeoutMs,
  });
  try {
    await tg.revokeChatInviteLink({ chat_id: channel.telegramChatId, invite_link: inviteLink });
  } catch (err) {
    if (
      err instanceof TelegramError &&
      err.kind === 'api' &&
      /INVITE_HASH_EXPIRED|INVITE_HASH_INVALID/i.test(err.message)
    )
      return;
    if (err instanceof TelegramError) await learnFromRefusal(deps, channel, err);
    throw err;
  }
}

async function learnFromRefusal(deps: InviteDeps, channel: InviteChannel, err: TelegramError): Promise<void> {
  if (await followMigrationError(deps.pool, deps.log, channel.botId, channel.telegramChatId, err)) {
    // The next link is asked for under the supergroup's id.
    channel.telegramChatId = err.migrateToChatId ?? channel.telegramChatId;
  } else if (err.kind === 'rate_limited') {
    const until = new Date(deps.now().getTime() + Math.max(1, err.retryAfterSec ?? 1) * 1000);
    channel.floodWaitUntil = until;
    await deps.pool.query(
      'UPDATE bots SET flood_wait_until = $2 WHERE id = $1 AND (flood_wait_until IS NULL OR flood_wait_until < $2)',
      [channel.botId, until],
    );
    deps.log.warn(
      { botId: channel.botId, retryAfterSec: err.retryAfterSec },
      'Telegram flood control: holding off this bot',
    );
  } else if (err.kind === 'api' && NO_RIGHTS.test(err.message)) {
    channel.botCannotInvite = true;
    await deps.pool.query('UPDATE channels SET bot_can_invite = false, bot_status_at = $2 WHERE id = $1', [
      channel.id,
      deps.now(),
    ]);
    // One refusal is not the last word: getChatMember says what the bot may do, now and every
    // few minutes after (a promotion's my_chat_member may never come).
    await queueRightsCheck(deps.pool, channel.id);
    deps.log.warn(
      { channelId: channel.id, err: err.message },
      'the bot may not create invite links in this channel; its rights will be re-checked',
    );
  }
}

/** Whether Telegram asked this channel's bot to wait and the wait has not ended. */
export function inFloodWait(channel: Pick<InviteChannel, 'floodWaitUntil'>, now: Date): boolean {
  return channel.floodWaitUntil !== null && channel.floodWaitUntil.getTime() > now.getTime();
}
