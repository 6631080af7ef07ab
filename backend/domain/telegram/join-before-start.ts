import { upsertLead } from '../outbox/conversion-record.js';
import type { UpdateContext } from './context.js';
import { entryJoinAlreadyConverted, recordJoinConversion } from './credit.js';
import type { ChannelRow } from './queries.js';

/**
 * A join that arrived before its `/start`. Telegram's server hands a bot's `message` and
 * `chat_member` updates out of different queues, so a user who presses START and then Join within
 * a second or two can reach Capigram as the join first: the join found no tie and was recorded as
 * organic. When the `/start <payload>` comes within this window after that join, the join is
 * credited to the payload's visit, once.
 *
 * Ten minutes, because that is what a join from the bot's welcome takes at most in practice, and
 * because the reports fold memberships 30 minutes behind and count a row dated less than 10
 * minutes back as never folded (migration 145): the join's day is still open when it changes.
 */
export const JOIN_BEFORE_START_WINDOW_MS = 10 * 60_000;

interface EarlierJoin {
  id: string;
  kind: string;
  attributed: boolean;
  invitation_id: string | null;
  occurred_at: Date;
}

/** What a late `/start` did to the user's earlier join of the channel its entry or visit names. */
export type LateStartCredit =
  | 'credited'
  | 'no_channel'
  | 'no_recent_join'
  | 'already_attributed'
  | 'already_converted'
  | 'no_consent';

/**
 * Credits the user's organic join of the channel the entry (else the visit) points at to the
 * visit, when that join is the user's latest join or leave there and happened within
 * `JOIN_BEFORE_START_WINDOW_MS` before now. A join through one of Capigram's links is never taken
 * over (it belongs to that link's visit, or to nobody), an attributed one never twice, and a join
 * of a user whose earlier join was already credited to this visit converts no second time. Runs
 * in the `/start`'s transaction; the lead's row lock orders it with a concurrent join's.
 */
export async function creditJoinBeforeStart(
  ctx: UpdateContext,
  q: { entryId: string; visitId: string; telegramUserId: number },
): Promise<LateStartCredit> {
  const { tx } = ctx;
  const { rows: channels } = await tx.query<ChannelRow>(
    `SELECT c.id, c.site_id, c.title, c.event_type, c.custom_event_name, c.fixed_value,
       c.fixed_currency::text AS fixed_currency, c.manual_value
     FROM channels c
     WHERE c.active AND c.id = COALESCE(
       (SELECT channel_id FROM entries WHERE id = $1), (SELECT channel_id FROM visits WHERE id = $2))`,
    [q.entryId, q.visitId],
  );
  const channel = channels[0];
  if (!channel) return 'no_channel';
  await upsertLead(tx, channel.site_id, q.telegramUserId, ctx.now);
  const { rows } = await tx.query<EarlierJoin>(
    `SELECT id, kind, attributed, invitation_id, occurred_at FROM memberships
     WHERE channel_id = $1 AND telegram_user_id = $2 AND kind IN ('join', 'leave')
     ORDER BY created_at DESC, occurred_at DESC LIMIT 1 FOR UPDATE`,
    [channel.id, q.telegramUserId],
  );
  const join = rows[0];
  const nowMs = ctx.now.getTime();
  // Telegram dates updates in whole seconds: a join dated within the /start's second is before it.
  if (
    join === undefined ||
    join.kind !== 'join' ||
    join.occurred_at.getTime() <= nowMs - JOIN_BEFORE_START_WINDOW_MS ||
    join.occurred_at.getTime() >= nowMs + 1000
  )
    return 'no_recent_join';
  if (join.attributed || join.invitation_id !== null) return 'already_attributed';
  if (await entryJoinAlreadyConverted(tx, channel.id, q.telegramUserId, q.visitId))
    return 'already_converted';
  const conversion = await recordJoinConversion(ctx, {
    channel,
    userId: q.telegramUserId,
    visitId: q.visitId,
    occurredAt: join.occurred_at,
    recordedBy: 'late_start',
  });
  if (conversion === null) return 'no_consent';
  await tx.query(
    `UPDATE memberships SET visit_id = $2, attributed = true, conversion_id = $3, lead_id = $4 WHERE id = $1`,
    [join.id, q.visitId, conversion.conversionId, conversion.leadId],
  );
  return 'credited';
}
