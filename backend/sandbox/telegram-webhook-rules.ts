/**
 * What Telegram's setWebhook refuses, in Telegram's words: shared by the sandbox Telegram of
 * `npm run demo` and the tests' Telegram fake so both refuse the same things. From the Bot API
 * server (tdlib/telegram-bot-api):
 * - `Client::do_set_webhook`: the URL is parsed with `td::parse_url(url, HttpUrl::Protocol::Https)`
 *   (a URL without a scheme is an https one; an unparsable one, or one of another scheme,
 *   is "invalid webhook URL specified"); `secret_token` longer than 256 is "secret token is too long", and a character
 *   outside `td::is_base64url_characters` (A-Z a-z 0-9 _ -) is "secret token contains unallowed
 *   characters". An empty secret_token is no secret: no header is sent (`WebhookActor::send_update`
 *   adds `X-Telegram-Bot-Api-Secret-Token` only when it is not empty).
 * - `WebhookActor::start_up`: outside local mode an http URL is "An HTTPS URL must be provided for
 *   webhook" and an https one off ports 443, 88, 80 and 8443 is "Webhook can be set up only on
 *   ports 80, 88, 443 or 8443"; `Client::on_webhook_error` answers both as
 *   "Bad Request: bad webhook: <reason>".
 * A loopback URL (the demo's or a test's own server) may be plain http on any port: nothing else
 * could ever receive it there, and api.telegram.org could not reach it anyway.
 */

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);
const PORTS = new Set(['', '80', '88', '443', '8443']);

/** Telegram's description of why `url` is refused as a webhook, or null when it is taken. */
export function webhookUrlRefusal(url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(url) ? url : `https://${url}`);
  } catch {
    return 'Bad Request: invalid webhook URL specified';
  }
  // td::parse_url knows only http and https.
  if (parsed.hostname === '' || !['http:', 'https:'].includes(parsed.protocol))
    return 'Bad Request: invalid webhook URL specified';
  const loopback = LOOPBACK.has(parsed.hostname);
  if (parsed.protocol !== 'https:' && !(loopback && parsed.protocol === 'http:'))
    return 'Bad Request: bad webhook: An HTTPS URL must be provided for webhook';
  if (!loopback && !PORTS.has(parsed.port))
    return 'Bad Request: bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443';
  return null;
}

/** Telegram's description of why `secret` is refused as a secret_token, or null (absent or empty is none). */
export function secretTokenRefusal(secret: string | undefined): string | null {
  if (secret === undefined) return null;
  if (secret.length > 256) return 'Bad Request: secret token is too long';
  if (!/^[A-Za-z0-9_-]*$/.test(secret)) return 'Bad Request: secret token contains unallowed characters';
  return null;
}
