// Bot API objects as Telegram serialises them (only the fields Capigram touches), the pure
// builders of the updates a webhook receives, and the delivery of an update to a webhook.

export interface TgUser {
  id: number;
  is_bot: boolean;
  first_name: string;
  username?: string;
}

export interface TgChat {
  id: number;
  title: string;
  type: 'channel' | 'supergroup' | 'group';
  username?: string;
}

export interface ChatInviteLink {
  invite_link: string;
  creator: TgUser;
  creates_join_request: boolean;
  is_primary: boolean;
  is_revoked: boolean;
  name?: string;
  expire_date?: number;
  member_limit?: number;
  /** A paid subscription link (createChatSubscriptionInviteLink): seconds per period, Stars per period. */
  subscription_period?: number;
  subscription_price?: number;
}

export type MemberStatus = 'creator' | 'administrator' | 'member' | 'restricted' | 'left' | 'kicked';

export interface TgChatMember {
  status: MemberStatus;
  user: TgUser;
  [right: string]: unknown;
}

export interface ChatMemberUpdated {
  chat: TgChat;
  from: TgUser;
  date: number;
  old_chat_member: TgChatMember;
  new_chat_member: TgChatMember;
  invite_link?: ChatInviteLink;
  via_join_request?: boolean;
}

export interface ChatJoinRequest {
  chat: TgChat;
  from: TgUser;
  user_chat_id: number;
  date: number;
  invite_link?: ChatInviteLink;
  /** Bot API 10.1: set when the bot receiving the request is the chat's guard bot (see `guardJoinRequest`). */
  query_id?: string;
}

export type TgUpdate =
  | { update_id: number; chat_member: ChatMemberUpdated }
  | { update_id: number; my_chat_member: ChatMemberUpdated }
  | { update_id: number; chat_join_request: ChatJoinRequest }
  | { update_id: number; message: TgMessage }
  | { update_id: number; subscription: BotSubscriptionUpdated };

/** Bot API 10.2 `subscription`: a user's Stars subscription to the bot changed state (no payment in it). */
export interface BotSubscriptionUpdated {
  user: TgUser;
  invoice_payload: string;
  state: 'canceled' | 'active' | 'failed';
}

/** A message as a webhook receives it (the fields Capigram reads, and the usual ones around them). */
export interface TgMessage {
  message_id: number;
  date: number;
  chat: { id: number; type: string; first_name?: string; title?: string };
  from?: TgUser;
  text?: string;
  entities?: { type: string; offset: number; length: number }[];
  successful_payment?: TgSuccessfulPayment;
}

/** Bot API `SuccessfulPayment` (a service message in the payer's private chat with the bot). */
export interface TgSuccessfulPayment {
  currency: string;
  total_amount: number;
  invoice_payload: string;
  subscription_expiration_date?: number;
  is_recurring?: true;
  is_first_recurring?: true;
  telegram_payment_charge_id: string;
  provider_payment_charge_id: string;
}

/** The update types Telegram sends when `allowed_updates` was not given: all but these three. */
export const NOT_SENT_BY_DEFAULT = ['chat_member', 'message_reaction', 'message_reaction_count'];

export function updateType(update: TgUpdate): string {
  return Object.keys(update).find((k) => k !== 'update_id') ?? 'unknown';
}

export function nowSec(): number {
  return Math.floor(Date.now() / 1000);
}

/** Telegram's administrator entry for a bot with the given invite right. */
export function adminMember(user: TgUser, canInviteUsers: boolean): TgChatMember {
  return {
    status: 'administrator',
    user,
    can_be_edited: false,
    is_anonymous: false,
    can_manage_chat: true,
    can_delete_messages: false,
    can_manage_video_chats: false,
    can_restrict_members: false,
    can_promote_members: false,
    can_change_info: false,
    can_invite_users: canInviteUsers,
    can_post_messages: false,
    can_edit_messages: false,
  };
}

export function plainMember(user: TgUser, status: MemberStatus): TgChatMember {
  return status === 'kicked' ? { status, user, until_date: 0 } : { status, user };
}

export function chatMemberUpdate(
  update_id: number,
  field: 'chat_member' | 'my_chat_member',
  u: ChatMemberUpdated,
): TgUpdate {
  const body: ChatMemberUpdated = {
    chat: u.chat,
    from: u.from,
    date: u.date,
    old_chat_member: u.old_chat_member,
    new_chat_member: u.new_chat_member,
  };
  if (u.invite_link) body.invite_link = u.invite_link;
  if (u.via_join_request) body.via_join_request = true;
  return field === 'chat_member' ? { update_id, chat_member: body } : { update_id, my_chat_member: body };
}

export interface WebhookResponse {
  status: number;
  body: string;
}

/** POSTs `update` to a webhook as Telegram does: JSON, with the secret in
 *  `X-Telegram-Bot-Api-Secret-Token` when one was set. Telegram treats any non-2xx as a failure
 *  and resends the same update_id later; to emulate that, call again with the same update. */
export async function sendUpdate(
  webhookUrl: string,
  secretToken: string | undefined,
  update: unknown,
  timeoutMs = 10_000,
): Promise<WebhookResponse> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (secretToken !== undefined) headers['x-telegram-bot-api-secret-token'] = secretToken;
  const res = await fetch(webhookUrl, {
    method: 'POST',
    headers,
    body: JSON.stringify(update),
    signal: AbortSignal.timeout(timeoutMs),
  });
  return { status: res.status, body: await res.text() };
}
