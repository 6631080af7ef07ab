import type { EventTypeName } from '../outbox/conversion-record.js';

/**
 * The business's order id on a business event (`orderId`): what tells a second purchase from the
 * same one reported twice. The rules that use it are in `submit-event.ts`; the unique index and
 * the platforms' event id derived from it in migration 191.
 */

/** The unique index of (site, event type and name, order): migration 191. */
export const ORDER_INDEX = 'conversions_order';

/** Whether `error` is PostgreSQL refusing a second conversion of one order (23505 on its index). */
export function isOrderConflict(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const e = error as { code?: unknown; constraint?: unknown };
  return e.code === '23505' && e.constraint === ORDER_INDEX;
}

/** Said when an event without an order was merged into an earlier conversion of its type. */
export const MERGED_WITHOUT_ORDER =
  'the event had no orderId and was merged into the earlier conversion of its type within the dedup window; give each order its own orderId to record it as a conversion of its own';

/** Said when the order was reported earlier for another Telegram user of the site. */
export function orderOfAnotherUser(eventType: EventTypeName, receivedAt: Date): string {
  return `the ${eventType} of this orderId was received at ${receivedAt.toISOString()} for another Telegram user; that conversion stands unchanged and nothing was sent again`;
}
