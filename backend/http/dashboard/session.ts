import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The dashboard's sign-in cookie: the operator proves they hold ADMIN_TOKEN once, and gets a
 * cookie that carries its expiry and an HMAC of it keyed by the token. Changing ADMIN_TOKEN signs
 * every browser out. The server also keeps a digest of each session it opened
 * (`domain/dashboard/sessions.ts`), so that signing out ends the session, not just the cookie. Forms carry a token derived from the
 * session (synchronizer token), on top of `SameSite=Strict`, so another site cannot post them.
 * Pure functions of their inputs; every comparison is constant-time.
 */
export const SESSION_COOKIE = 'capigram_admin';
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

function mac(adminToken: string, purpose: string, payload: string): string {
  return createHmac('sha256', adminToken)
    .update(`capigram-dashboard:${purpose}:${payload}`)
    .digest('base64url');
}

/** Equal strings, compared in constant time (of their SHA-256, so lengths leak nothing either). */
export function sameSecret(a: string, b: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(digest(a), digest(b));
}

/** A session cookie value valid until `nowMs + SESSION_TTL_MS`. */
export function issueSession(adminToken: string, nowMs: number): string {
  const expires = String(nowMs + SESSION_TTL_MS);
  return `${expires}.${mac(adminToken, 'session', expires)}`;
}

/** Whether a cookie value is a session this token issued and that has not expired. */
export function sessionValid(adminToken: string, value: string | undefined, nowMs: number): boolean {
  if (value === undefined || value.length > 200) return false;
  const dot = value.indexOf('.');
  const expires = value.slice(0, dot);
  if (dot <= 0 || !/^\d{1,16}$/.test(expires)) return false;
  if (!sameSecret(value.slice(dot + 1), mac(adminToken, 'session', expires))) return false;
  return Number(expires) > nowMs;
}

/** The form token of a session: bound to it, so it dies with it. */
export function formToken(adminToken: string, session: string): string {
  return mac(adminToken, 'form', session);
}

export function formTokenValid(adminToken: string, session: string, token: unknown): boolean {
  return (
    typeof token === 'string' && token.length <= 200 && sameSecret(token, formToken(adminToken, session))
  );
}
