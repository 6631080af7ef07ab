import { randomBytes } from 'node:crypto';

/**
 * Entry payloads: what `t.me/<bot>?start=<payload>` and `?startapp=<payload>` carry. Telegram
 * takes 1–64 characters of A-Za-z0-9_- there. Ours are 18 random bytes in base64url (24
 * characters, 144 bits): unguessable, one per click, and derived from nothing (no visit id, no
 * site), so a payload seen in a chat or a log tells nothing and cannot be forged from a visit.
 */
export const PAYLOAD_RE = /^[A-Za-z0-9_-]{1,64}$/;

/** Random bytes per payload; base64url turns each 3 into 4 characters of Telegram's alphabet. */
const PAYLOAD_BYTES = 18;

export function newPayload(): string {
  return randomBytes(PAYLOAD_BYTES).toString('base64url');
}

export function isPayload(value: unknown): value is string {
  return typeof value === 'string' && PAYLOAD_RE.test(value);
}

/**
 * The payload of a `/start` command as the bot receives it: `/start <payload>` (Telegram's apps
 * send it so when a deep link is opened), also addressed as `/start@<bot_username> <payload>`.
 * `undefined` when the text is not a /start command; `null` for a /start with no valid payload
 * (typed by hand, or a payload outside Telegram's alphabet).
 */
export function startPayload(text: string, botUsername: string | null): string | null | undefined {
  const m = /^\/start(?:@([A-Za-z0-9_]{1,64}))?(?:\s+([\s\S]*?))?\s*$/.exec(text);
  if (!m) return undefined;
  if (m[1] !== undefined && botUsername !== null && m[1].toLowerCase() !== botUsername.toLowerCase())
    return undefined;
  const payload = m[2];
  return payload !== undefined && PAYLOAD_RE.test(payload) ? payload : null;
}

/** The deep link an entry click is sent to. */
export function deepLink(
  entry: { kind: 'start' | 'app'; botUsername: string; app: string | null },
  payload: string,
): string {
  if (entry.kind === 'app') return `https://t.me/${entry.botUsername}/${entry.app}?startapp=${payload}`;
  return `https://t.me/${entry.botUsername}?start=${payload}`;
}
