import type { Queryable } from '../../db/pool.js';
import type { Logger } from '../../log.js';
import { TelegramError } from '../../telegram/client.js';
import { moveChannelChat } from './bot-state.js';

/**
 * Follows a basic group's upgrade to a supergroup: Telegram answers calls about the old chat with
 * `parameters.migrate_to_chat_id` (and posts a service message with it), then sends every update
 * from the new id. Without following it, every later join would be an "unknown chat".
 */
export async function followChatMigration(
  db: Queryable,
  log: Logger,
  m: { botId: string; fromChatId: number; toChatId: number },
): Promise<string[]> {
  if (m.fromChatId === m.toChatId) return [];
  const moved = await moveChannelChat(db, m.botId, m.fromChatId, m.toChatId);
  if (moved.length > 0)
    log.warn(
      { botId: m.botId, channelIds: moved, from: m.fromChatId, to: m.toChatId },
      'a basic group was upgraded to a supergroup: its channel follows it to the new chat id',
    );
  return moved;
}

/** The same, when a Bot API refusal says so; true when it did (the call can then be retried). */
export async function followMigrationError(
  db: Queryable,
  log: Logger,
  botId: string,
  chatId: number,
  err: unknown,
): Promise<boolean> {
  if (!(err instanceof TelegramError) || err.migrateToChatId === undefined) return false;
  await followChatMigration(db, log, { botId, fromChatId: chatId, toChatId: err.migrateToChatId });
  return true;
}
