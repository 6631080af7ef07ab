import { entryVisitInWindow } from '../entries/tie.js';
import { upsertLead } from '../outbox/conversion-record.js';
import { enqueueApproveJoinRequest } from '../bot-api/actions.js';
import { secondsToDate, type UpdateContext, type UpdateOutcome } from './context.js';
import { joinQueryAnswer, joinRequestDecision, type JoinRequestRule } from './join-request-rules.js';
import { recordJoinQuery } from './guard-queries.js';
import { enqueueJoinWelcome } from './join-welcome.js';
import { findChannel, insertMembership, lockInvitationByLink } from './queries.js';
import type { ChatJoinRequest } from './updates.js';

/**
 * `chat_join_request`: recorded with its invitation when it came through one of our links, or
 * else with the visit an entry tied the user to within the window (the request is that visit's,
 * as the join would be: see `creditJoin`), then approved or held by the channel's rule (`join-request-rules.ts`). An approval is a queued job;
 * the join (and its conversion) is recorded when it succeeds (`approved-joins.ts`), since the
 * `chat_member` update that should follow is not always sent. A held request waits for the
 * operator (`channel approve|decline`, the dashboard, or Telegram's app). With a welcome text,
 * the requester gets it first, while the request waits (Telegram allows messages to
 * `user_chat_id` only until the request is decided), and the approval follows it. Telegram sends
 * join requests to public chats without their link (tdlib/telegram-bot-api#580), which is why
 * `channel add` refuses join-request mode for them. A request with a `query_id` (this bot is the
 * chat's guard bot, public chats included) is answered through its query (`guard-queries.ts`).
 */
export async function handleJoinRequest(ctx: UpdateContext, r: ChatJoinRequest): Promise<UpdateOutcome> {
  const channel = await findChannel(ctx.tx, ctx.bot.id, r.chat.id);
  if (!channel) return 'unknown_chat';
  const { rows } = await ctx.tx.query<{
    join_requests: JoinRequestRule;
    welcome_text: string | null;
    join_gate: 'off' | 'webapp';
  }>('SELECT join_requests, welcome_text, join_gate FROM channels WHERE id = $1', [channel.id]);
  const rule = rows[0]!;
  const userId = r.from.id;
  const occurredAt = secondsToDate(r.date);
  const leadId = await upsertLead(ctx.tx, channel.site_id, userId, occurredAt);
  const invitation = r.invite_link
    ? await lockInvitationByLink(ctx.tx, channel.id, r.invite_link.invite_link)
    : null;
  const entryVisit =
    invitation === null
      ? await entryVisitInWindow(ctx.tx, {
          siteId: channel.site_id,
          telegramUserId: userId,
          at: occurredAt,
          windowDays: ctx.attributionWindowDays,
        })
      : null;
  const attributed = invitation !== null || entryVisit !== null;
  const decision = joinRequestDecision(rule.join_requests, attributed);
  await insertMembership(ctx.tx, {
    channelId: channel.id,
    telegramUserId: userId,
    leadId,
    kind: 'join_request',
    invitationId: invitation?.id ?? null,
    visitId: invitation?.visit_id ?? entryVisit,
    requestStatus: decision === 'approve' ? 'approving' : 'held',
    occurredAt,
  });
  const request = { botId: ctx.bot.id, chatId: r.chat.id, userId };
  if (r.query_id !== undefined) {
    // This bot is the chat's guard bot: the query is the answer, within 10 seconds. A welcome
    // goes out beside it, not before it (there is no time to wait for it).
    const gate = rule.join_gate === 'webapp';
    await recordJoinQuery(ctx, {
      botId: ctx.bot.id,
      channelId: channel.id,
      chatId: r.chat.id,
      queryId: r.query_id,
      userId,
      ruleAnswer: joinQueryAnswer(rule.join_requests, attributed),
      gate,
    });
    if (rule.welcome_text !== null)
      await enqueueJoinWelcome(ctx.tx, {
        ...request,
        userChatId: r.user_chat_id ?? userId,
        requestedAt: r.date,
        approve: false,
      });
    return decision === 'approve' && !gate ? 'join_request_approved' : 'join_request_recorded';
  }
  if (rule.welcome_text !== null) {
    await enqueueJoinWelcome(ctx.tx, {
      ...request,
      userChatId: r.user_chat_id ?? userId,
      requestedAt: r.date,
      approve: decision === 'approve',
    });
  } else if (decision === 'approve') {
    await enqueueApproveJoinRequest(ctx.tx, request);
  }
  return decision === 'approve' ? 'join_request_approved' : 'join_request_recorded';
}
