import type { Queryable } from '../../db/pool.js';
import type { Logger } from '../../log.js';

/** What every update handler gets: the webhook's transaction, the bot, the clock reading, a logger. */
export interface UpdateContext {
  tx: Queryable;
  bot: { id: string; telegramBotId: number };
  /** When the update was received (the service's clock, read once). */
  now: Date;
  log: Logger;
  /** ATTRIBUTION_WINDOW_DAYS: how long an entry's tie credits the user's joins to its visit. */
  attributionWindowDays: number;
  /** JOIN_GATE_WAIT_MS: how long a guard bot's join query waits for the gate Mini App. */
  joinGateWaitMs: number;
}

/** What a handler did with an update, for the log and for tests. */
export type UpdateOutcome =
  | 'duplicate'
  | 'ignored'
  | 'unknown_chat'
  | 'attributed_join'
  | 'repeat_join'
  /** A chat_member join confirming one recorded when Capigram approved the request: adds nothing. */
  | 'approved_join_matched'
  | 'organic_join'
  | 'leave'
  | 'join_request_approved'
  | 'join_request_recorded'
  | 'bot_status'
  /** A basic group's upgrade moved a channel to the supergroup's id. */
  | 'chat_migrated'
  /** `/start <payload>` tied an entry click's visit to the user. */
  | 'entry_start'
  /** `/start` without a payload this bot knows, or with one another user already brought. */
  | 'organic_start'
  /** `successful_payment` of a lead: a `Purchase` with the charge id as its order id. */
  | 'payment_recorded'
  /** `successful_payment` from a user no site of the bot knows. */
  | 'payment_unknown_user';

export function secondsToDate(unixSeconds: number): Date {
  return new Date(unixSeconds * 1000);
}
