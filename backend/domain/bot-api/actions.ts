import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { TelegramError, createTelegramClient } from '../../telegram/client.js';
import { followMigrationError } from './migration.js';
import { markInvitationRevoked } from './bot-state.js';

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

const TelegramId = z.number().int().refine(Number.isSafeInteger);
/** How many times one action follows `retry_after` before it gives up: flood waits are short. */
const MAX_FLOOD_WAITS = 20;
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
export async function enqueue(tx: Queryable, task: string, payload: object, key: string): Promise<void> {
  await tx.query(`SELECT graphile_worker.add_job($1, $2::json, max_attempts := $3, job_key := $4)`, [
    task,
    JSON.stringify(payload),
    MAX_ATTEMPTS,
    key,
  ]);
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
 * (own flood waits counted). Network failures and Telegram 5xx are thrown, for the queue's backoff.
 */
export type ActionOutcome =
  | { outcome: 'done' }
  | { outcome: 'gave_up'; reason: string }
  | { outcome: 'retry_after'; seconds: number; payload: object };

export type ActionDeps = Pick<Deps, 'pool' | 'box' | 'config' | 'log' | 'now' | 'local'>;

export type Client = ReturnType<typeof createTelegramClient>;

/**
 * Runs one Bot API call for a bot. Flood control is per bot and shared with the invite-link pool
 * (`bots.flood_wait_until`): while the bot is told to wait, nothing is sent, and a 429 here makes
 * every process hold off that bot. `settle` turns a Telegram refusal into an outcome, or null to
 * apply the common rules.
 */
export async function withBot(
  deps: ActionDeps,
  p: { botId: string; chatId: number; floodWaits: number },
  call: (tg: Client) => Promise<unknown>,
  settle: (err: TelegramError) => ActionOutcome | null = () => null,
): Promise<ActionOutcome> {
  const { rows } = await deps.pool.query<{ token_enc: string; flood_wait_until: Date | null }>(
    'SELECT token_enc, flood_wait_until FROM bots WHERE id = $1',
    [p.botId],
  );
  const bot = rows[0];
  if (!bot) return { outcome: 'gave_up', reason: 'bot no longer exists' };
  const waitMs = (bot.flood_wait_until?.getTime() ?? 0) - deps.now().getTime();
  if (waitMs > 0) return { outcome: 'retry_after', seconds: Math.ceil(waitMs / 1000), payload: p };
  const tg = createTelegramClient({
    baseUrl: deps.config.TELEGRAM_API_URL,
    token: deps.box.open(bot.token_enc),
    timeoutMs: 10_000,
  });
  try {
    await call(tg);
    return { outcome: 'done' };
  } catch (err) {
    if (!(err instanceof TelegramError)) throw err;
    const settled = settle(err);
    if (settled) return settled;
    if (await followMigrationError(deps.pool, deps.log, p.botId, p.chatId, err)) {
      return { outcome: 'retry_after', seconds: 1, payload: { ...p, chatId: err.migrateToChatId } };
    }
    if (err.kind === 'rate_limited') {
      const seconds = Math.max(1, err.retryAfterSec ?? 1);
      await deps.pool.query(
        'UPDATE bots SET flood_wait_until = $2 WHERE id = $1 AND (flood_wait_until IS NULL OR flood_wait_until < $2)',
        [p.botId, new Date(deps.now().getTime() + seconds * 1000)],
      );
      if (p.floodWaits >= MAX_FLOOD_WAITS)
        return { outcome: 'gave_up', reason: `still rate limited after ${MAX_FLOOD_WAITS} waits` };
      return { outcome: 'retry_after', seconds, payload: { ...p, floodWaits: p.floodWaits + 1 } };
    }
    if (err.kind === 'network') throw err;
    // 'api' (the request itself is refused: request already handled, rights missing) and
    // 'unauthorized' (the bot's token was revoked) do not improve with retries.
    return { outcome: 'gave_up', reason: err.message };
  }
}

export async function approveJoinRequest(deps: ActionDeps, raw: unknown): Promise<ActionOutcome> {
  const parsed = ApprovePayload.safeParse(raw);
  if (!parsed.success) return { outcome: 'gave_up', reason: 'malformed payload' };
  const p = parsed.data;
  return withBot(
    deps,
    p,
    (tg) => tg.approveChatJoinRequest({ chat_id: p.chatId, user_id: p.userId }),
    // Already in the channel (approved by a person, or by an earlier attempt whose answer was lost).
    (err) =>
      err.kind === 'api' && /USER_ALREADY_PARTICIPANT/i.test(err.message) ? { outcome: 'done' } : null,
  );
}

export async function revokeInviteLink(deps: ActionDeps, raw: unknown): Promise<ActionOutcome> {
  const parsed = RevokePayload.safeParse(raw);
  if (!parsed.success) return { outcome: 'gave_up', reason: 'malformed payload' };
  const p = parsed.data;
  const outcome = await withBot(
    deps,
    p,
    (tg) => tg.revokeChatInviteLink({ chat_id: p.chatId, invite_link: p.inviteLink }),
    // A link Telegram no longer knows (expired, revoked elsewhere) is as good as revoked.
    (err) =>
      err.kind === 'api' && /INVITE_HASH_EXPIRED|INVITE_HASH_INVALID/i.test(err.message)
        ? { outcome: 'done' }
        : null,
  );
  if (outcome.outcome === 'done') await markInvitationRevoked(deps.pool, p.invitationId, deps.now());
  return outcome;
}
