/**
 * What Telegram refuses in `createChatSubscriptionInviteLink`, in Telegram's words: shared by the
 * sandbox Telegram of `npm run demo` and the tests' Telegram fake.
 * - `Client::process_create_chat_subscription_invite_link_query` (tdlib/telegram-bot-api) clamps
 *   `subscription_period` to 0..1e9 and `subscription_price` to 0..1e6 (`get_integer_arg`);
 * - TDLib `DialogInviteLinkManager::export_dialog_invite_link` refuses an empty pricing (a period
 *   or price of 0) with "Invalid subscription pricing specified";
 * - Telegram refuses a period other than 30 days (SUBSCRIPTION_PERIOD_INVALID; the Bot API: "it
 *   must always be 2592000") and a price over `stars_subscription_amount_max`, 2500 Stars in the
 *   Bot API text, or a chat that is not a channel (PRICING_CHAT_INVALID; MTProto
 *   messages.exportChatInvite's errors).
 */
export const SUBSCRIPTION_PERIOD = 2_592_000;
export const MAX_SUBSCRIPTION_PRICE = 2500;

function clamp(n: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, n));
}

/** Form and query values arrive as strings, JSON ones as numbers: both count, anything else is 0. */
function integer(v: unknown): number {
  const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
  return typeof n === 'number' && Number.isInteger(n) ? n : 0;
}

/** The period and price Telegram takes, or its refusal's description. */
export function subscriptionPricing(
  p: { subscription_period?: unknown; subscription_price?: unknown },
  chatType: string,
): { period: number; price: number } | { refusal: string } {
  const period = clamp(integer(p.subscription_period), 0, 1_000_000_000);
  const price = clamp(integer(p.subscription_price), 0, 1_000_000);
  if (period <= 0 || price <= 0) return { refusal: 'Bad Request: Invalid subscription pricing specified' };
  if (chatType !== 'channel') return { refusal: 'Bad Request: PRICING_CHAT_INVALID' };
  if (period !== SUBSCRIPTION_PERIOD) return { refusal: 'Bad Request: SUBSCRIPTION_PERIOD_INVALID' };
  if (price > MAX_SUBSCRIPTION_PRICE) return { refusal: 'Bad Request: PRICING_CHAT_INVALID' };
  return { period, price };
}
