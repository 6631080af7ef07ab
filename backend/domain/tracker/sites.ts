import type { Queryable } from '../../db/pool.js';
import { isUuid } from '../../../shared/ids.js';
import type { ConsentMode } from '../../../shared/tracker-wire.js';

/**
 * Sites as the keyless surface sees them: the public id and the domains requests must come from.
 *
 * Every tracker request starts with this look-up, so answers are cached in the process for a few
 * seconds (unknown ids too, so a flood of made-up ids does not become a flood of queries). Sites'
 * domains change rarely and only by an operator; a few seconds of staleness is the price.
 */
export interface TrackerSite {
  id: string;
  websiteId: string;
  domains: readonly string[];
  /** `implied`: a visit that says nothing of consent counts as granted; `required`: as denied. */
  consentMode: ConsentMode;
}

export interface SiteDirectory {
  /** By public websiteId. */
  byWebsiteId(websiteId: string): Promise<TrackerSite | null>;
  /** By internal id or public websiteId (the `/r/{siteId}/…` path accepts both). */
  byIdOrWebsiteId(idOrWebsiteId: string): Promise<TrackerSite | null>;
}

export function createSiteDirectory(
  db: Queryable,
  opts: { ttlMs?: number; maxEntries?: number } = {},
): SiteDirectory {
  const ttlMs = opts.ttlMs ?? 5000;
  const maxEntries = opts.maxEntries ?? 10_000;
  const cache = new Map<string, { site: TrackerSite | null; until: number }>();

  async function load(column: 'id' | 'website_id', value: string): Promise<TrackerSite | null> {
    const key = `${column}:${value}`;
    const hit = cache.get(key);
    const now = performance.now();
    if (hit !== undefined && hit.until > now) return hit.site;
    const { rows } = await db.query<{
      id: string;
      website_id: string;
      domains: string[];
      consent_mode: ConsentMode;
    }>(
      `SELECT id, website_id, domains, consent_mode FROM sites WHERE ${column === 'id' ? 'id = $1::uuid' : 'website_id = $1'} AND removed_at IS NULL`,
      [value],
    );
    const row = rows[0];
    const site =
      row === undefined
        ? null
        : { id: row.id, websiteId: row.website_id, domains: row.domains, consentMode: row.consent_mode };
    cache.delete(key);
    if (cache.size >= maxEntries) {
      // Map iteration order is insertion order: drop the oldest entry.
      const oldest = cache.keys().next();
      if (oldest.done !== true) cache.delete(oldest.value);
    }
    cache.set(key, { site, until: now + ttlMs });
    return site;
  }

  return {
    byWebsiteId: (websiteId) => load('website_id', websiteId),
    byIdOrWebsiteId: (value) => (isUuid(value) ? load('id', value.toLowerCase()) : load('website_id', value)),
  };
}

/** Whether any site lists this host (or a parent domain of it): the CORS preflight's question. */
export async function anySiteServesHost(db: Queryable, candidates: readonly string[]): Promise<boolean> {
  if (candidates.length === 0) return false;
  const { rows } = await db.query(
    'SELECT 1 FROM sites WHERE domains && $1::text[] AND removed_at IS NULL LIMIT 1',
    [candidates],
  );
  return rows.length > 0;
}
