import type { DashboardUser, Role } from './users.js';

/**
 * Who may do what in the dashboard, as pure rules. The admin token is the instance's own key: it
 * sees and changes everything. A user sees the sites of its scope (every account, one account, or
 * one site) and nothing else; a viewer changes nothing; an admin takes the dashboard's actions; an
 * owner also reads its scope's audit log.
 */
export type Actor = { kind: 'token' } | { kind: 'user'; user: DashboardUser };

export const ADMIN_TOKEN_ACTOR = 'admin token';

export function actorName(a: Actor): string {
  return a.kind === 'token' ? ADMIN_TOKEN_ACTOR : a.user.email;
}

/** Whether a site (by its id and account) is within what the actor may see. */
export function seesSite(a: Actor, site: { id: string; accountId: string }): boolean {
  if (a.kind === 'token') return true;
  const { accountId, siteId } = a.user;
  if (siteId !== null) return site.id === siteId;
  return accountId === null || site.accountId === accountId;
}

const RANK: Record<Role, number> = { viewer: 0, admin: 1, owner: 2 };

/** Whether the actor holds at least this role (the admin token holds every role). */
export function holds(a: Actor, role: Role): boolean {
  return a.kind === 'token' || RANK[a.user.role] >= RANK[role];
}

/** Changes: submitting a value, retrying sends, deciding join requests, erasing a lead. */
export const mayChange = (a: Actor): boolean => holds(a, 'admin');
/** The audit log of the actor's scope. */
export const mayReadAudit = (a: Actor): boolean => holds(a, 'owner');

/** The scope an actor's lists are cut to: null fields mean "every". */
export function scopeOf(a: Actor): { accountId: string | null; siteId: string | null } {
  return a.kind === 'token'
    ? { accountId: null, siteId: null }
    : { accountId: a.user.accountId, siteId: a.user.siteId };
}
