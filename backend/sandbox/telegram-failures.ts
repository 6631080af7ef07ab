/**
 * Refusals the sandbox Telegram gives when it is told to (`POST {sandbox}/telegram/control/…`, or
 * a test through `SandboxTelegram.failures`), worded as the Bot API words them, so the demo can
 * show what Capigram does when Telegram says no:
 * - a user who blocked the bot: `sendMessage` to them is 403 "Forbidden: bot was blocked by the
 *   user" (`Client::fail_query_with_error` maps USER_IS_BLOCKED to 403 "bot was blocked by the
 *   user" and prefixes a 403 with "Forbidden: ");
 * - a user in too many channels: approving their join request is 400 "Bad Request:
 *   USER_CHANNELS_TOO_MUCH" (the MTProto error `messages.hideChatJoinRequest` answers);
 * - a flood wait: the next N calls are 429 "Too Many Requests: retry after S" with
 *   `parameters.retry_after` = S (`Query::set_retry_after_error`).
 */
export interface SandboxFailures {
  /** Users who blocked the bot. */
  blocked: Set<number>;
  /** Users Telegram will not let join one more channel. */
  channelsTooMuch: Set<number>;
  /** The next `remaining` calls are answered 429 with `retry_after` seconds. */
  flood: { remaining: number; retryAfter: number } | null;
}

export interface Refusal {
  status: number;
  body: { ok: false; error_code: number; description: string; parameters?: { retry_after: number } };
}

const refusal = (status: number, description: string, retryAfter?: number): Refusal => ({
  status,
  body: {
    ok: false,
    error_code: status,
    description,
    ...(retryAfter === undefined ? {} : { parameters: { retry_after: retryAfter } }),
  },
});

/** The refusal a call meets (and the flood counter spent), or null when the call goes through. */
export function sandboxFailure(
  f: SandboxFailures,
  method: string,
  params: Record<string, unknown>,
): Refusal | null {
  if (f.flood !== null && f.flood.remaining > 0) {
    const { retryAfter } = f.flood;
    f.flood.remaining -= 1;
    if (f.flood.remaining === 0) f.flood = null;
    return refusal(429, `Too Many Requests: retry after ${retryAfter}`, retryAfter);
  }
  if (method === 'sendmessage' && f.blocked.has(Number(params.chat_id)))
    return refusal(403, 'Forbidden: bot was blocked by the user');
  if (method === 'approvechatjoinrequest' && f.channelsTooMuch.has(Number(params.user_id)))
    return refusal(400, 'Bad Request: USER_CHANNELS_TOO_MUCH');
  return null;
}
