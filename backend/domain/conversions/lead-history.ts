import type { Queryable } from '../../db/pool.js';
import type { ApiVisitOverride } from '../conversion-record.js';

/**
 * What the database knows about a Telegram user that decides where a business event goes: the
 * verified acquisition (a join attributed through an invite link to a visit of the same site) and
 * earlier conversions. Reads only.
 */

/** Attributed joins and webhook conversions that carry a visit of the same site: the evidence of an acquisition. */
const ACQUISITIONS = `
  SELECT ch.site_id, m.channel_id, m.visit_id, m.occurred_at AS at, v.created_at AS visit_created_at
  FROM memberships m
  JOIN channels ch ON ch.id = m.channel_id
  JOIN visits v ON v.id = m.visit_id AND v.site_id = ch.site_id
  WHERE m.telegram_user_id = $1 AND m.attributed AND m.kind <> 'leave'
  UNION ALL
  SELECT c.site_id, c.channel_id, c.visit_id, c.attributed_at AS at, v.created_at AS visit_created_at
  FROM conversions c
  JOIN visits v ON v.id = c.visit_id AND v.site_id = c.site_id
  WHERE c.telegram_user_id = $1 AND c.source = 'webhook'`;

export interface Acquisition {
  siteId: string;
  /** Null only when the channel has since been deleted. */
  channelId: string | null;
  visitId: string;
  at: Date;
}

export interface PriorConversion {
  conversionId: string;
  channelId: string | null;
  visitId: string | null;
  apiVisitOverride: ApiVisitOverride | null;
  receivedAt: Date;
}

export interface SiteHistory {
  site: { id: string; websiteId: string; dedupWindowSeconds: number; activePixels: number };
  /** The first verified acquisition on the site (first touch: later joins never move it). */
  acquisition: Acquisition | null;
  /** The most recent conversion on the site. */
  latest: PriorConversion | null;
  /** The most recent conversion on the site that carries attribution (a visit or an override). */
  attributed: PriorConversion | null;
  /** Whether the supplied channel is one of the site's; null when none was supplied. */
  channelOnSite: boolean | null;
}

/**
 * The site an account-scoped key's event lands on when the request names none: the site of the
 * user's first verified acquisition in the account, else the site of their most recent conversion
 * there, else null (an unknown user: a cold lead, which must name its site).
 */
export async function inferSite(db: Queryable, accountId: string, telegramUserId: number): Promise<string | null> {
  const { rows } = await db.query<{ site_id: string | null }>(
    `WITH acq AS (${ACQUISITIONS})
     SELECT COALESCE(
       (SELECT a.site_id FROM acq a JOIN sites s ON s.id = a.site_id WHERE s.account_id = $2 ORDER BY a.at, a.visit_created_at LIMIT 1),
       (SELECT c.site_id FROM conversions c JOIN sites s ON s.id = c.site_id
        WHERE c.telegram_user_id = $1 AND s.account_id = $2 ORDER BY c.received_at DESC, c.id DESC LIMIT 1)
     ) AS site_id`,
    [telegramUserId, accountId],
  );
  return rows[0]?.site_id ?? null;
}

/**
 * The first verified acquisition on a site, optionally only evidence whose visit happened before
 * `visitBefore` (recovering attribution for a conversion received at that time: a visit that came
 * later cannot have caused it).
 */
export async function findAcquisition(
  db: Queryable,
  siteId: string,
  telegramUserId: number,
  visitBefore: Date | null = null,
): Promise<Acquisition | null> {
  const { rows } = await db.query<{ site_id: string; channel_id: string | null; visit_id: string; at: Date }>(
    `SELECT site_id, channel_id, visit_id, at FROM (${ACQUISITIONS}) a
     WHERE site_id = $2 AND ($3::timestamptz IS NULL OR visit_created_at < $3)
     ORDER BY at, visit_created_at LIMIT 1`,
    [telegramUserId, siteId, visitBefore],
  );
  const r = rows[0];
  return r ? { siteId: r.site_id, channelId: r.channel_id, visitId: r.visit_id, at: r.at } : null;
}

interface PriorJson {
  id: string;
  channel_id: string | null;
  visit_id: string | null;
  api_visit_override: ApiVisitOverride | null;
  received_at: string;
}

function prior(j: PriorJson | null): PriorConversion | null {
  return j
    ? { conversionId: j.id, channelId: j.channel_id, visitId: j.visit_id, apiVisitOverride: j.api_visit_override, receivedAt: new Date(j.received_at) }
    : null;
}

/** Everything about the user on one site, in one round trip; null when the site does not exist. */
export async function loadSiteHistory(
  db: Queryable,
  siteId: string,
  telegramUserId: number,
  channelId: string | null,
): Promise<SiteHistory | null> {
  const priorOn = (extra: string) =>
    `(SELECT row_to_json(p) FROM (
        SELECT id, channel_id, visit_id, api_visit_override, received_at FROM conversions
        WHERE site_id = s.id AND telegram_user_id = $2 ${extra}
        ORDER BY received_at DESC, id DESC LIMIT 1) p)`;
  const { rows } = await db.query<{
    id: string;
    website_id: string;
    dedup_window_seconds: number;
    active_pixels: number;
    acq: { site_id: string; channel_id: string | null; visit_id: string; at: string } | null;
    latest: PriorJson | null;
    attributed: PriorJson | null;
    channel_on_site: boolean | null;
  }>(
    `SELECT s.id, s.website_id, s.dedup_window_seconds,
       (SELECT count(*)::int FROM pixels p WHERE p.site_id = s.id AND p.active) AS active_pixels,
       (SELECT row_to_json(a) FROM (
          SELECT site_id, channel_id, visit_id, at FROM (${ACQUISITIONS.replaceAll('$1', '$2')}) x
          WHERE site_id = s.id ORDER BY at, visit_created_at LIMIT 1) a) AS acq,
       ${priorOn('')} AS latest,
       ${priorOn('AND (visit_id IS NOT NULL OR api_visit_override IS NOT NULL)')} AS attributed,
       CASE WHEN $3::uuid IS NULL THEN NULL
            ELSE EXISTS (SELECT 1 FROM channels ch WHERE ch.id = $3::uuid AND ch.site_id = s.id) END AS channel_on_site
     FROM sites s WHERE s.id = $1`,
    [siteId, telegramUserId, channelId],
  );
  const r = rows[0];
  if (!r) return null;
  return {
    site: { id: r.id, websiteId: r.website_id, dedupWindowSeconds: r.dedup_window_seconds, activePixels: r.active_pixels },
    acquisition: r.acq ? { siteId: r.acq.site_id, channelId: r.acq.channel_id, visitId: r.acq.visit_id, at: new Date(r.acq.at) } : null,
    latest: prior(r.latest),
    attributed: prior(r.attributed),
    channelOnSite: r.channel_on_site,
  };
}
