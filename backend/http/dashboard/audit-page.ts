import type { Hono, MiddlewareHandler } from 'hono';
import type { Deps } from '../../deps.js';
import { AUDIT_PAGE, auditLog } from '../../domain/admin/audit.js';
import { mayReadAudit, scopeOf } from '../../domain/admin/roles.js';
import { viewSession } from './auth.js';
import type { DashEnv } from './env.js';
import { auditPage, forbiddenPage } from './team-views.js';

/** `/dashboard/audit`: the audit log of the signed-in owner's scope (everything, for the admin token). */
export function registerAuditPage(
  app: Hono<DashEnv>,
  deps: Pick<Deps, 'pool'>,
  signedIn: MiddlewareHandler<DashEnv>,
): void {
  app.get('/dashboard/audit', signedIn, async (c) => {
    const actor = c.get('actor');
    if (!mayReadAudit(actor))
      return c.html(forbiddenPage('The audit log is for owners.', viewSession(c)), 403);
    return c.html(auditPage(await auditLog(deps.pool, scopeOf(actor)), AUDIT_PAGE, viewSession(c)));
  });
}
