import type { Pool } from '../../db/pool.js';
import { ApiError } from '../../errors.js';

/**
 * A paid channel (`channel update --subscription-price STARS`, docs/telegram-payments.md): each
 * visit's link is then a Telegram Stars subscription link (createChatSubscriptionInviteLink, 30
 * days a period), and a join through it is valued with the site's Stars value. `none` makes the
 * channel free again. The pool's unassigned links of the old kind are retired at once (the refill
 * revokes them at Telegram and makes links of the new kind), so no visit gets a link of the wrong price.
 */
export interface ChannelSubscription {
  channelId: string;
  subscriptionPrice: number | null;
}

/** Telegram's range for a subscription's price (Bot API, createChatSubscriptionInviteLink: 1-2500). */
const MAX_PRICE = 2500;

export function parseSubscriptionPrice(text: string): number | null | string {
  if (text === 'none') return null;
  if (!/^\d+$/.test(text)) return `must be a whole number of Stars (1-${MAX_PRICE}) or none`;
  const n = Number(text);
  return n >= 1 && n <= MAX_PRICE ? n : `must be 1-${MAX_PRICE} Stars (Telegram's range)`;
}

export async function setChannelSubscriptionPrice(
  pool: Pool,
  channelId: string,
  text: string,
  now: Date,
): Promise<ChannelSubscription> {
  const price = parseSubscriptionPrice(text);
  if (typeof price === 'string')
    throw new ApiError('VALIDATION_FAILED', `channel: subscriptionPrice: ${price}`, {
      errors: [{ path: 'subscriptionPrice', message: price }],
    });
  const { rows } = await pool.query<{ invite_mode: string }>(
    `SELECT invite_mode FROM channels
      WHERE id::text = $1 AND active AND removed_at IS NULL`,
    [channelId],
  );
  const channel = rows[0];
  if (!channel) throw new ApiError('NOT_FOUND', `channel ${channelId} does not exist`);
  if (price !== null && channel.invite_mode === 'join_request') {
    const message =
      'a subscription link cannot ask for approval (Telegram refuses it): set --invite-mode member_limit first';
    throw new ApiError('VALIDATION_FAILED', `channel: subscriptionPrice: ${message}`, {
      errors: [{ path: 'subscriptionPrice', message }],
    });
  }
  await pool.query('UPDATE channels SET subscription_price = $2 WHERE id = $1::uuid', [channelId, price]);
  await pool.query(
    `UPDATE invitations SET expires_at = $2
      WHERE channel_id = $1::uuid AND visit_id IS NULL AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $2`,
    [channelId, now],
  );
  return { channelId, subscriptionPrice: price };
}
