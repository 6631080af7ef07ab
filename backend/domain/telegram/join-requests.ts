import { upsertLead } from '../outbox/conversion-record.js';
import { enqueueApproveJoinRequest } from './actions.js';
import { secondsToDate, type UpdateContext, type UpdateOutcome } from './context.js';
import { findChannel, insertMembership, lockInvitationByLink } from './queries.js';
import type { ChatJoinRequest } from './updates.js';

/**
 * `chat_join_request`: a request through one of our links is recorded with its invitation and
 * approved by a queued job; the join (and its conversion) is recorded when that approval succeeds
 * (`approved-joins.ts`), since the `chat_member` update that should follow is not always sent. A
 * request through any other link, or none, is recorded and left to the channel's owner: Capigram
 * approves only the people its own links brought. Telegram sends join requests to public chats
 * without their link (tdlib/telegram-bot-api#580), which is why `channel add` refuses
 * join-request mode for them.
 */
export async function handleJoinRequest(ctx: UpdateContext, r: ChatJoinRequest): Promise<UpdateOutcome> {
  const channel = await findChannel(ctx.tx, ctx.bot.id, r.chat.id);
  if (!channel) return 'unknown_chat';
  const userId = r.from.id;
  const occurredAt = secondsToDate(r.date);
  const leadId = await upsertLead(ctx.tx, channel.site_id, userId, occurredAt);
  const invitation = r.invite_link ? await lockInvitationByLink(ctx.tx, channel.id, r.invite_link.invite_link) : null;
  await insertMembership(ctx.tx, {
    channelId: channel.id,
    telegramUserId: userId,
    leadId,
    kind: 'join_request',
    invitationId: invitation?.id ?? null,
    visitId: invitation?.visit_id ?? null,
    occurredAt,
  });
  if (!invitation) return 'join_request_recorded';
  await enqueueApproveJoinRequest(ctx.tx, { botId: ctx.bot.id, chatId: r.chat.id, userId });
  return 'join_request_approved';
}
