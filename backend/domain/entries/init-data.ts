import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';

/**
 * Telegram Mini App `initData`, checked as Telegram documents it ("Validating data received via
 * the Mini App"): the data-check-string is every received field but `hash`, as `key=value`,
 * sorted by key and joined with line feeds; the secret key is HMAC-SHA256 of the bot's token
 * under the key "WebAppData"; `hash` is the hex HMAC-SHA256 of the data-check-string under that
 * secret. `auth_date` must be fresh: a captured initData is not a credential forever. Pure.
 */

/** How old an `auth_date` may be (CONTRACT: 24 hours). */
const INIT_DATA_MAX_AGE_SECONDS = 24 * 3600;
/** An `auth_date` this far ahead of our clock is still believed (clocks differ). */
const CLOCK_SKEW_SECONDS = 300;

interface InitData {
  userId: number;
  /** `startapp` of the link the Mini App was opened with, as Telegram passed it on. */
  startParam: string | null;
  authDate: number;
}

export type InitDataCheck = { ok: true; data: InitData } | { ok: false; reason: string };

const User = z.object({ id: z.number().int().positive().refine(Number.isSafeInteger) });

/** The fields of an initData string, or null when it is not one (no hash, a key twice). */
export function parseInitData(initData: string): Map<string, string> | null {
  let params: URLSearchParams;
  try {
    params = new URLSearchParams(initData);
  } catch {
    return null;
  }
  const fields = new Map<string, string>();
  for (const [k, v] of params) {
    if (fields.has(k)) return null;
    fields.set(k, v);
  }
  return fields.has('hash') ? fields : null;
}

/** Whether `fields` were signed with this bot's token. Constant-time in the hash comparison. */
export function signedBy(fields: Map<string, string>, botToken: string): boolean {
  const hash = fields.get('hash') ?? '';
  if (!/^[0-9a-f]{64}$/.test(hash)) return false;
  const dataCheckString = [...fields.entries()]
    .filter(([k]) => k !== 'hash')
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('\n');
  const secret = createHmac('sha256', 'WebAppData').update(botToken).digest();
  const expected = createHmac('sha256', secret).update(dataCheckString).digest();
  return timingSafeEqual(expected, Buffer.from(hash, 'hex'));
}

/** What a signed initData says, if it is fresh and names a user. */
export function readSignedInitData(fields: Map<string, string>, now: Date): InitDataCheck {
  const authDate = Number(fields.get('auth_date'));
  if (!Number.isInteger(authDate) || authDate <= 0) return { ok: false, reason: 'no auth_date' };
  const nowSec = Math.floor(now.getTime() / 1000);
  if (authDate < nowSec - INIT_DATA_MAX_AGE_SECONDS)
    return { ok: false, reason: 'auth_date is older than 24 hours' };
  if (authDate > nowSec + CLOCK_SKEW_SECONDS) return { ok: false, reason: 'auth_date is in the future' };
  let user: unknown;
  try {
    user = JSON.parse(fields.get('user') ?? 'null');
  } catch {
    user = null;
  }
  const parsed = User.safeParse(user);
  if (!parsed.success) return { ok: false, reason: 'no user' };
  return {
    ok: true,
    data: { userId: parsed.data.id, startParam: fields.get('start_param') ?? null, authDate },
  };
}
