import { secondsToDate, type UpdateContext, type UpdateOutcome } from './context.js';
import { botRights } from '../bot-api/member-status.js';
import { storeBotStatus } from '../bot-api/bot-state.js';
import type { ChatMemberUpdated } from './updates.js';

/**
 * `my_chat_member`: the bot's own status in a chat changed. It is kept per channel (shown by
 * `channel list`), and losing the right to invite is logged loudly: without it no invite link can
 * be created or revoked, no join request approved, and Telegram stops sending `chat_member`.
 */
export async function handleMyChatMember(ctx: UpdateContext, u: ChatMemberUpdated): Promise<UpdateOutcome> {
  if (u.new_chat_member.user.id !== ctx.bot.telegramBotId) return 'ignored';
  const rights = botRights(u.new_chat_member);
  const changed = await storeBotStatus(ctx.tx, ctx.bot.id, u.chat.id, {
    ...rights,
    at: secondsToDate(u.date),
  });
  // Nothing changed: a chat none of this bot's channels is in, or older news than what is stored.
  if (changed.length === 0) return 'ignored';
  const couldInvite = botRights(u.old_chat_member).canInvite;
  for (const c of changed) {
    if (!rights.canInvite && (couldInvite || c.couldInvite === true)) {
      ctx.log.warn(
        { botId: ctx.bot.id, channelId: c.channelId, siteId: c.siteId, status: rights.status },
        'bot lost its admin rights (invite users) in a channel: invite links, approvals and join attribution stop until it is promoted again',
      );
    }
  }
  return 'bot_status';
}
