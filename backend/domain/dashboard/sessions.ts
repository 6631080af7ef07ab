import { createHash } from 'node:crypto';
import type { Queryable } from '../../db/pool.js';

/**
 * The server's side of a dashboard session (`http/dashboard/session.ts` makes and checks the
 * cookie itself): a session is honoured while its row exists, so signing out ends it everywhere,
 * and a cookie copied before the sign-out is worth nothing after it. Rows hold the cookie's
 * SHA-256, never the cookie.
 */
function digest(cookie: string): Buffer {
  return createHash('sha256').update(cookie, 'utf8').digest();
}

/** Records a new session; expired ones are cleared on the way (sign-ins are rare, so this is the cheapest purge). */
export async function openSession(db: Queryable, cookie: string, expiresAt: Date): Promise<void> {
  await db.query(
    `WITH purged AS (DELETE FROM dashboard_sessions WHERE expires_at < now())
     INSERT INTO dashboard_sessions (cookie_sha256, expires_at) VALUES ($1, $2) ON CONFLICT (cookie_sha256) DO NOTHING`,
    [digest(cookie), expiresAt],
  );
}

/** Whether the server still honours this (otherwise valid) session cookie. */
export async function sessionOpen(db: Queryable, cookie: string, now: Date): Promise<boolean> {
  const { rows } = await db.query(
    'SELECT 1 FROM dashboard_sessions WHERE cookie_sha256 = $1 AND expires_at > $2',
    [digest(cookie), now],
  );
  return rows.length > 0;
}

/** Ends a session: its cookie is refused from now on, by every process. */
export async function closeSession(db: Queryable, cookie: string): Promise<void> {
  await db.query('DELETE FROM dashboard_sessions WHERE cookie_sha256 = $1', [digest(cookie)]);
}
