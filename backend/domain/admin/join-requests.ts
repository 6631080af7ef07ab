import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { ApiError, validationError } from '../../errors.js';
import { TelegramError, createTelegramClient } from '../../telegram/client.js';
import { recordApprovedJoin, requestRefused } from '../telegram/approved-joins.js';
import { markRequestDecided } from '../telegram/request-status.js';
import { Uuid } from './schemas.js';

/**
 * The operator's side of join requests a channel's rule held (`channel requests|approve|decline`,
 * the dashboard): the list, and the decision, taken with Telegram at once.
 */

export interface HeldRequest {
  telegramUserId: number;
  /** Whether the request came through one of Capigram's links, or from a user an entry tied within the window (its join is then credited to the visit). */
  attributed: boolean;
  requestedAt: string;
  /** `held`: waiting for a decision; `failed`: Telegram refused one (`reason`), and it may be tried again. */
  status: 'held' | 'failed';
  /** Telegram's refusal, for a failed request. */
  reason: string | null;
}

// A user's latest held (or failed) request, unless a join or leave of theirs came after it (a
// person decided in Telegram's app) or it was decided here.
const HELD_SQL = `SELECT DISTINCT ON (r.telegram_user_id) r.telegram_user_id::text AS user_id, (r.invitation_id IS NOT NULL OR r.visit_id IS NOT NULL) AS attributed, r.occurred_at,
    r.request_status AS status, r.request_failure AS reason
  FROM memberships r
  WHERE r.channel_id = $1 AND r.kind = 'join_request' AND r.request_status IN ('held', 'failed')
    AND NOT EXISTS (SELECT 1 FROM memberships m WHERE m.channel_id = r.channel_id AND m.telegram_user_id = r.telegram_user_id
                    AND m.kind IN ('join', 'leave') AND m.created_at > r.created_at)
  ORDER BY r.telegram_user_id, r.occurred_at DESC, r.created_at DESC`;

interface ChannelBot {
  id: string;
  bot_id: string;
  telegram_chat_id: string;
  token_enc: string;
}

async function requireChannel(db: Queryable, channelId: string): Promise<ChannelBot> {
  if (!Uuid.safeParse(channelId).success)
    throw new ApiError('VALIDATION_FAILED', `channel "${channelId}" is not a valid id`);
  const { rows } = await db.query<ChannelBot>(
    `SELECT c.id, c.bot_id, c.telegram_chat_id::text, b.token_enc FROM channels c JOIN bots b ON b.id = c.bot_id
     WHERE c.id = $1 AND c.active AND b.removed_at IS NULL`,
    [channelId],
  );
  if (!rows[0])
    throw new ApiError('NOT_FOUND', `channel ${channelId} does not exist (or is no longer active)`);
  return rows[0];
}

interface HeldRow {
  user_id: string;
  attributed: boolean;
  occurred_at: Date;
  status: 'held' | 'failed';
  reason: string | null;
}

function heldRequest(r: HeldRow): HeldRequest {
  return {
    telegramUserId: Number(r.user_id),
    attributed: r.attributed,
    requestedAt: r.occurred_at.toISOString(),
    status: r.status,
    reason: r.reason,
  };
}

/** The channel's held and failed requests, oldest first. */
export async function listHeldRequests(
  db: Queryable,
  channelId: string,
): Promise<{ requests: HeldRequest[] }> {
  const channel = await requireChannel(db, channelId);
  const { rows } = await db.query<HeldRow>(HELD_SQL, [channel.id]);
  rows.sort((a, b) => a.occurred_at.getTime() - b.occurred_at.getTime());
  return { requests: rows.map(heldRequest) };
}

export const DecideInput = z.object({
  channelId: z.string(),
  telegramUserId: z.coerce.number().int().positive().refine(Number.isSafeInteger, 'is out of range'),
  decision: z.enum(['approve', 'decline']),
});

/**
 * Approves or declines a user's join request with Telegram. An approval of an attributed request
 * (through one of Capigram's links, or an entry's tie) records the join and credits it to the
 * visit, as Capigram's own approval does.
 */
export async function decideJoinRequest(
  deps: Pick<Deps, 'pool' | 'box' | 'config' | 'log' | 'now' | 'local'>,
  input: z.input<typeof DecideInput>,
): Promise<{ telegramUserId: number; status: 'approved' | 'declined' }> {
  const parsed = DecideInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'join request');
  const { telegramUserId: userId, decision } = parsed.data;
  const channel = await requireChannel(deps.pool, parsed.data.channelId);
  const chatId = Number(channel.telegram_chat_id);
  const tg = createTelegramClient({
    baseUrl: deps.config.TELEGRAM_API_URL,
    token: deps.box.open(channel.token_enc),
    timeoutMs: 10_000,
  });
  try {
    if (decision === 'approve') await tg.approveChatJoinRequest({ chat_id: chatId, user_id: userId });
    else await tg.declineChatJoinRequest({ chat_id: chatId, user_id: userId });
  } catch (err) {
    // Already in the channel: approved by a person in Telegram's app, or an earlier approval whose answer was lost.
    const alreadyIn = err instanceof TelegramError && /USER_ALREADY_PARTICIPANT/i.test(err.message);
    if (!(alreadyIn && decision === 'approve')) {
      // A refusal of the request itself is kept on it (a flood wait or an outage is not: try again).
      if (err instanceof TelegramError && (err.kind === 'api' || err.kind === 'unauthorized'))
        await requestRefused(deps, { botId: channel.bot_id, chatId, userId }, err.message);
      throw telegramRefusal(err, userId);
    }
  }
  const status = decision === 'approve' ? 'approved' : 'declined';
  const p = { botId: channel.bot_id, chatId, userId };
  await markRequestDecided(deps.pool, p, status, deps.now());
  if (status === 'approved') await recordApprovedJoin(deps, p);
  return { telegramUserId: userId, status };
}

/** Telegram's refusals, in words an operator can act on. */
function telegramRefusal(err: unknown, userId: number): ApiError {
  if (!(err instanceof TelegramError)) throw err;
  const m = err.message;
  if (/HIDE_REQUESTER_MISSING/i.test(m)) {
    return new ApiError(
      'NOT_FOUND',
      `user ${userId} has no pending join request in this channel (Telegram: HIDE_REQUESTER_MISSING): it was approved or declined already, or withdrawn`,
    );
  }
  if (/USER_ALREADY_PARTICIPANT/i.test(m))
    return new ApiError('VALIDATION_FAILED', `user ${userId} is already a member of the channel`);
  if (/USER_CHANNELS_TOO_MUCH/i.test(m))
    return new ApiError(
      'VALIDATION_FAILED',
      `user ${userId} is in too many channels and groups already (Telegram's limit): they cannot join`,
    );
  if (/CHAT_ADMIN_REQUIRED|not enough rights|USER_NOT_MUTUAL_CONTACT|bot is not a member/i.test(m)) {
    return new ApiError(
      'VALIDATION_FAILED',
      'the bot cannot decide join requests in this channel: make it an administrator with the right to add members',
    );
  }
  if (err.kind === 'rate_limited')
    return new ApiError(
      'RATE_LIMITED',
      `Telegram asks to wait ${err.retryAfterSec ?? 1} s (flood control); try again then`,
    );
  if (err.kind === 'unauthorized')
    return new ApiError(
      'VALIDATION_FAILED',
      "Telegram refused the bot's token (revoked?); add the bot again with its new token",
    );
  if (err.kind === 'network') return new ApiError('UNAVAILABLE', 'Telegram is unreachable; try again later');
  return new ApiError('VALIDATION_FAILED', `Telegram refused: ${m}`);
}

export interface HeldRequestLine extends HeldRequest {
  channelId: string;
  channelTitle: string;
}

/** The held requests of a site's active channels, for the dashboard: oldest first, at most `limit`. */
export async function heldRequestsOfSite(
  db: Queryable,
  siteId: string,
  limit = 200,
): Promise<HeldRequestLine[]> {
  const { rows } = await db.query<HeldRow & { channel_id: string; title: string }>(
    `SELECT c.id AS channel_id, c.title, h.user_id, h.attributed, h.occurred_at, h.status, h.reason
     FROM channels c CROSS JOIN LATERAL (${HELD_SQL.replace('$1', 'c.id')}) h
     WHERE c.site_id = $1 AND c.active
     ORDER BY h.occurred_at, c.id, h.user_id LIMIT $2`,
    [siteId, limit],
  );
  return rows.map((r) => ({ channelId: r.channel_id, channelTitle: r.title, ...heldRequest(r) }));
}
