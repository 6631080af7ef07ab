import { createPublicKey, verify, type KeyObject } from 'node:crypto';

/**
 * The `signature` field of Mini App `initData`: Telegram's own Ed25519 signature, which anyone can
 * check without the bot's token (Bot API, Mini Apps, "Validating data for Third-Party Use"). The
 * signed text is `<bot_id>:WebAppData`, a line feed, then every field but `hash` and `signature`
 * as `key=value`, sorted by key and joined with line feeds; `signature` is that text's Ed25519
 * signature in base64url without padding, under Telegram's public key. (`hash`, the bot-token
 * HMAC, covers `signature` like every other field.) Pure.
 */

/** Telegram's Ed25519 public key for initData of the production environment (hex, raw 32 bytes). */
export const TELEGRAM_INIT_DATA_KEY = 'e7bf03a2fa4602af4580703d88dda5bb59f32ed8b02a56c187fe7d34caed242d';

/** What Telegram signs for `botId`: see above. */
export function thirdPartyCheckString(fields: Map<string, string>, botId: number | string): string {
  const lines = [...fields.entries()]
    .filter(([k]) => k !== 'hash' && k !== 'signature')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`);
  return [`${botId}:WebAppData`, ...lines].join('\n');
}

// An Ed25519 public key as SPKI DER: this fixed prefix, then the 32 raw bytes (RFC 8410).
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

function publicKey(hex: string): KeyObject | null {
  if (!/^[0-9a-f]{64}$/i.test(hex)) return null;
  return createPublicKey({
    key: Buffer.concat([SPKI_PREFIX, Buffer.from(hex, 'hex')]),
    format: 'der',
    type: 'spki',
  });
}

/** Whether `fields` carry a `signature` that the holder of `publicKeyHex` made for `botId`. */
export function signedByTelegram(
  fields: Map<string, string>,
  botId: number | string,
  publicKeyHex: string,
): boolean {
  const signature = fields.get('signature') ?? '';
  if (!/^[A-Za-z0-9_-]{86}$/.test(signature)) return false;
  const key = publicKey(publicKeyHex);
  if (key === null) return false;
  return verify(
    null,
    Buffer.from(thirdPartyCheckString(fields, botId)),
    key,
    Buffer.from(signature, 'base64url'),
  );
}
