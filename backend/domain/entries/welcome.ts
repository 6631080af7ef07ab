import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import { withBot, type ActionDeps, type ActionOutcome } from '../bot-api/actions.js';
import { findChannel } from '../invites/invite-channels.js';
import { inviteForVisit } from '../invites/handout.js';

/**
 * The bot's answer to `/start`: the entry's welcome text and, when the entry names a channel, a
 * button to it. Queued as a job in the webhook's transaction (the webhook answers Telegram at
 * once; the message exists exactly when the start was recorded) and sent with the same retries
 * and flood-control rules as the webhook's other Bot API calls.
 */
export const SEND_WELCOME_TASK = 'telegram_send_welcome';

/** Telegram's limit for a message's text (1–4096 characters after entity parsing; we send plain text). */
const MAX_MESSAGE_CHARS = 4096;

const TelegramId = z.number().int().refine(Number.isSafeInteger);
export const WelcomePayload = z.object({
  botId: z.string().uuid(),
  /** The private chat with the user: its id is the user's id. */
  chatId: TelegramId,
  entryId: z.string().uuid(),
  /** The visit the start was tied to: a private channel's button is that visit's invite link. */
  visitId: z.string().uuid().nullable(),
  floodWaits: z.number().int().min(0).default(0),
});
export type WelcomePayload = z.input<typeof WelcomePayload>;

/** One welcome per start update: the update's own id keys the job, so a resent update merges with it. */
export async function enqueueWelcome(tx: Queryable, p: WelcomePayload, updateKey: string): Promise<void> {
  await tx.query(`SELECT graphile_worker.add_job($1, $2::json, max_attempts := 10, job_key := $3)`, [
    SEND_WELCOME_TASK,
    JSON.stringify(p),
    `${SEND_WELCOME_TASK}:${updateKey}`,
  ]);
}

/** What the message says and where its button goes; null when the entry has nothing to say. Pure. */
function welcomeMessage(
  e: { welcomeText: string | null; channelTitle: string | null },
  buttonUrl: string | null,
): {
  text: string;
  reply_markup?: { inline_keyboard: { text: string; url: string }[][] };
} | null {
  const button =
    buttonUrl === null || e.channelTitle === null
      ? null
      : { text: `Join ${e.channelTitle}`.slice(0, 64), url: buttonUrl };
  const text = e.welcomeText ?? (button ? `Welcome! Join ${e.channelTitle}:` : null);
  if (text === null) return null;
  return {
    text: text.slice(0, MAX_MESSAGE_CHARS),
    ...(button ? { reply_markup: { inline_keyboard: [[button]] } } : {}),
  };
}

export async function sendWelcome(deps: ActionDeps, raw: unknown): Promise<ActionOutcome> {
  const parsed = WelcomePayload.safeParse(raw);
  if (!parsed.success) return { outcome: 'gave_up', reason: 'malformed payload' };
  const p = parsed.data;
  const { rows } = await deps.pool.query<{
    welcome_text: string | null;
    channel_id: string | null;
    title: string | null;
  }>(
    `SELECT e.welcome_text, e.channel_id, c.title FROM entries e LEFT JOIN channels c ON c.id = e.channel_id AND c.active WHERE e.id = $1`,
    [p.entryId],
  );
  const entry = rows[0];
  if (!entry) return { outcome: 'gave_up', reason: 'entry no longer exists' };
  const buttonUrl =
    entry.channel_id === null || entry.title === null
      ? null
      : await channelUrl(deps, entry.channel_id, p.visitId);
  const message = welcomeMessage({ welcomeText: entry.welcome_text, channelTitle: entry.title }, buttonUrl);
  if (message === null) return { outcome: 'done' };
  return withBot(deps, p, (tg) => tg.sendMessage({ chat_id: p.chatId, ...message }));
}

/**
 * Where the button leads: a public channel's address (its joins are credited to the visit
 * through the entry's tie), else the visit's own invite link (credited as any invite link is),
 * else the channel's public invite URL.
 */
async function channelUrl(
  deps: ActionDeps,
  channelId: string,
  visitId: string | null,
): Promise<string | null> {
  const channel = await findChannel(deps.pool, channelId);
  if (channel === null) return null;
  if (channel.username !== null) return `https://t.me/${channel.username}`;
  if (visitId !== null) return (await inviteForVisit(deps, { visitId, channel, mode: 'usable' })).inviteLink;
  return channel.publicInviteUrl;
}
