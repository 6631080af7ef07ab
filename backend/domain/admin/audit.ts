import type { Queryable } from '../../db/pool.js';

/**
 * The audit log: every change an operator makes, from the dashboard (a user, or the admin token)
 * or the CLI, with who made it, what it was, what it touched and when. Written in the change's
 * own transaction where it has one. Never holds PII nor a lead's ids (Telegram user id, external
 * id): an erased lead leaves nothing of itself here.
 */
export interface AuditEntry {
  /** The user's e-mail, `admin token` (dashboard) or `cli`. */
  actor: string;
  userId?: string | null;
  /** e.g. `conversion.value`, `send.retry`, `user.add`. */
  action: string;
  target: string;
  accountId?: string | null;
  siteId?: string | null;
  detail?: Record<string, unknown>;
}

export interface AuditLine extends Required<Omit<AuditEntry, 'detail'>> {
  at: Date;
  detail: Record<string, unknown>;
}

export async function recordAudit(db: Queryable, e: AuditEntry): Promise<void> {
  await db.query(
    `INSERT INTO audit_log (actor, user_id, action, target, account_id, site_id, detail)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [e.actor, e.userId ?? null, e.action, e.target, e.accountId ?? null, e.siteId ?? null, e.detail ?? {}],
  );
}

export const AUDIT_PAGE = 200;

/** The newest entries within a scope (null: everything), newest first. */
export async function auditLog(
  db: Queryable,
  scope: { accountId: string | null; siteId: string | null },
  limit = AUDIT_PAGE,
): Promise<AuditLine[]> {
  const { rows } = await db.query<{
    at: Date;
    actor: string;
    user_id: string | null;
    action: string;
    target: string;
    account_id: string | null;
    site_id: string | null;
    detail: Record<string, unknown>;
  }>(
    `SELECT at, actor, user_id, action, target, account_id, site_id, detail FROM audit_log
     WHERE ($1::uuid IS NULL OR account_id = $1) AND ($2::uuid IS NULL OR site_id = $2)
     ORDER BY at DESC, id DESC LIMIT $3`,
    [scope.accountId, scope.siteId, limit],
  );
  return rows.map((r) => ({
    at: r.at,
    actor: r.actor,
    userId: r.user_id,
    action: r.action,
    target: r.target,
    accountId: r.account_id,
    siteId: r.site_id,
    detail: r.detail,
  }));
}
