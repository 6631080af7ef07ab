import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import {
  enqueue,
  enqueueApproveJoinRequest,
  withBot,
  type ActionDeps,
  type ActionOutcome,
} from '../bot-api/actions.js';
import { WELCOME_WINDOW_MS } from './join-request-rules.js';
import { findChannel } from './queries.js';

/**
 * A channel's welcome text, sent to a join request's `user_chat_id` while the request waits.
 * Telegram accepts such messages for 5 minutes after the request and only until it is decided, so
 * the welcome goes first and the approval (when the channel's rule approves) is queued after it,
 * whatever became of the welcome: a welcome Telegram refuses must not keep anyone out.
 */
export const JOIN_WELCOME_TASK = 'telegram_send_join_welcome';

const TelegramId = z.number().int().refine(Number.isSafeInteger);

export const WelcomePayload = z.object({
  botId: z.string().uuid(),
  chatId: TelegramId,
  userId: TelegramId,
  userChatId: TelegramId,
  /** The request's date, unix seconds. */
  requestedAt: z.number().int().min(0),
  /** Queue the approval once the welcome is sent (or cannot be). */
  approve: z.boolean(),
  floodWaits: z.number().int().min(0).default(0),
});
export type WelcomePayload = z.input<typeof WelcomePayload>;

function welcomeJobKey(p: Pick<WelcomePayload, 'botId' | 'chatId' | 'userId'>): string {
  return `${JOIN_WELCOME_TASK}:${p.botId}:${p.chatId}:${p.userId}`;
}

export function enqueueJoinWelcome(tx: Queryable, p: WelcomePayload): Promise<void> {
  return enqueue(tx, JOIN_WELCOME_TASK, p, welcomeJobKey(p));
}

export async function sendJoinWelcome(deps: ActionDeps, raw: unknown): Promise<ActionOutcome> {
  const parsed = WelcomePayload.safeParse(raw);
  if (!parsed.success) return { outcome: 'gave_up', reason: 'malformed payload' };
  const p = parsed.data;
  const outcome = await welcome(deps, p);
  if (outcome.outcome === 'retry_after') return outcome;
  if (p.approve)
    await enqueueApproveJoinRequest(deps.pool, { botId: p.botId, chatId: p.chatId, userId: p.userId });
  return outcome;
}

async function welcome(deps: ActionDeps, p: z.infer<typeof WelcomePayload>): Promise<ActionOutcome> {
  if (deps.now().getTime() - p.requestedAt * 1000 > WELCOME_WINDOW_MS)
    return {
      outcome: 'gave_up',
      reason: 'the request is older than the 5 minutes Telegram allows for messages',
    };
  const channel = await findChannel(deps.pool, p.botId, p.chatId);
  if (!channel) return { outcome: 'gave_up', reason: 'the channel is gone' };
  const { rows } = await deps.pool.query<{ welcome_text: string | null }>(
    'SELECT welcome_text FROM channels WHERE id = $1',
    [channel.id],
  );
  const text = rows[0]?.welcome_text;
  if (!text) return { outcome: 'done' };
  return withBot(deps, p, (tg) => tg.sendMessage({ chat_id: p.userChatId, text }));
}
