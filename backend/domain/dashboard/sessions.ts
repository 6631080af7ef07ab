import { createHash } from 'node:crypto';
import type { Queryable } from '../../db/pool.js';
import type { DashboardUser, Role } from '../admin/users.js';

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
export async function openSession(
  db: Queryable,
  cookie: string,
  expiresAt: Date,
  userId: string | null = null,
): Promise<void> {
  await db.query(
    `WITH purged AS (DELETE FROM dashboard_sessions WHERE expires_at < now())
     INSERT INTO dashboard_sessions (cookie_sha256, expires_at, user_id) VALUES ($1, $2, $3) ON CONFLICT (cookie_sha256) DO NOTHING`,
    [digest(cookie), expiresAt, userId],
  );
}

/**
 * Who holds an open session: `undefined` when the server does not honour it, `null` for a session
 * opened with the admin token, else the user (a removed user has no sessions left).
 */
export async function sessionHolder(
  db: Queryable,
  cookie: string,
  now: Date,
): Promise<DashboardUser | null | undefined> {
  const { rows } = await db.query<{
    user_id: string | null;
    email: string | null;
    role: Role | null;
    account_id: string | null;
    site_id: string | null;
  }>(
    `SELECT s.user_id, u.email, u.role, u.account_id, u.site_id FROM dashboard_sessions s
     LEFT JOIN dashboard_users u ON u.id = s.user_id AND u.removed_at IS NULL
     WHERE s.cookie_sha256 = $1 AND s.expires_at > $2`,
    [digest(cookie), now],
  );
  const r = rows[0];
  if (!r) return undefined;
  if (r.user_id === null) return null;
  if (r.email === null || r.role === null) return undefined;
  return { userId: r.user_id, email: r.email, role: r.role, accountId: r.account_id, siteId: r.site_id };
}

/** Ends a session: its cookie is refused from now on, by every process. */
export async function closeSession(db: Queryable, cookie: string): Promise<void> {
  await db.query('DELETE FROM dashboard_sessions WHERE cookie_sha256 = $1', [digest(cookie)]);
}
