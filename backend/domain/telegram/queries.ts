import type { Queryable } from '../../db/pool.js';
import type { EventTypeName } from '../outbox/conversion-record.js';

/** SQL of the webhook's domain: channels, invitations, memberships and seen updates. */

/** Claims (bot, update_id); false when the update was already handled (Telegram resends on any doubt). */
export async function claimUpdate(
  tx: Queryable,
  botId: string,
  updateId: number,
  kind: string,
): Promise<boolean> {
  const { rowCount } = await tx.query(
    `INSERT INTO telegram_updates (bot_id, update_id, kind) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
    [botId, updateId, kind],
  );
  return rowCount === 1;
}

export interface ChannelRow {
  id: string;
  site_id: string;
  title: string;
  event_type: EventTypeName;
  custom_event_name: string | null;
  fixed_value: number | null;
  fixed_currency: string | null;
  manual_value: boolean;
}

/** The active channel a bot serves in a chat (unique by migration 030), or null. */
export async function findChannel(tx: Queryable, botId: string, chatId: number): Promise<ChannelRow | null> {
  const { rows } = await tx.query<ChannelRow>(
    `SELECT id, site_id, title, event_type, custom_event_name, fixed_value, fixed_currency::text AS fixed_currency, manual_value
     FROM channels WHERE bot_id = $1 AND telegram_chat_id = $2 AND active`,
    [botId, chatId],
  );
  return rows[0] ?? null;
}

export interface InvitationRow {
  id: string;
  invite_link: string;
  visit_id: string | null;
  used_at: Date | null;
  /** The Telegram user the invitation's one join was credited to (as text: bigint). */
  used_by: string | null;
  revoked_at: Date | null;
}

const INVITATION_COLUMNS = 'id, invite_link, visit_id, used_at, used_by::text AS used_by, revoked_at';

/**
 * One of the links Capigram created for this channel, locked until the transaction ends, so that
 * two joins through one link are decided one after the other. Found through the UNIQUE index on
 * the links Capigram created; the channel's public address, recorded as `unattributed` whenever it
 * was handed out as a fallback, identifies no visit and is never "ours".
 */
export async function lockInvitationByLink(
  tx: Queryable,
  channelId: string,
  inviteLink: string,
): Promise<InvitationRow | null> {
  const { rows } = await tx.query<InvitationRow>(
    `SELECT ${INVITATION_COLUMNS} FROM invitations WHERE invite_link = $1 AND NOT unattributed AND channel_id = $2 FOR UPDATE`,
    [inviteLink, channelId],
  );
  return rows[0] ?? null;
}

/**
 * The invitation of the user's pending join request through one of our links in this channel,
 * locked. Pending: no join or leave of the user was recorded after it (a request is consumed by the
 * join it led to). The request must have been made while the link was alive, and, when `joinedAt`
 * is given (a join that came without its link), the join too: a request days old whose join never
 * came says nothing about a join today.
 */
export async function lockPendingRequestInvitation(
  tx: Queryable,
  channelId: string,
  telegramUserId: number,
  joinedAt: Date | null,
): Promise<InvitationRow | null> {
  const { rows } = await tx.query<InvitationRow>(
    `SELECT ${INVITATION_COLUMNS} FROM invitations WHERE id = (
       SELECT r.invitation_id FROM memberships r JOIN invitations i ON i.id = r.invitation_id
       WHERE r.channel_id = $1 AND r.telegram_user_id = $2 AND r.kind = 'join_request'
         AND (i.expires_at IS NULL OR (r.occurred_at <= i.expires_at AND ($3::timestamptz IS NULL OR $3 <= i.expires_at)))
         AND NOT EXISTS (
           SELECT 1 FROM memberships m
           WHERE m.channel_id = r.channel_id AND m.telegram_user_id = r.telegram_user_id AND m.kind IN ('join', 'leave')
             AND m.created_at > r.created_at)
       ORDER BY r.occurred_at DESC, r.created_at DESC LIMIT 1)
     FOR UPDATE`,
    [channelId, telegramUserId, joinedAt],
  );
  return rows[0] ?? null;
}

/**
 * Whether the user's pending request in the channel (their latest, with no join or leave after
 * it) came without our link but from a user an entry had tied to a visit: its approval is a join
 * to record and credit at once, as one through our link is.
 */
export async function pendingEntryRequest(
  tx: Queryable,
  channelId: string,
  telegramUserId: number,
): Promise<boolean> {
  const { rows } = await tx.query<{ entry: boolean }>(
    `SELECT (r.invitation_id IS NULL AND r.visit_id IS NOT NULL) AS entry FROM memberships r
     WHERE r.channel_id = $1 AND r.telegram_user_id = $2 AND r.kind = 'join_request'
       AND NOT EXISTS (
         SELECT 1 FROM memberships m
         WHERE m.channel_id = r.channel_id AND m.telegram_user_id = r.telegram_user_id AND m.kind IN ('join', 'leave')
           AND m.created_at > r.created_at)
     ORDER BY r.occurred_at DESC, r.created_at DESC LIMIT 1`,
    [channelId, telegramUserId],
  );
  return rows[0]?.entry === true;
}

/**
 * The user's latest join or leave in the channel, if it is a join Capigram recorded on approving
 * the user's request and no chat_member update has been matched to it yet.
 */
export async function unmatchedApprovedJoin(
  tx: Queryable,
  channelId: string,
  telegramUserId: number,
): Promise<string | null> {
  const { rows } = await tx.query<{
    id: string;
    recorded_by: string;
    update_matched_at: Date | null;
    kind: string;
  }>(
    `SELECT id, kind, recorded_by, update_matched_at FROM memberships
     WHERE channel_id = $1 AND telegram_user_id = $2 AND kind IN ('join', 'leave')
     ORDER BY created_at DESC, occurred_at DESC LIMIT 1`,
    [channelId, telegramUserId],
  );
  const last = rows[0];
  return last && last.kind === 'join' && last.recorded_by === 'approval' && last.update_matched_at === null
    ? last.id
    : null;
}

export async function markJoinMatched(tx: Queryable, membershipId: string, at: Date): Promise<void> {
  await tx.query('UPDATE memberships SET update_matched_at = $2 WHERE id = $1', [membershipId, at]);
}

export async function markInvitationUsed(
  tx: Queryable,
  invitationId: string,
  telegramUserId: number,
  at: Date,
): Promise<void> {
  // The first user stays recorded; a rejoin does not rewrite history.
  await tx.query(
    `UPDATE invitations SET used_at = COALESCE(used_at, $3), used_by = COALESCE(used_by, $2) WHERE id = $1`,
    [invitationId, telegramUserId, at],
  );
}

/** Whether this (channel, user, invitation) already produced its one conversion. */
export async function joinAlreadyConverted(
  tx: Queryable,
  channelId: string,
  telegramUserId: number,
  invitationId: string,
): Promise<boolean> {
  const { rowCount } = await tx.query(
    `SELECT 1 FROM memberships WHERE channel_id = $1 AND telegram_user_id = $2 AND invitation_id = $3 AND conversion_id IS NOT NULL`,
    [channelId, telegramUserId, invitationId],
  );
  return (rowCount ?? 0) > 0;
}

export async function findLeadId(
  tx: Queryable,
  siteId: string,
  telegramUserId: number,
): Promise<string | null> {
  const { rows } = await tx.query<{ id: string }>(
    'SELECT id FROM leads WHERE site_id = $1 AND telegram_user_id = $2',
    [siteId, telegramUserId],
  );
  return rows[0]?.id ?? null;
}

export interface NewMembership {
  channelId: string;
  telegramUserId: number;
  leadId: string | null;
  kind: 'join' | 'leave' | 'join_request';
  invitationId?: string | null;
  visitId?: string | null;
  attributed?: boolean;
  viaJoinRequest?: boolean;
  conversionId?: string | null;
  /** `approval`: recorded when Capigram's approveChatJoinRequest succeeded, not from an update. */
  recordedBy?: 'update' | 'approval';
  /** Join requests only: an approval queued, or held for the operator (`join-request-rules.ts`). */
  requestStatus?: 'approving' | 'held';
  occurredAt: Date;
}

export async function insertMembership(tx: Queryable, m: NewMembership): Promise<string> {
  const { rows } = await tx.query<{ id: string }>(
    `INSERT INTO memberships (channel_id, telegram_user_id, lead_id, kind, invitation_id, visit_id, attributed, via_join_request,
       conversion_id, occurred_at, recorded_by, request_status)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id`,
    [
      m.channelId,
      m.telegramUserId,
      m.leadId,
      m.kind,
      m.invitationId ?? null,
      m.visitId ?? null,
      m.attributed ?? false,
      m.viaJoinRequest ?? false,
      m.conversionId ?? null,
      m.occurredAt,
      m.recordedBy ?? 'update',
      m.requestStatus ?? null,
    ],
  );
  return rows[0]!.id;
}
