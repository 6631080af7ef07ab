import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import {
  enqueueApproveJoinRequest,
  withBot,
  type ActionDeps,
  type ActionOutcome,
} from '../bot-api/actions.js';
import { recordApprovedJoin } from './approved-joins.js';
import type { UpdateContext } from './context.js';
import type { JoinQueryResult } from './join-request-rules.js';
import { markRequestDecided } from './request-status.js';

/**
 * Guard-bot join queries (Bot API 10.1). When Capigram's bot is a chat's guard bot, each
 * `chat_join_request` carries a `query_id` that must be answered within 10 seconds: with
 * `answerChatJoinRequestQuery` (`approve`, `decline`, `queue`), or first with
 * `sendChatJoinRequestWebApp`, which shows the requester a Mini App before the answer.
 *
 * A query is recorded with what the channel's rule answers. Without the gate it is decided at
 * once and answered by a job. With `--join-gate webapp` a job shows Capigram's gate Mini App
 * (`join-gate.ts`), whose page decides it (approve, with the visit it proved or none); a fallback
 * job scheduled `JOIN_GATE_WAIT_MS` after the request decides it by the rule if the page has not.
 * Whichever decides first wins (`decision` is set once); the answer job sends it.
 */
export const JOIN_QUERY_TASKS = {
  answer: 'telegram_answer_join_query',
  showGate: 'telegram_show_join_gate',
  fallback: 'telegram_join_gate_fallback',
} as const;

/** Telegram's deadline for answering a join-request query. */
export const JOIN_QUERY_TIMEOUT_MS = 10_000;
/**
 * The gate page may decide a query until this long before the deadline: the answer job still has
 * to reach Telegram.
 */
export const GATE_DECISION_MARGIN_MS = 1_500;

const MAX_ATTEMPTS = 3;

const QueryPayload = z.object({
  queryRowId: z.string().uuid(),
  floodWaits: z.number().int().min(0).default(0),
});

export interface NewJoinQuery {
  botId: string;
  channelId: string;
  chatId: number;
  queryId: string;
  userId: number;
  ruleAnswer: JoinQueryResult;
  gate: boolean;
}

/** Records a query in the webhook's transaction and queues what answers it. */
export async function recordJoinQuery(ctx: UpdateContext, q: NewJoinQuery): Promise<void> {
  const answerBy = new Date(ctx.now.getTime() + JOIN_QUERY_TIMEOUT_MS);
  const { rows } = await ctx.tx.query<{ id: string }>(
    `INSERT INTO join_request_queries (bot_id, channel_id, query_id, telegram_user_id, received_at, answer_by,
       rule_answer, gate, decision, decided_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (bot_id, query_id) DO NOTHING RETURNING id`,
    [
      q.botId,
      q.channelId,
      q.queryId,
      q.userId,
      ctx.now,
      answerBy,
      q.ruleAnswer,
      q.gate,
      q.gate ? null : q.ruleAnswer,
      q.gate ? null : 'rule',
    ],
  );
  const id = rows[0]?.id;
  if (id === undefined) return;
  if (!q.gate) {
    await enqueueQueryJob(ctx.tx, JOIN_QUERY_TASKS.answer, id);
    return;
  }
  await enqueueQueryJob(ctx.tx, JOIN_QUERY_TASKS.showGate, id);
  await enqueueQueryJob(ctx.tx, JOIN_QUERY_TASKS.fallback, id, ctx.joinGateWaitMs);
}

/** `run_at` is compared with the database's clock, so a delay is given relative to it. */
export async function enqueueQueryJob(
  db: Queryable,
  task: string,
  queryRowId: string,
  delayMs = 0,
): Promise<void> {
  await db.query(
    `SELECT graphile_worker.add_job($1, $2::json, max_attempts := $3, job_key := $4,
       run_at := clock_timestamp() + make_interval(secs => $5::double precision / 1000))`,
    [task, JSON.stringify({ queryRowId }), MAX_ATTEMPTS, `${task}:${queryRowId}`, delayMs],
  );
}

interface QueryRow {
  id: string;
  bot_id: string;
  channel_id: string;
  chat_id: string;
  query_id: string;
  telegram_user_id: string;
  answer_by: Date;
  rule_answer: JoinQueryResult;
  decision: JoinQueryResult | null;
  visit_id: string | null;
  answered_at: Date | null;
}

async function loadQuery(db: Queryable, id: string): Promise<QueryRow | null> {
  const { rows } = await db.query<QueryRow>(
    `SELECT q.id, q.bot_id, q.channel_id, c.telegram_chat_id::text AS chat_id, q.query_id,
       q.telegram_user_id::text AS telegram_user_id, q.answer_by, q.rule_answer, q.decision, q.visit_id, q.answered_at
     FROM join_request_queries q JOIN channels c ON c.id = q.channel_id WHERE q.id = $1`,
    [id],
  );
  return rows[0] ?? null;
}

const subject = (q: QueryRow) => ({
  botId: q.bot_id,
  chatId: Number(q.chat_id),
  userId: Number(q.telegram_user_id),
});

/**
 * Sends a decided query's answer. Answered in time, an approval is the join, recorded and credited
 * at once (with the visit the gate proved, if any) as Capigram's own approvals are. A query whose
 * deadline passed, or that Telegram refused, leaves an ordinary pending request: an approval is
 * then made the ordinary way (`approveChatJoinRequest`), anything else waits for the operator.
 */
export async function answerJoinQuery(deps: ActionDeps, raw: unknown): Promise<ActionOutcome> {
  const parsed = QueryPayload.safeParse(raw);
  if (!parsed.success) return { outcome: 'gave_up', reason: 'malformed payload' };
  const q = await loadQuery(deps.pool, parsed.data.queryRowId);
  if (q === null) return { outcome: 'gave_up', reason: 'the query is gone' };
  if (q.answered_at !== null) return { outcome: 'done' };
  if (q.decision === null) return { outcome: 'gave_up', reason: 'the query is not decided' };
  const decision = q.decision;
  const p = subject(q);
  if (deps.now().getTime() >= q.answer_by.getTime())
    return answerMissed(deps, q, 'the query expired before it could be answered');
  const outcome = await withBot(
    deps,
    { botId: q.bot_id, chatId: p.chatId, floodWaits: parsed.data.floodWaits },
    (tg) => tg.answerChatJoinRequestQuery({ chat_join_request_query_id: q.query_id, result: decision }),
  );
  if (outcome.outcome === 'retry_after')
    return { ...outcome, payload: { queryRowId: q.id, floodWaits: parsed.data.floodWaits + 1 } };
  if (outcome.outcome === 'gave_up') return answerMissed(deps, q, outcome.reason);
  await deps.pool.query('UPDATE join_request_queries SET answered_at = $2 WHERE id = $1', [q.id, deps.now()]);
  if (decision === 'approve') {
    await markRequestDecided(deps.pool, p, 'approved', deps.now());
    const recorded = await recordApprovedJoin(deps, p, q.visit_id);
    deps.log.debug({ botId: q.bot_id, outcome: recorded }, 'join query approved');
  } else if (decision === 'decline') {
    await markRequestDecided(deps.pool, p, 'declined', deps.now());
  }
  return outcome;
}

async function answerMissed(deps: ActionDeps, q: QueryRow, reason: string): Promise<ActionOutcome> {
  await deps.pool.query('UPDATE join_request_queries SET answer_error = left($2, 500) WHERE id = $1', [
    q.id,
    reason,
  ]);
  if (q.decision === 'approve') await enqueueApproveJoinRequest(deps.pool, subject(q));
  return { outcome: 'gave_up', reason };
}

/**
 * Shows the gate Mini App (`sendChatJoinRequestWebApp`). Should Telegram refuse it, the query is
 * decided by the channel's rule at once rather than at the fallback.
 */
export async function showJoinGate(deps: ActionDeps, raw: unknown): Promise<ActionOutcome> {
  const parsed = QueryPayload.safeParse(raw);
  if (!parsed.success) return { outcome: 'gave_up', reason: 'malformed payload' };
  const q = await loadQuery(deps.pool, parsed.data.queryRowId);
  if (q === null) return { outcome: 'gave_up', reason: 'the query is gone' };
  if (q.decision !== null) return { outcome: 'done' };
  if (deps.now().getTime() >= q.answer_by.getTime() - GATE_DECISION_MARGIN_MS)
    return decideByRule(deps, q.id, 'too late to show the gate');
  const outcome = await withBot(
    deps,
    { botId: q.bot_id, chatId: Number(q.chat_id), floodWaits: parsed.data.floodWaits },
    (tg) =>
      tg.sendChatJoinRequestWebApp({
        chat_join_request_query_id: q.query_id,
        web_app_url: gateUrl(deps.config.PUBLIC_URL, q.channel_id),
      }),
  );
  if (outcome.outcome === 'retry_after')
    return { ...outcome, payload: { queryRowId: q.id, floodWaits: parsed.data.floodWaits + 1 } };
  if (outcome.outcome === 'gave_up') return decideByRule(deps, q.id, outcome.reason);
  await deps.pool.query('UPDATE join_request_queries SET gate_shown_at = $2 WHERE id = $1', [
    q.id,
    deps.now(),
  ]);
  return outcome;
}

/** The fallback: a query the gate page did not decide in time is decided by the channel's rule. */
export async function joinGateFallback(deps: ActionDeps, raw: unknown): Promise<ActionOutcome> {
  const parsed = QueryPayload.safeParse(raw);
  if (!parsed.success) return { outcome: 'gave_up', reason: 'malformed payload' };
  return decideByRule(deps, parsed.data.queryRowId, null);
}

async function decideByRule(
  deps: ActionDeps,
  queryRowId: string,
  why: string | null,
): Promise<ActionOutcome> {
  const { rowCount } = await deps.pool.query(
    `UPDATE join_request_queries SET decision = rule_answer, decided_by = 'fallback', answer_error = $2
     WHERE id = $1 AND decision IS NULL`,
    [queryRowId, why],
  );
  if ((rowCount ?? 0) === 0) return { outcome: 'done' };
  return answerJoinQuery(deps, { queryRowId });
}

/** Capigram's gate Mini App for a channel: the page `join-gate.ts` serves. */
export function gateUrl(publicUrl: string, channelId: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/backend/telegram/gate/${channelId}`;
}
