import { z } from 'zod';
import { storableText } from '../../../shared/text.js';

/**
 * The Telegram updates Capigram acts on, as zod schemas of only the fields it reads. Unknown
 * fields are dropped, never rejected: Telegram adds fields to its objects without notice, and a
 * webhook that refused them would make Telegram retry the same update for a day.
 */

const TelegramId = z.number().int().refine(Number.isSafeInteger, 'is out of range');
/** Unix seconds; bounded so that it is a valid timestamp everywhere (year 9999 at most). */
const UnixSeconds = z.number().int().min(0).max(253_402_300_799);

const User = z.object({ id: TelegramId, is_bot: z.boolean().optional() });
const Chat = z.object({ id: TelegramId });
/** A message's chat: its type tells a private chat with the bot (where `/start` arrives) from a group. */
const MessageChat = z.object({ id: TelegramId, type: z.string().max(32).optional() });

// The strings an update hands on to the database are `storableText`: one with a NUL (which
// PostgreSQL cannot store) makes the update malformed, dropped with a 200 like any other, rather
// than refused with a status Telegram would answer by resending it for a day.
const ChatMember = z.object({
  status: storableText(32),
  user: User,
  /** Only on `restricted` members: whether they are still in the chat. */
  is_member: z.boolean().optional(),
  can_invite_users: z.boolean().optional(),
});
export type ChatMember = z.infer<typeof ChatMember>;

const InviteLink = z.object({
  invite_link: storableText(2048).min(1),
  /** A subscription link's Stars per period (Bot API ChatInviteLink): what a paid join costs. */
  subscription_price: z.number().int().positive().max(1_000_000).optional(),
});

export const ChatMemberUpdated = z.object({
  chat: Chat,
  /** Who made the change; not needed to decide anything, so its absence is no reason to drop a join. */
  from: User.optional(),
  date: UnixSeconds,
  old_chat_member: ChatMember,
  new_chat_member: ChatMember,
  invite_link: InviteLink.optional(),
  via_join_request: z.boolean().optional(),
});
export type ChatMemberUpdated = z.infer<typeof ChatMemberUpdated>;

export const ChatJoinRequest = z.object({
  chat: Chat,
  from: User,
  /** The private chat the bot may write to about the request, for 5 minutes, until it is decided. */
  user_chat_id: TelegramId.optional(),
  date: UnixSeconds,
  invite_link: InviteLink.optional(),
  /**
   * Bot API 10.1: set when this bot is the chat's guard bot. The request must then be answered
   * within 10 seconds with answerChatJoinRequestQuery or sendChatJoinRequestWebApp (`guard-queries.ts`).
   */
  query_id: storableText(256).min(1).optional(),
});
export type ChatJoinRequest = z.infer<typeof ChatJoinRequest>;

/** Bot API `SuccessfulPayment`: the fields a payment's conversion needs (docs/telegram-payments.md). */
const SuccessfulPayment = z.object({
  /** ISO 4217, or `XTR` for Telegram Stars. */
  currency: z.string().regex(/^[A-Z]{3}$/),
  /** In the currency's smallest units; a count of Stars for `XTR`. */
  total_amount: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  telegram_payment_charge_id: storableText(128).min(1),
  subscription_expiration_date: UnixSeconds.optional(),
  is_recurring: z.boolean().optional(),
  is_first_recurring: z.boolean().optional(),
});

/** A payment the user made to the bot (`message.successful_payment`). */
export interface BotPayment {
  userId: number;
  currency: string;
  totalAmount: number;
  chargeId: string;
  /** A later period of a subscription (`is_first_recurring` not true), not its first payment. */
  renewal: boolean;
  date: number | null;
}

/** A service message naming a basic group's upgrade: `migrate_to_chat_id` in the old chat, `migrate_from_chat_id` in the new. */
const MigrationMessage = z.object({
  chat: MessageChat,
  migrate_to_chat_id: TelegramId.optional(),
  migrate_from_chat_id: TelegramId.optional(),
  /** A user's message to the bot in a private chat: `/start <payload>` from an entry's deep link. */
  from: User.optional(),
  text: z.string().max(4096).optional(),
  date: UnixSeconds.optional(),
  successful_payment: SuccessfulPayment.optional(),
});

/** A user's text message to the bot in their private chat with it. */
export interface PrivateMessage {
  userId: number;
  text: string;
  date?: number;
}

export type ParsedUpdate =
  | { kind: 'chat_member'; updateId: number; body: ChatMemberUpdated }
  | { kind: 'my_chat_member'; updateId: number; body: ChatMemberUpdated }
  | { kind: 'chat_join_request'; updateId: number; body: ChatJoinRequest }
  | { kind: 'chat_migrated'; updateId: number; body: { fromChatId: number; toChatId: number } }
  | { kind: 'private_message'; updateId: number; body: PrivateMessage }
  | { kind: 'payment'; updateId: number; body: BotPayment }
  /**
   * Not acted on; `reason` is for the log and never holds user data. `routine`: an update Telegram
   * sends in the normal course (a group's messages reach a bot that administers it, now that
   * `message` is asked for), logged at debug rather than warn.
   */
  | { kind: 'ignored'; updateId: number | null; reason: string; routine?: true };

const UpdateId = z.number().int().min(0).refine(Number.isSafeInteger);

const KNOWN = {
  chat_member: ChatMemberUpdated,
  my_chat_member: ChatMemberUpdated,
  chat_join_request: ChatJoinRequest,
  message: MigrationMessage,
} as const;

/** Classifies a webhook body (already JSON-parsed, or anything at all) without ever throwing. */
export function parseUpdate(raw: unknown): ParsedUpdate {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    return { kind: 'ignored', updateId: null, reason: 'not a JSON object' };
  const obj = raw as Record<string, unknown>;
  const id = UpdateId.safeParse(obj.update_id);
  if (!id.success) return { kind: 'ignored', updateId: null, reason: 'missing or invalid update_id' };
  const updateId = id.data;
  // An update carries exactly one payload field; the first known one decides.
  for (const kind of Object.keys(KNOWN) as (keyof typeof KNOWN)[]) {
    if (!(kind in obj)) continue;
    const parsed = KNOWN[kind].safeParse(obj[kind]);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return {
        kind: 'ignored',
        updateId,
        reason: `malformed ${kind}: ${issue ? `${issue.path.join('.')}: ${issue.message}` : 'invalid'}`,
      };
    }
    if (kind === 'chat_join_request') return { kind, updateId, body: parsed.data as ChatJoinRequest };
    if (kind === 'message') {
      const m = parsed.data as z.infer<typeof MigrationMessage>;
      if (m.migrate_to_chat_id !== undefined)
        return {
          kind: 'chat_migrated',
          updateId,
          body: { fromChatId: m.chat.id, toChatId: m.migrate_to_chat_id },
        };
      if (m.migrate_from_chat_id !== undefined)
        return {
          kind: 'chat_migrated',
          updateId,
          body: { fromChatId: m.migrate_from_chat_id, toChatId: m.chat.id },
        };
      if (m.successful_payment !== undefined && m.from !== undefined && m.from.is_bot !== true)
        return { kind: 'payment', updateId, body: paymentOf(m.from.id, m.successful_payment, m.date) };
      // Only /start means anything: other messages are not even recorded as seen (no write per chat message).
      if (
        m.chat.type === 'private' &&
        m.from !== undefined &&
        m.from.is_bot !== true &&
        m.text?.startsWith('/start') &&
        m.chat.id === m.from.id
      ) {
        return { kind: 'private_message', updateId, body: { userId: m.from.id, text: m.text } };
      }
      return {
        kind: 'ignored',
        updateId,
        reason: 'a message that is neither a chat migration nor a private message to the bot',
        routine: true,
      };
    }
    return { kind, updateId, body: parsed.data as ChatMemberUpdated };
  }
  // Bot API 10.2 `subscription`: a Stars subscription's state changed. It carries no payment (a
  // renewal comes as its own successful_payment), so it is the operator's backend's, not a conversion.
  if ('subscription' in obj)
    return { kind: 'ignored', updateId, reason: 'a bot subscription changed state', routine: true };
  const payload = Object.keys(obj).find((k) => k !== 'update_id');
  return {
    kind: 'ignored',
    updateId,
    reason: payload ? `unhandled update type ${payload.slice(0, 40)}` : 'update without payload',
  };
}

function paymentOf(
  userId: number,
  p: z.infer<typeof SuccessfulPayment>,
  date: number | undefined,
): BotPayment {
  return {
    userId,
    currency: p.currency,
    totalAmount: p.total_amount,
    chargeId: p.telegram_payment_charge_id,
    // The Bot API sends `is_first_recurring` only as `true`: a renewal is a subscription payment without it.
    renewal:
      (p.is_recurring === true || p.subscription_expiration_date !== undefined) &&
      p.is_first_recurring !== true,
    date: date ?? null,
  };
}
