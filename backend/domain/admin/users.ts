import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { hashPassword } from '../../crypto/passwords.js';
import { withTx, type Pool, type Queryable } from '../../db/pool.js';
import { ApiError, validationError } from '../../errors.js';
import { requireAccount } from './accounts.js';
import { requireSite } from './sites.js';
import { Uuid } from './schemas.js';

/**
 * The dashboard's people: a user is an e-mail (the login, kept lower-cased), a role and a scope
 * (the whole instance, one account, or one site). Users arrive by an invitation link that sets
 * their password; only the SHA-256 of the link's token is kept, and it works once.
 */
export const ROLES = ['owner', 'admin', 'viewer'] as const;
export type Role = (typeof ROLES)[number];
export const INVITE_TTL_MS = 7 * 24 * 3600_000;

export interface DashboardUser {
  userId: string;
  email: string;
  role: Role;
  /** Null: every account. */
  accountId: string | null;
  /** Null: every site of the scope's account(s). */
  siteId: string | null;
}

export const AddUserInput = z.object({
  email: z.string().trim().toLowerCase().pipe(z.email().max(254)),
  role: z.enum(ROLES),
  accountId: Uuid.optional(),
  siteId: z.string().trim().min(1).optional(),
});

export function tokenDigest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

function inviteUrl(publicUrl: string, token: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/dashboard/invite/${token}`;
}

async function newInvite(db: Queryable, userId: string, now: Date): Promise<string> {
  const token = randomBytes(32).toString('base64url');
  await db.query('INSERT INTO dashboard_invites (token_sha256, user_id, expires_at) VALUES ($1, $2, $3)', [
    tokenDigest(token),
    userId,
    new Date(now.getTime() + INVITE_TTL_MS),
  ]);
  return token;
}

/** Creates a user (no password yet) and its invitation link. */
export async function addUser(
  db: Queryable,
  input: z.input<typeof AddUserInput>,
  ctx: { publicUrl: string; now: Date },
): Promise<{ userId: string; inviteUrl: string; user: DashboardUser }> {
  const parsed = AddUserInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'user');
  const u = parsed.data;
  let accountId: string | null = u.accountId ?? null;
  let siteId: string | null = null;
  if (u.siteId !== undefined) {
    const site = await requireSite(db, u.siteId);
    if (accountId !== null && site.account_id !== accountId)
      throw new ApiError('FORBIDDEN', `site ${u.siteId} belongs to another account`);
    accountId = site.account_id;
    siteId = site.id;
  } else if (accountId !== null) await requireAccount(db, accountId);
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO dashboard_users (email, role, account_id, site_id) VALUES ($1, $2, $3, $4)
     ON CONFLICT (email) WHERE removed_at IS NULL DO NOTHING RETURNING id`,
    [u.email, u.role, accountId, siteId],
  );
  const userId = rows[0]?.id;
  if (userId === undefined)
    throw new ApiError('VALIDATION_FAILED', `a user with the e-mail ${u.email} exists already`);
  const token = await newInvite(db, userId, ctx.now);
  return {
    userId,
    inviteUrl: inviteUrl(ctx.publicUrl, token),
    user: { userId, email: u.email, role: u.role, accountId, siteId },
  };
}

export interface UserLine extends DashboardUser {
  status: 'invited' | 'active';
  createdAt: string;
}

/** The users not removed, oldest first. */
export async function listUsers(db: Queryable): Promise<{ users: UserLine[] }> {
  const { rows } = await db.query<{
    id: string;
    email: string;
    role: Role;
    account_id: string | null;
    site_id: string | null;
    active: boolean;
    created_at: Date;
  }>(
    `SELECT id, email, role, account_id, site_id, password_hash IS NOT NULL AS active, created_at
     FROM dashboard_users WHERE removed_at IS NULL ORDER BY created_at, email`,
  );
  return {
    users: rows.map((r) => ({
      userId: r.id,
      email: r.email,
      role: r.role,
      accountId: r.account_id,
      siteId: r.site_id,
      status: r.active ? 'active' : 'invited',
      createdAt: r.created_at.toISOString(),
    })),
  };
}

/** Removes a user: its sessions and unused invitations end in the same transaction. */
export async function removeUser(
  pool: Pool,
  userId: string,
): Promise<{ userId: string; removed: true; user: DashboardUser }> {
  if (!Uuid.safeParse(userId).success)
    throw new ApiError('VALIDATION_FAILED', '--user must be a userId (a UUID)');
  return withTx(pool, async (tx) => {
    const { rows } = await tx.query<{
      email: string;
      role: Role;
      account_id: string | null;
      site_id: string | null;
    }>(
      `UPDATE dashboard_users SET removed_at = now() WHERE id = $1 AND removed_at IS NULL
       RETURNING email, role, account_id, site_id`,
      [userId],
    );
    const r = rows[0];
    if (!r) throw new ApiError('NOT_FOUND', `there is no user ${userId}`);
    await tx.query('DELETE FROM dashboard_sessions WHERE user_id = $1', [userId]);
    await tx.query('DELETE FROM dashboard_invites WHERE user_id = $1', [userId]);
    return {
      userId,
      removed: true as const,
      user: { userId, email: r.email, role: r.role, accountId: r.account_id, siteId: r.site_id },
    };
  });
}

/** The e-mail an unused, unexpired invitation is for, or null. */
export async function invitationFor(db: Queryable, token: string, now: Date): Promise<string | null> {
  if (token.length > 100) return null;
  const { rows } = await db.query<{ email: string }>(
    `SELECT u.email FROM dashboard_invites i JOIN dashboard_users u ON u.id = i.user_id
     WHERE i.token_sha256 = $1 AND i.used_at IS NULL AND i.expires_at > $2 AND u.removed_at IS NULL`,
    [tokenDigest(token), now],
  );
  return rows[0]?.email ?? null;
}

/**
 * Uses an invitation: sets the user's password and spends the link, in one transaction (two
 * browsers racing on one link: exactly one wins). Null when the link is unknown, used or expired.
 */
export async function acceptInvitation(
  pool: Pool,
  token: string,
  password: string,
  now: Date,
): Promise<DashboardUser | null> {
  if (token.length > 100) return null;
  const hash = await hashPassword(password);
  return withTx(pool, async (tx) => {
    const spent = await tx.query<{ user_id: string }>(
      `UPDATE dashboard_invites SET used_at = $2
       WHERE token_sha256 = $1 AND used_at IS NULL AND expires_at > $2 RETURNING user_id`,
      [tokenDigest(token), now],
    );
    const userId = spent.rows[0]?.user_id;
    if (userId === undefined) return null;
    const { rows } = await tx.query<{
      email: string;
      role: Role;
      account_id: string | null;
      site_id: string | null;
    }>(
      `UPDATE dashboard_users SET password_hash = $2 WHERE id = $1 AND removed_at IS NULL
       RETURNING email, role, account_id, site_id`,
      [userId, hash],
    );
    const r = rows[0];
    return r ? { userId, email: r.email, role: r.role, accountId: r.account_id, siteId: r.site_id } : null;
  });
}

/** The user that signs in with this e-mail (case does not matter), with its password hash. */
export async function userByEmail(
  db: Queryable,
  email: string,
): Promise<(DashboardUser & { passwordHash: string | null }) | null> {
  const { rows } = await db.query<{
    id: string;
    email: string;
    role: Role;
    account_id: string | null;
    site_id: string | null;
    password_hash: string | null;
  }>(
    `SELECT id, email, role, account_id, site_id, password_hash FROM dashboard_users
     WHERE email = $1 AND removed_at IS NULL`,
    [email.trim().toLowerCase().slice(0, 254)],
  );
  const r = rows[0];
  return r
    ? {
        userId: r.id,
        email: r.email,
        role: r.role,
        accountId: r.account_id,
        siteId: r.site_id,
        passwordHash: r.password_hash,
      }
    : null;
}
