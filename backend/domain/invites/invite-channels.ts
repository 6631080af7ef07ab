import type { Queryable } from '../../db/pool.js';
import { isUuid } from '../../../shared/ids.js';

/** What handing out and creating invite links needs to know about a channel and its bot. */
export interface InviteChannel {
  id: string;
  siteId: string;
  botId: string;
  telegramChatId: number;
  username: string | null;
  inviteMode: 'member_limit' | 'join_request';
  inviteTtlSeconds: number;
  poolTarget: number;
  publicInviteUrl: string | null;
  /** Telegram told us (or my_chat_member did) that the bot cannot create links there. */
  botCannotInvite: boolean;
  botTokenEnc: string;
  /** The bot's flood-control wait, when Telegram imposed one that has not ended. */
  floodWaitUntil: Date | null;
  /** A paid channel's price in Stars per 30 days: its links are subscription links. */
  subscriptionPrice: number | null;
}

/** The columns of a channel `c` and its bot `b` that make an `InviteChannel` (`toChannel`). */
export const CHANNEL_COLUMNS = `c.id, c.site_id, c.bot_id, c.telegram_chat_id, c.username, c.invite_mode, c.invite_ttl_seconds, c.pool_target,
         c.public_invite_url, (c.bot_is_admin IS FALSE OR c.bot_can_invite IS FALSE) AS bot_cannot_invite,
         b.token_enc, b.flood_wait_until, c.subscription_price`;

const SELECT = `SELECT ${CHANNEL_COLUMNS} FROM channels c JOIN bots b ON b.id = c.bot_id`;

/** A row of `CHANNEL_COLUMNS`. */
export interface ChannelRow {
  id: string;
  site_id: string;
  bot_id: string;
  telegram_chat_id: number;
  username: string | null;
  invite_mode: 'member_limit' | 'join_request';
  invite_ttl_seconds: number;
  pool_target: number;
  public_invite_url: string | null;
  bot_cannot_invite: boolean;
  token_enc: string;
  flood_wait_until: Date | null;
  subscription_price: number | null;
}

export function toChannel(r: ChannelRow): InviteChannel {
  return {
    id: r.id,
    siteId: r.site_id,
    botId: r.bot_id,
    telegramChatId: r.telegram_chat_id,
    username: r.username,
    inviteMode: r.invite_mode,
    inviteTtlSeconds: r.invite_ttl_seconds,
    poolTarget: r.pool_target,
    publicInviteUrl: r.public_invite_url,
    botCannotInvite: r.bot_cannot_invite,
    botTokenEnc: r.token_enc,
    floodWaitUntil: r.flood_wait_until,
    subscriptionPrice: r.subscription_price,
  };
}

/**
 * An active channel of the site: the one named, or the site's default when none is. Null when the
 * name is not a channel of this site (another tenant's channel included) or there is no default.
 */
export async function findSiteChannel(
  db: Queryable,
  siteId: string,
  channelId: string | undefined,
): Promise<InviteChannel | null> {
  if (channelId !== undefined && !isUuid(channelId)) return null;
  const { rows } = await db.query<ChannelRow>(
    `${SELECT}
     WHERE c.site_id = $1 AND c.active
       AND c.id = COALESCE($2::uuid, (SELECT default_channel_id FROM sites WHERE id = $1))`,
    [siteId, channelId ?? null],
  );
  return rows[0] === undefined ? null : toChannel(rows[0]);
}

export async function findChannel(db: Queryable, channelId: string): Promise<InviteChannel | null> {
  if (!isUuid(channelId)) return null;
  const { rows } = await db.query<ChannelRow>(`${SELECT} WHERE c.id = $1 AND c.active`, [channelId]);
  return rows[0] === undefined ? null : toChannel(rows[0]);
}

/** Every active channel whose bot may be able to create links, for the refill pass. */
export async function listPoolChannels(db: Queryable): Promise<InviteChannel[]> {
  const { rows } = await db.query<ChannelRow>(
    `${SELECT} WHERE c.active AND c.pool_target > 0 ORDER BY c.created_at, c.id`,
  );
  return rows.map(toChannel);
}
