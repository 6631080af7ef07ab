import { withTx } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { upsertLead } from '../outbox/conversion-record.js';
import {
  ApprovePayload,
  approveJoinRequest,
  type ActionDeps,
  type ActionOutcome,
} from '../bot-api/actions.js';
import type { UpdateContext, UpdateOutcome } from './context.js';
import { creditJoin } from './credit.js';
import { findChannel, lockPendingRequestInvitation, pendingEntryRequest } from './queries.js';
import { queueRightsCheck } from '../bot-api/rights-check.js';
import { markRequestDecided, markRequestFailed, RIGHTS_REFUSAL } from './request-status.js';

/**
 * Capigram's approveChatJoinRequest succeeded (or Telegram said the user is already in): the user
 * is in the channel now, through the link of their pending request (or, for a request an entry's
 * tie made attributed, without one: `creditJoin` credits it to the entry's visit within the window). The join is recorded and
 * credited at once rather than when the `chat_member` update comes, because that update is not
 * always sent; when it does come it is matched to this join and adds nothing (see `joins.ts`).
 * Nothing is recorded when that update came first (the request is no longer pending) or the
 * channel is gone.
 */
export async function recordApprovedJoin(
  deps: Pick<Deps, 'pool' | 'log' | 'now' | 'local' | 'config'>,
  p: { botId: string; chatId: number; userId: number },
  /** A visit the gate Mini App proved for this request (`join-gate.ts`). */
  provenVisit: string | null = null,
): Promise<UpdateOutcome | 'nothing'> {
  const outcome = await withTx(deps.pool, async (tx): Promise<UpdateOutcome | 'nothing'> => {
    const { rows } = await tx.query<{ telegram_bot_id: string }>(
      'SELECT telegram_bot_id::text FROM bots WHERE id = $1',
      [p.botId],
    );
    const bot = rows[0];
    if (!bot) return 'nothing';
    const channel = await findChannel(tx, p.botId, p.chatId);
    if (!channel) return 'nothing';
    const now = deps.now();
    const ctx: UpdateContext = {
      tx,
      bot: { id: p.botId, telegramBotId: Number(bot.telegram_bot_id) },
      now,
      log: deps.log,
      attributionWindowDays: deps.config.ATTRIBUTION_WINDOW_DAYS,
      joinGateWaitMs: deps.config.JOIN_GATE_WAIT_MS,
    };
    const leadId = await upsertLead(tx, channel.site_id, p.userId, now);
    const invitation = await lockPendingRequestInvitation(tx, channel.id, p.userId, null);
    if (!invitation && !(await pendingEntryRequest(tx, channel.id, p.userId))) return 'nothing';
    return creditJoin(ctx, {
      channel,
      chatId: p.chatId,
      userId: p.userId,
      leadId,
      invitation,
      occurredAt: now,
      viaJoinRequest: true,
      recordedBy: 'approval',
      provenVisit,
    });
  });
  if (outcome === 'attributed_join') deps.local.waker.wake();
  return outcome;
}

/**
 * The approval job: approveChatJoinRequest, then the join recorded. Should recording fail (the
 * database), the job is retried: Telegram then answers USER_ALREADY_PARTICIPANT, which approves
 * as well, and the join is recorded on that attempt. A refusal (the user is in too many chats, the
 * bot lacks the right to add members, the request is gone) leaves the request `failed` with
 * Telegram's reason for the operator, and a rights refusal has the channel's rights checked again.
 */
export async function approveAndRecordJoin(deps: ActionDeps, raw: unknown): Promise<ActionOutcome> {
  const outcome = await approveJoinRequest(deps, raw);
  if (outcome.outcome === 'gave_up') {
    const parsed = ApprovePayload.safeParse(raw);
    if (parsed.success) await requestRefused(deps, parsed.data, outcome.reason);
    return outcome;
  }
  if (outcome.outcome !== 'done') return outcome;
  const p = ApprovePayload.parse(raw);
  await markRequestDecided(deps.pool, p, 'approved', deps.now());
  const recorded = await recordApprovedJoin(deps, p);
  deps.log.debug({ botId: p.botId, outcome: recorded }, 'join request approved');
  return outcome;
}

/** Telegram refused a decision on a user's request: listed as failed; a rights refusal re-checks the rights. */
export async function requestRefused(
  deps: Pick<Deps, 'pool' | 'now'>,
  p: { botId: string; chatId: number; userId: number },
  reason: string,
): Promise<void> {
  await markRequestFailed(deps.pool, p, reason, deps.now());
  if (!RIGHTS_REFUSAL.test(reason)) return;
  const channel = await findChannel(deps.pool, p.botId, p.chatId);
  if (channel) await queueRightsCheck(deps.pool, channel.id);
}
