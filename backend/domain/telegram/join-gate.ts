import { isUuid } from '../../../shared/ids.js';
import type { SecretBox } from '../../crypto/secret-box.js';
import { withTx, type Queryable } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { ApiError } from '../../errors.js';
import { parseInitData, readSignedInitData, signedBy } from '../entries/init-data.js';
import { entryVisitInWindow } from '../entries/tie.js';
import { GATE_DECISION_MARGIN_MS, JOIN_QUERY_TASKS, enqueueQueryJob } from './guard-queries.js';

/**
 * The gate Mini App's decision (`POST /backend/telegram/gate/{channelId}`). Telegram opened the
 * page for a requester of the channel (`sendChatJoinRequestWebApp`); the page posts its signed
 * `initData`, which names the Telegram user and the join-request query, and Capigram's own cookie
 * if the browser has one. The requester is tied to a visit only on proof:
 *
 * 1. `invitation`: the request came through one of Capigram's links (private chats), the link's visit;
 * 2. `entry`: an entry (bot start, Mini App open) tied this Telegram user to a visit of the site
 *    within ATTRIBUTION_WINDOW_DAYS, the newest such visit;
 * 3. `browser`: the page's request carries Capigram's browser id (`capigram_tid`, first-party on
 *    Capigram's host), and that browser made a consented visit of the site for this channel (or for
 *    no channel) within the window that no other user's join was credited to, the newest.
 *
 * Nothing else (no IP, no User-Agent, no time proximity) ties anyone: without proof the join is
 * approved and organic. Either way the query is decided `approve` and answered by the job.
 */

export type GateProof = 'invitation' | 'entry' | 'browser';

export interface GateResult {
  /** The query is (or was already) decided to be approved. */
  approved: boolean;
  /** The requester was tied to a visit, whose join is credited when the approval lands. */
  attributed: boolean;
  /** Who decided the query: this page, or the channel's rule (too late, or decided before). */
  decidedBy: 'gate' | 'rule';
}

const invalid = (why: string) => new ApiError('INIT_DATA_INVALID', why);

interface GateChannel {
  id: string;
  site_id: string;
  bot_id: string;
  token_enc: string;
}

export async function completeGate(
  deps: Pick<Deps, 'pool' | 'box' | 'now' | 'log' | 'config'>,
  q: { channelId: string; initData: string; browserId: string | undefined },
): Promise<GateResult> {
  const channel = isUuid(q.channelId) ? await gateChannel(deps.pool, q.channelId) : null;
  if (channel === null) throw new ApiError('NOT_FOUND', 'no channel with a join gate here');
  const userId = verifiedUser(deps.box, channel, q.initData, deps.now());
  const now = deps.now();
  const result = await withTx(deps.pool, async (tx): Promise<GateResult | null> => {
    const query = await lockOpenQuery(tx, channel, userId, q.initData);
    if (query === null) return null;
    if (query.decision !== null)
      return {
        approved: query.decision === 'approve',
        attributed: query.visit_id !== null,
        decidedBy: query.decided_by === 'gate' ? 'gate' : 'rule',
      };
    // Too close to Telegram's deadline: the fallback answers by the rule, as if the page never came.
    if (now.getTime() >= query.answer_by.getTime() - GATE_DECISION_MARGIN_MS)
      return { approved: query.rule_answer === 'approve', attributed: false, decidedBy: 'rule' };
    const proof = await proveVisit(
      tx,
      channel,
      userId,
      q.browserId,
      now,
      deps.config.ATTRIBUTION_WINDOW_DAYS,
    );
    await tx.query(
      `UPDATE join_request_queries SET decision = 'approve', decided_by = 'gate', visit_id = $2, proof = $3 WHERE id = $1`,
      [query.id, proof?.visitId ?? null, proof?.proof ?? null],
    );
    // The request is the visit's now, as one an entry's tie made attributed (`pendingEntryRequest`).
    if (proof !== null && proof.proof !== 'invitation')
      await tx.query(
        `UPDATE memberships SET visit_id = $3 WHERE id = (
           SELECT id FROM memberships WHERE channel_id = $1 AND telegram_user_id = $2 AND kind = 'join_request'
             AND invitation_id IS NULL ORDER BY occurred_at DESC, created_at DESC LIMIT 1)`,
        [channel.id, userId, proof.visitId],
      );
    await enqueueQueryJob(tx, JOIN_QUERY_TASKS.answer, query.id);
    deps.log.info(
      { channelId: channel.id, proof: proof?.proof ?? null, queryRowId: query.id },
      'join gate completed',
    );
    return { approved: true, attributed: proof !== null, decidedBy: 'gate' };
  });
  if (result === null) throw new ApiError('NOT_FOUND', 'no join request of this user waits for this gate');
  return result;
}

async function gateChannel(db: Queryable, channelId: string): Promise<GateChannel | null> {
  const { rows } = await db.query<GateChannel>(
    `SELECT c.id, c.site_id, c.bot_id, b.token_enc FROM channels c JOIN bots b ON b.id = c.bot_id AND b.removed_at IS NULL
     WHERE c.id = $1 AND c.active AND c.join_gate = 'webapp'`,
    [channelId],
  );
  return rows[0] ?? null;
}

function verifiedUser(box: SecretBox, channel: GateChannel, initData: string, now: Date): number {
  const fields = parseInitData(initData);
  if (fields === null) throw invalid('initData is not Telegram.WebApp.initData (no hash)');
  if (!signedBy(fields, box.open(channel.token_enc)))
    throw invalid("initData is not signed by this channel's bot (forged, altered, or another bot's)");
  const read = readSignedInitData(fields, now);
  if (!read.ok) throw invalid(`initData ${read.reason}`);
  return read.data.userId;
}

interface OpenQuery {
  id: string;
  answer_by: Date;
  rule_answer: string;
  decision: string | null;
  decided_by: string | null;
  visit_id: string | null;
}

/**
 * The query this page was opened for, locked: the one `chat_join_request_query_id` names (signed
 * with the rest of initData), which must be this user's in this channel; else the user's newest
 * query in the channel.
 */
async function lockOpenQuery(
  tx: Queryable,
  channel: GateChannel,
  userId: number,
  initData: string,
): Promise<OpenQuery | null> {
  const queryId = new URLSearchParams(initData).get('chat_join_request_query_id');
  const { rows } = await tx.query<OpenQuery>(
    `SELECT id, answer_by, rule_answer, decision, decided_by, visit_id FROM join_request_queries
     WHERE channel_id = $1 AND telegram_user_id = $2 AND gate AND ($3::text IS NULL OR query_id = $3)
     ORDER BY received_at DESC LIMIT 1 FOR UPDATE`,
    [channel.id, userId, queryId],
  );
  return rows[0] ?? null;
}

async function proveVisit(
  tx: Queryable,
  channel: GateChannel,
  userId: number,
  browserId: string | undefined,
  now: Date,
  windowDays: number,
): Promise<{ visitId: string; proof: GateProof } | null> {
  const { rows: linked } = await tx.query<{ visit_id: string }>(
    `SELECT i.visit_id FROM memberships m JOIN invitations i ON i.id = m.invitation_id
     WHERE m.channel_id = $1 AND m.telegram_user_id = $2 AND m.kind = 'join_request' AND i.visit_id IS NOT NULL
     ORDER BY m.occurred_at DESC, m.created_at DESC LIMIT 1`,
    [channel.id, userId],
  );
  if (linked[0]) return { visitId: linked[0].visit_id, proof: 'invitation' };
  const entry = await entryVisitInWindow(tx, {
    siteId: channel.site_id,
    telegramUserId: userId,
    at: now,
    windowDays,
  });
  if (entry !== null) return { visitId: entry, proof: 'entry' };
  if (browserId === undefined || !isUuid(browserId) || windowDays <= 0) return null;
  const { rows } = await tx.query<{ id: string }>(
    `SELECT v.id FROM visits v
     WHERE v.site_id = $1 AND v.temp_id = $2 AND v.consented AND (v.channel_id = $3 OR v.channel_id IS NULL)
       AND v.created_at > $4::timestamptz - make_interval(days => $5)
       AND NOT EXISTS (SELECT 1 FROM memberships m WHERE m.visit_id = v.id AND m.attributed AND m.telegram_user_id <> $6)
     ORDER BY v.created_at DESC LIMIT 1`,
    [channel.site_id, browserId, channel.id, now, windowDays, userId],
  );
  return rows[0] ? { visitId: rows[0].id, proof: 'browser' } : null;
}
