import type { Queryable } from '../../db/pool.js';

/**
 * Notes what became of a user's waiting join requests in a channel (approved by Capigram's job or
 * by the operator, declined by the operator), so that they leave the list of held requests.
 */
export async function markRequestDecided(
  db: Queryable,
  p: { botId: string; chatId: number; userId: number },
  status: 'approved' | 'declined',
  at: Date,
): Promise<void> {
  await db.query(
    `UPDATE memberships m SET request_status = $4, request_decided_at = $5
     FROM channels c
     WHERE c.id = m.channel_id AND c.bot_id = $1 AND c.telegram_chat_id = $2 AND c.active
       AND m.telegram_user_id = $3 AND m.kind = 'join_request' AND m.request_status IN ('approving', 'held', 'failed')`,
    [p.botId, p.chatId, p.userId, status, at],
  );
}

/**
 * Telegram refused to approve or decline a user's waiting request: it is listed as `failed` with
 * Telegram's reason, for the operator to try again (`channel approve|decline`), never left
 * "approving" where nobody sees it.
 */
export async function markRequestFailed(
  db: Queryable,
  p: { botId: string; chatId: number; userId: number },
  reason: string,
  at: Date,
): Promise<void> {
  await db.query(
    `UPDATE memberships m SET request_status = 'failed', request_failure = left($4, 500), request_decided_at = $5
     FROM channels c
     WHERE c.id = m.channel_id AND c.bot_id = $1 AND c.telegram_chat_id = $2 AND c.active
       AND m.telegram_user_id = $3 AND m.kind = 'join_request' AND m.request_status IN ('approving', 'held', 'failed')`,
    [p.botId, p.chatId, p.userId, reason, at],
  );
}

/** A refusal that says the bot lacks its rights in the chat: its rights are checked again. */
export const RIGHTS_REFUSAL =
  /CHAT_ADMIN_REQUIRED|not enough rights|bot is not a member|USER_NOT_MUTUAL_CONTACT/i;
