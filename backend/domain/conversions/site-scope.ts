import type { Queryable } from '../../db/pool.js';
import { ApiError } from '../../errors.js';
import { Uuid } from '../admin/schemas.js';
import { findSite } from '../admin/sites.js';

/** Who is calling the business API: the key's id, its account, and its site when site-scoped. */
export interface ApiCaller {
  keyId: string;
  accountId: string;
  siteId: string | null;
}

/** A site named by a request: the internal `siteId` or the public `websiteId` (either is accepted in both). */
export interface SiteRef {
  siteId?: string | null | undefined;
  websiteId?: string | null | undefined;
}

/**
 * The site a request acts on, or null when an account-scoped key names none (the caller then
 * infers it from the lead's history or refuses with SITE_REQUIRED).
 *
 * - A site-scoped key acts on its own site only; naming any other site is 403 FORBIDDEN, whether
 *   or not that site exists.
 * - An account-scoped key may name any site of its account. A site that does not exist and a site
 *   of another account get the same 404 UNKNOWN_WEBSITE: the answer never tells a caller that
 *   another account's site exists.
 * - `siteId` and `websiteId` together must name the same site.
 */
export async function resolveSiteRef(db: Queryable, caller: ApiCaller, ref: SiteRef): Promise<string | null> {
  const names = siteNames(ref);
  const found = new Map<string, NamedSite | null>();
  for (const name of names)
    if (caller.siteId === null || name !== caller.siteId) found.set(name, await findSite(db, name));
  return siteOfNames(caller, names, (name) => found.get(name) ?? null);
}

/** The names a request gives its site (`siteId`, `websiteId`), trimmed, blanks left out. */
export function siteNames(ref: SiteRef): string[] {
  return [ref.siteId, ref.websiteId].map((v) => v?.trim()).filter((v): v is string => !!v);
}

/** A site a name found: its id and its account. */
export interface NamedSite {
  id: string;
  account_id: string;
}

/**
 * How each name is looked up, as `findSite` does: a UUID is a site id, anything else a websiteId
 * (for a statement that finds the named sites itself: `lead-history.ts`).
 */
export function siteNameLookups(names: readonly string[]): { ids: string[]; websiteIds: string[] } {
  const byId = names.map((n) => Uuid.safeParse(n).success);
  return { ids: names.filter((_, i) => byId[i]), websiteIds: names.filter((_, i) => !byId[i]) };
}

/**
 * The site the names settle on (pure, the rules above), given what each name found; null when
 * none is named and the key is account-scoped.
 */
export function siteOfNames(
  caller: ApiCaller,
  names: readonly string[],
  found: (name: string) => NamedSite | null,
): string | null {
  if (names.length === 0) return caller.siteId;
  const ids = new Set<string>();
  for (const name of names) ids.add(siteNamed(caller, name, found));
  if (ids.size > 1) {
    throw new ApiError('VALIDATION_FAILED', 'siteId and websiteId name different sites', {
      errors: [{ path: 'websiteId', message: 'names a different site than siteId' }],
    });
  }
  return [...ids][0] ?? null;
}

function siteNamed(caller: ApiCaller, name: string, found: (name: string) => NamedSite | null): string {
  if (caller.siteId !== null && name === caller.siteId) return caller.siteId;
  const site = found(name);
  if (caller.siteId !== null) {
    if (site === null || site.id !== caller.siteId)
      throw new ApiError('FORBIDDEN', 'this API key is limited to another site');
    return site.id;
  }
  if (site === null || site.account_id !== caller.accountId)
    throw new ApiError('UNKNOWN_WEBSITE', `no site "${name}" in this account`);
  return site.id;
}
