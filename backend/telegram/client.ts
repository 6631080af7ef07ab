import { z } from 'zod';

/**
 * A small Telegram Bot API client: `{TELEGRAM_API_URL}/bot{token}/{method}`, JSON in, `{ok, result}`
 * out. Failures are classified so callers can honour flood control (429 `retry_after`) and tell a
 * bad token from a network problem. The token never appears in errors.
 */
export class TelegramError extends Error {
  override name = 'TelegramError';
  constructor(
    readonly method: string,
    readonly kind: 'api' | 'rate_limited' | 'unauthorized' | 'network',
    message: string,
    readonly errorCode?: number,
    readonly retryAfterSec?: number,
    /** Set when the chat was a basic group upgraded to a supergroup: its new id. */
    readonly migrateToChatId?: number,
  ) {
    super(`Telegram ${method}: ${message}`);
  }
}

const TelegramUser = z.object({
  id: z.number().int(),
  is_bot: z.boolean().optional(),
  first_name: z.string().optional(),
  username: z.string().optional(),
});
export type TelegramUser = z.infer<typeof TelegramUser>;

const ChatInviteLink = z.object({
  invite_link: z.string(),
  name: z.string().optional(),
  creates_join_request: z.boolean().optional(),
  member_limit: z.number().int().optional(),
  expire_date: z.number().int().optional(),
  is_revoked: z.boolean().optional(),
  is_primary: z.boolean().optional(),
});
export type ChatInviteLink = z.infer<typeof ChatInviteLink>;

const Envelope = z.object({
  ok: z.boolean(),
  result: z.unknown().optional(),
  error_code: z.number().int().optional(),
  description: z.string().optional(),
  parameters: z
    .object({ retry_after: z.number().optional(), migrate_to_chat_id: z.number().int().optional() })
    .partial()
    .optional(),
});

export interface TelegramClientOptions {
  baseUrl: string;
  token: string;
  timeoutMs?: number;
}

export function createTelegramClient(opts: TelegramClientOptions) {
  const timeoutMs = opts.timeoutMs ?? 5000;

  async function call<T>(method: string, params: Record<string, unknown>, schema: z.ZodType<T>): Promise<T> {
    let res: Response;
    try {
      res = await fetch(`${opts.baseUrl}/bot${opts.token}/${method}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(params),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      throw new TelegramError(
        method,
        'network',
        (err as Error).name === 'TimeoutError' ? 'timed out' : 'unreachable',
      );
    }
    const text = await res.text().catch(() => '');
    let env: z.infer<typeof Envelope>;
    try {
      env = Envelope.parse(JSON.parse(text));
    } catch {
      throw new TelegramError(method, 'network', `unexpected answer (HTTP ${res.status})`);
    }
    if (!env.ok) {
      const code = env.error_code ?? res.status;
      const description = env.description ?? `HTTP ${res.status}`;
      if (code === 429)
        throw new TelegramError(method, 'rate_limited', description, code, env.parameters?.retry_after ?? 1);
      if (code === 401 || code === 404) throw new TelegramError(method, 'unauthorized', description, code);
      if (code >= 500) throw new TelegramError(method, 'network', description, code);
      throw new TelegramError(
        method,
        'api',
        description,
        code,
        undefined,
        env.parameters?.migrate_to_chat_id,
      );
    }
    const parsed = schema.safeParse(env.result);
    if (!parsed.success) throw new TelegramError(method, 'api', 'unexpected result shape');
    return parsed.data;
  }

  return {
    getMe: () => call('getMe', {}, TelegramUser),
    setWebhook: (p: {
      url: string;
      secret_token: string;
      allowed_updates: string[];
      max_connections?: number;
      drop_pending_updates?: boolean;
    }) => call('setWebhook', p, z.literal(true)),
    deleteWebhook: () => call('deleteWebhook', {}, z.literal(true)),
    getWebhookInfo: () =>
      call(
        'getWebhookInfo',
        {},
        z.object({
          url: z.string(),
          pending_update_count: z.number().int(),
          last_error_date: z.number().int().optional(),
          last_error_message: z.string().optional(),
        }),
      ),
    createChatInviteLink: (p: {
      chat_id: number | string;
      name?: string;
      expire_date?: number;
      member_limit?: number;
      creates_join_request?: boolean;
    }) => call('createChatInviteLink', p, ChatInviteLink),
    /** A paid link: `subscription_period` must be 2592000 (30 days), the price 1-2500 Stars (Bot API). */
    createChatSubscriptionInviteLink: (p: {
      chat_id: number | string;
      name?: string;
      subscription_period: number;
      subscription_price: number;
    }) => call('createChatSubscriptionInviteLink', p, ChatInviteLink),
    revokeChatInviteLink: (p: { chat_id: number | string; invite_link: string }) =>
      call('revokeChatInviteLink', p, ChatInviteLink),
    approveChatJoinRequest: (p: { chat_id: number | string; user_id: number }) =>
      call('approveChatJoinRequest', p, z.literal(true)),
    declineChatJoinRequest: (p: { chat_id: number | string; user_id: number }) =>
      call('declineChatJoinRequest', p, z.literal(true)),
    /** Bot API 10.1: the guard bot's answer to a join-request query (`ChatJoinRequest.query_id`). */
    answerChatJoinRequestQuery: (p: {
      chat_join_request_query_id: string;
      result: 'approve' | 'decline' | 'queue';
    }) => call('answerChatJoinRequestQuery', p, z.literal(true)),
    /** Bot API 10.1: shows the requester a Mini App before the query is answered. */
    sendChatJoinRequestWebApp: (p: { chat_join_request_query_id: string; web_app_url: string }) =>
      call('sendChatJoinRequestWebApp', p, z.literal(true)),
    sendMessage: (p: {
      chat_id: number | string;
      text: string;
      reply_markup?: { inline_keyboard: { text: string; url: string }[][] };
      link_preview_options?: { is_disabled: boolean };
    }) => call('sendMessage', p, z.object({ message_id: z.number().int() }).passthrough()),
    getChat: (p: { chat_id: number | string }) =>
      call(
        'getChat',
        p,
        z
          .object({
            id: z.number().int(),
            type: z.string(),
            title: z.string().optional(),
            username: z.string().optional(),
          })
          .passthrough(),
      ),
    getChatMember: (p: { chat_id: number | string; user_id: number }) =>
      call(
        'getChatMember',
        p,
        z.object({ status: z.string(), can_invite_users: z.boolean().optional() }).passthrough(),
      ),
  };
}

/**
 * Updates Capigram asks Telegram for. chat_member is only delivered when listed explicitly;
 * `message` brings `/start <payload>` from entries (and a basic group's upgrade).
 */
export const ALLOWED_UPDATES = ['message', 'chat_member', 'chat_join_request', 'my_chat_member'];

/**
 * Every update type of the Bot API, asked for when the bot's updates are forwarded to the
 * operator's backend: that backend answers messages, buttons and payments, which Capigram itself
 * does not need. (An empty list would not do: it leaves out chat_member and reactions.)
 */
const ALL_UPDATES = [
  'message',
  'edited_message',
  'channel_post',
  'edited_channel_post',
  'business_connection',
  'business_message',
  'edited_business_message',
  'deleted_business_messages',
  'message_reaction',
  'message_reaction_count',
  'inline_query',
  'chosen_inline_result',
  'callback_query',
  'shipping_query',
  'pre_checkout_query',
  'purchased_paid_media',
  'poll',
  'poll_answer',
  'my_chat_member',
  'chat_member',
  'chat_join_request',
  'chat_boost',
  'removed_chat_boost',
  // Bot API 10.2: a user's Stars subscription to the bot canceled, re-enabled or failed.
  'subscription',
];

/** The updates to ask Telegram for: Capigram's own, or all of them when they are forwarded. */
export function allowedUpdatesFor(forwarding: boolean): string[] {
  return forwarding ? [...new Set([...ALLOWED_UPDATES, ...ALL_UPDATES])] : ALLOWED_UPDATES;
}
