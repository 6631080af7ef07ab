import type { Queryable } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { ApiError } from '../../errors.js';
import { clickVisitId, findClickVisit, recordVisit, type VisitAttribution } from '../tracker/visits.js';
import { deepLink, newPayload } from './payload.js';

/**
 * An entry click: the visit it belongs to gets a fresh payload, and the visitor is sent to the
 * bot (or its Mini App) with it. A click is answered from the database alone: no Bot API call.
 */

interface ClickEntry {
  id: string;
  kind: 'start' | 'app';
  botUsername: string;
  app: string | null;
}

/** The site's entry named, or its default; NOT_FOUND otherwise. */
async function requireSiteEntry(
  db: Queryable,
  siteId: string,
  entryId: string | undefined,
): Promise<ClickEntry> {
  const uuid =
    entryId === undefined || /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(entryId);
  const { rows } = uuid
    ? await db.query<{
        id: string;
        kind: 'start' | 'app';
        username: string | null;
        app_short_name: string | null;
      }>(
        `SELECT e.id, e.kind, b.username, e.app_short_name FROM entries e JOIN bots b ON b.id = e.bot_id AND b.removed_at IS NULL
         WHERE e.site_id = $1 AND e.active AND ${entryId === undefined ? 'e.is_default' : 'e.id = $2'}`,
        entryId === undefined ? [siteId] : [siteId, entryId],
      )
    : { rows: [] };
  const row = rows[0];
  if (!row || row.username === null) {
    throw new ApiError(
      'NOT_FOUND',
      entryId === undefined
        ? 'the site has no default entry; name one with entry'
        : `entry ${entryId} is not an active entry of this site`,
    );
  }
  return { id: row.id, kind: row.kind, botUsername: row.username, app: row.app_short_name };
}

/**
 * Where a browser that clicked an entry goes when Capigram cannot hand out a payload (rate
 * limited, the database away): the bot (or its Mini App) itself, unattributed, rather than an
 * error page. Null when the site has no such entry, or it cannot be looked up.
 */
export async function entryFallbackUrl(
  db: Queryable,
  siteId: string,
  entryId: string | undefined,
): Promise<string | null> {
  const entry = await requireSiteEntry(db, siteId, entryId).catch(() => null);
  if (entry === null) return null;
  return entry.kind === 'app'
    ? `https://t.me/${entry.botUsername}/${entry.app}`
    : `https://t.me/${entry.botUsername}`;
}

/** Hands the visit a new payload of the entry; returns the deep link. */
async function handOutPayload(
  db: Queryable,
  q: { siteId: string; entry: ClickEntry; visitId: string },
): Promise<string> {
  const payload = newPayload();
  await db.query('INSERT INTO entry_clicks (entry_id, site_id, visit_id, payload) VALUES ($1, $2, $3, $4)', [
    q.entry.id,
    q.siteId,
    q.visitId,
    payload,
  ]);
  return deepLink(q.entry, payload);
}

export interface EntryOutcome {
  visitId: string;
  url: string;
}

/**
 * A click from a tracked page (`track/entry`, the proxy, `tracker.js`): it belongs to the session's
 * latest visit, else the browser's; a browser never seen gets a minimal visit from the click.
 */
export async function entryClick(
  deps: Pick<Deps, 'pool' | 'local'>,
  q: {
    siteId: string;
    tempId: string;
    sessionId: string;
    entryId?: string | undefined;
    click: VisitAttribution;
  },
): Promise<EntryOutcome> {
  const [entry, found] = await Promise.all([
    requireSiteEntry(deps.pool, q.siteId, q.entryId),
    findClickVisit(deps.pool, q),
  ]);
  const visitId = await clickVisitId(deps, q, found);
  return { visitId, url: await handOutPayload(deps.pool, { siteId: q.siteId, entry, visitId }) };
}

/** An ad click straight to an entry (`/r/{siteId}/entry/{entryId}`): one visit per click request, a payload per click. */
export async function entryRedirect(
  deps: Pick<Deps, 'pool' | 'local'>,
  q: {
    siteId: string;
    entryId: string;
    tempId: string;
    sessionId: string;
    visitRequestId: string;
    attribution: VisitAttribution;
  },
): Promise<EntryOutcome> {
  const entry = await requireSiteEntry(deps.pool, q.siteId, q.entryId);
  const visit = await recordVisit(deps, {
    siteId: q.siteId,
    tempId: q.tempId,
    sessionId: q.sessionId,
    visitRequestId: q.visitRequestId,
    kind: 'redirect',
    attribution: q.attribution,
  });
  return {
    visitId: visit.visitId,
    url: await handOutPayload(deps.pool, { siteId: q.siteId, entry, visitId: visit.visitId }),
  };
}
