import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { TelegramError, createTelegramClient } from '../../telegram/client.js';
import { markInvitationRevoked } from './queries.js';

/**
 * Bot API side effects of the webhook (approving join requests, revoking used links). They are
 * queued as jobs in the webhook's own transaction, so the webhook answers Telegram at once and an
 * action exists exactly when the update that caused it was committed. The job runs them later with
 * retries; Telegram's flood control (429 `retry_after`) is honoured by rescheduling.
 */
export const TELEGRAM_TASKS = {
  approveJoinRequest: 'telegram_approve_join_request',
  revokeInviteLink: 'telegram_revoke_invite_link',
} as const;
export type TelegramTask = (typeof TELEGRAM_TASKS)[keyof typeof TELEGRAM_TASKS];

const TelegramId = z.number().int().refine(Number.isSafeInteger);
/** How many times one action follows `retry_after` before it gives up: flood waits are short. */
export const MAX_FLOOD_WAITS = 20;
/** Attempts on network failures and Telegram 5xx (graphile-worker backs off exponentially). */
const MAX_ATTEMPTS = 10;

export const ApprovePayload = z.object({
  botId: z.string().uuid(),
  chatId: TelegramId,
  userId: TelegramId,
  floodWaits: z.number().int().min(0).default(0),
});
export type ApprovePayload = z.input<typeof ApprovePayload>;

export const RevokePayload = z.object({
  botId: z.string().uuid(),
  chatId: TelegramId,
  invitationId: z.string().uuid(),
  inviteLink: z.string().min(1).max(2048),
  floodWaits: z.number().int().min(0).default(0),
});
export type RevokePayload = z.input<typeof RevokePayload>;

/** The job key names the action's subject: a second identical action still waiting merges with the first. */
async function enqueue(tx: Queryable, task: TelegramTask, payload: object, key: string): Promise<void> {
  await tx.query(`SELECT graphile_worker.add_job($1, $2::json, max_attempts := $3, job_key := $4)`, [task, JSON.stringify(payload), MAX_ATTEMPTS, key]);
}

export function approveJobKey(p: Pick<ApprovePayload, 'botId' | 'chatId' | 'userId'>): string {
  return `${TELEGRAM_TASKS.approveJoinRequest}:${p.botId}:${p.chatId}:${p.userId}`;
}

export function revokeJobKey(invitationId: string): string {
  return `${TELEGRAM_TASKS.revokeInviteLink}:${invitationId}`;
}

export function enqueueApproveJoinRequest(tx: Queryable, p: ApprovePayload): Promise<void> {
  return enqueue(tx, TELEGRAM_TASKS.approveJoinRequest, p, approveJobKey(p));
}

export function enqueueRevokeInviteLink(tx: Queryable, p: RevokePayload): Promise<void> {
  return enqueue(tx, TELEGRAM_TASKS.revokeInviteLink, p, revokeJobKey(p.invitationId));
}

/**
 * What became of one attempt. `retry_after`: run again in that many seconds with the payload given
 * (flood wait counted). Network failures and Telegram 5xx are thrown, for the queue's backoff.
 */
export type ActionOutcome =
  | { outcome: 'done' }
  | { outcome: 'gave_up'; reason: string }
  | { outcome: 'retry_after'; seconds: number; payload: object };

export type ActionDeps = Pick<Deps, 'pool' | 'box' | 'config' | 'log' | 'now'>;

async function botClient(deps: ActionDeps, botId: string) {
  const { rows } = await deps.pool.query<{ token_enc: string }>('SELECT token_enc FROM bots WHERE id = $1', [botId]);
  const row = rows[0];
  return row ? createTelegramClient({ baseUrl: deps.config.TELEGRAM_API_URL, token: deps.box.open(row.token_enc), timeoutMs: 10_000 }) : null;
}

/** Shared failure handling: what to retry, what to wait for, what is final. */
function onFailure(err: unknown, payload: { floodWaits: number }): ActionOutcome {
  if (!(err instanceof TelegramError)) throw err;
  if (err.kind === 'rate_limited') {
    if (payload.floodWaits >= MAX_FLOOD_WAITS) return { outcome: 'gave_up', reason: `still rate limited after ${MAX_FLOOD_WAITS} waits` };
    return { outcome: 'retry_after', seconds: Math.max(1, err.retryAfterSec ?? 1), payload: { ...payload, floodWaits: payload.floodWaits + 1 } };
  }
  if (err.kind === 'network') throw err;
  // 'api' (the request itself is refused: request already handled, link gone, rights missing) and
  // 'unauthorized' (the bot's token was revoked) do not improve with retries.
  return { outcome: 'gave_up', reason: err.message };
}

export async function approveJoinRequest(deps: ActionDeps, raw: unknown): Promise<ActionOutcome> {
  const parsed = ApprovePayload.safeParse(raw);
  if (!parsed.success) return { outcome: 'gave_up', reason: 'malformed payload' };
  const p = parsed.data;
  const tg = await botClient(deps, p.botId);
  if (!tg) return { outcome: 'gave_up', reason: 'bot no longer exists' };
  try {
    await tg.approveChatJoinRequest({ chat_id: p.chatId, user_id: p.userId });
  } catch (err) {
    // Already in the channel (approved by a person, or by an earlier attempt whose answer was lost).
    if (err instanceof TelegramError && err.kind === 'api' && /USER_ALREADY_PARTICIPANT/i.test(err.message)) return { outcome: 'done' };
    return onFailure(err, p);
  }
  return { outcome: 'done' };
}

export async function revokeInviteLink(deps: ActionDeps, raw: unknown): Promise<ActionOutcome> {
  const parsed = RevokePayload.safeParse(raw);
  if (!parsed.success) return { outcome: 'gave_up', reason: 'malformed payload' };
  const p = parsed.data;
  const tg = await botClient(deps, p.botId);
  if (!tg) return { outcome: 'gave_up', reason: 'bot no longer exists' };
  try {
    await tg.revokeChatInviteLink({ chat_id: p.chatId, invite_link: p.inviteLink });
  } catch (err) {
    // A link Telegram no longer knows (expired, revoked elsewhere) is as good as revoked.
    const gone = err instanceof TelegramError && err.kind === 'api' && /INVITE_HASH_EXPIRED|INVITE_HASH_INVALID/i.test(err.message);
    if (!gone) return onFailure(err, p);
  }
  await markInvitationRevoked(deps.pool, p.invitationId, deps.now());
  return { outcome: 'done' };
}
