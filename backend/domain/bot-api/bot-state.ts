import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';

/**
 * The rows a call to Telegram starts from and what Telegram's answers change in them: the bot a
 * call speaks as (`bots`), its rights in each of its channels and the chat a channel follows
 * (`channels`' bot status and `telegram_chat_id`), and a link it revoked (`invitations.revoked_at`).
 * Updates from Telegram record the same facts through these functions.
 */

const BotId = z.string().uuid();

export interface BotRow {
  id: string;
  account_id: string;
  telegram_bot_id: number;
  username: string | null;
  token_enc: string;
  webhook_secret_hash: Buffer;
  /** The secret before the latest change, while it is still accepted (`webhookSecretGrace`). */
  previous_webhook_secret_hash: Buffer | null;
  /** A new secret not yet seen on an update: its setWebhook answer was lost. */
  webhook_secret_confirmed: boolean;
  forward_url: string | null;
}

/** How long the previous webhook secret is accepted after a change. */
export const WEBHOOK_SECRET_GRACE = '10 minutes';

/**
 * The columns that change a bot's webhook secret (to `$2`), keeping the one before it as the
 * previous secret: for a statement's SET list.
 */
export const ROTATE_WEBHOOK_SECRET =
  'previous_webhook_secret_hash = webhook_secret_hash, webhook_secret_hash = $2, webhook_secret_changed_at = now(), webhook_secret_confirmed = true';

/** An update came with the new secret: Telegram has it, the previous one counts only for its window. */
export async function confirmWebhookSecret(db: Queryable, botId: string): Promise<void> {
  await db.query(
    'UPDATE bots SET webhook_secret_confirmed = true WHERE id = $1 AND NOT webhook_secret_confirmed',
    [botId],
  );
}

/** A setWebhook whose answer was lost: until an update shows the new secret, the old one is accepted too. */
export async function unconfirmWebhookSecret(db: Queryable, botId: string): Promise<void> {
  await db.query('UPDATE bots SET webhook_secret_confirmed = false WHERE id = $1', [botId]);
}

/** A bot in use (a removed bot is found by nothing: its webhook is refused, no channel can be added to it). */
export async function findBot(db: Queryable, botId: string): Promise<BotRow | null> {
  if (!BotId.safeParse(botId).success) return null;
  const { rows } = await db.query<BotRow>(
    `SELECT id, account_id, telegram_bot_id, username, token_enc, webhook_secret_hash, forward_url, webhook_secret_confirmed,
            CASE WHEN NOT webhook_secret_confirmed OR webhook_secret_changed_at > now() - interval '${WEBHOOK_SECRET_GRACE}'
                 THEN previous_webhook_secret_hash END AS previous_webhook_secret_hash
       FROM bots WHERE id = $1 AND removed_at IS NULL`,
    [botId],
  );
  return rows[0] ?? null;
}

export interface BotStatusChange {
  channelId: string;
  siteId: string;
  couldInvite: boolean | null;
}

/**
 * Stores the bot's status in every channel it serves in this chat. An update that happened in a
 * second strictly before the stored status was taken is older news and is not applied (dates are
 * whole seconds, so same-second updates still apply, in arrival order).
 */
export async function storeBotStatus(
  tx: Queryable,
  botId: string,
  chatId: number,
  s: { status: string; isAdmin: boolean; canInvite: boolean; at: Date },
): Promise<BotStatusChange[]> {
  const { rows } = await tx.query<{ id: string; site_id: string; could_invite: boolean | null }>(
    `UPDATE channels c SET bot_status = $3, bot_is_admin = $4, bot_can_invite = $5, bot_status_at = $6
     FROM (SELECT id, bot_can_invite FROM channels WHERE bot_id = $1 AND telegram_chat_id = $2 FOR UPDATE) old
     WHERE c.id = old.id AND (c.bot_status_at IS NULL OR c.bot_status_at < $6::timestamptz + interval '1 second')
     RETURNING c.id, c.site_id, old.bot_can_invite AS could_invite`,
    [botId, chatId, s.status, s.isAdmin, s.canInvite, s.at],
  );
  return rows.map((r) => ({ channelId: r.id, siteId: r.site_id, couldInvite: r.could_invite }));
}

/**
 * A basic group was upgraded to a supergroup (Telegram does so when join requests or a username
 * are enabled): the bot's channels in the old chat follow it to its new `-100…` id. Returns the
 * channels moved; none when a channel of this bot already serves the new id.
 */
export async function moveChannelChat(
  db: Queryable,
  botId: string,
  fromChatId: number,
  toChatId: number,
): Promise<string[]> {
  // A channel that already follows the new chat (for this bot, or on the same site) keeps it; the
  // old one stays where it was. Checked in the statement rather than caught: a unique violation
  // inside the webhook's transaction would abort it, and with it the update's whole record.
  const { rows } = await db.query<{ id: string }>(
    `UPDATE channels c SET telegram_chat_id = $3 WHERE c.bot_id = $1 AND c.telegram_chat_id = $2 AND c.active
       AND NOT EXISTS (SELECT 1 FROM channels o WHERE o.telegram_chat_id = $3 AND o.active AND (o.bot_id = $1 OR o.site_id = c.site_id))
     RETURNING c.id`,
    [botId, fromChatId, toChatId],
  );
  return rows.map((r) => r.id);
}

export async function markInvitationRevoked(db: Queryable, invitationId: string, at: Date): Promise<void> {
  await db.query(`UPDATE invitations SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1`, [
    invitationId,
    at,
  ]);
}
