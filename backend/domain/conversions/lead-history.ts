import type { Queryable } from '../../db/pool.js';
import type { CapiStatus } from '../outbox/capi-status.js';
import type { ApiVisitOverride, EventTypeName } from '../outbox/conversion-record.js';
import type { PreparedCall } from './lead-lock.js';

/**
 * What the database knows about a Telegram user that decides where a business event goes: the
 * verified acquisition (a join attributed through an invite link, or an entry's tie, to a visit of the same site),
 * earlier conversions, and recent conversions the event may match. Reads only.
 */

/**
 * Attributed joins, webhook conversions and entry ties (a bot start, a Mini App open, a start
 * reported through the API) that carry a visit of the same site: the evidence of an acquisition.
 * A join's acquisition never expires; an entry's tie is one only within ATTRIBUTION_WINDOW_DAYS
 * of the event (`at`, `days`: the statement's placeholders for them), as it credits joins only
 * within that window. The tie's own event is evidence through the tie alone, so it is left out of
 * the webhook conversions. An entry without a channel lands the lead's events on the site's
 * default channel.
 */
function acquisitions(at: string, days: string): string {
  return `
  SELECT ch.site_id, m.channel_id, m.visit_id, m.occurred_at AS at, v.created_at AS visit_created_at
  FROM memberships m
  JOIN channels ch ON ch.id = m.channel_id
  JOIN visits v ON v.id = m.visit_id AND v.site_id = ch.site_id
  WHERE m.telegram_user_id = $1 AND m.attributed AND m.kind <> 'leave'
  UNION ALL
  SELECT c.site_id, c.channel_id, c.visit_id, c.attributed_at AS at, v.created_at AS visit_created_at
  FROM conversions c
  JOIN visits v ON v.id = c.visit_id AND v.site_id = c.site_id
  WHERE c.telegram_user_id = $1 AND c.source = 'webhook'
    AND c.id NOT IN (SELECT t.conversion_id FROM entry_clicks t WHERE t.used_by = $1 AND t.conversion_id IS NOT NULL)
  UNION ALL
  SELECT k.site_id, COALESCE(e.channel_id, s.default_channel_id), k.visit_id, k.used_at AS at, v.created_at AS visit_created_at
  FROM entry_clicks k
  JOIN entries e ON e.id = k.entry_id
  JOIN sites s ON s.id = k.site_id
  JOIN visits v ON v.id = k.visit_id AND v.site_id = k.site_id
  WHERE k.used_by = $1 AND ${tieInWindow('k', at, days)}`;
}

/** Whether the entry tie `k` is within the window before `at` (a window of 0 days credits nothing). */
function tieInWindow(k: string, at: string, days: string): string {
  return `(${days}::int > 0 AND ${k}.used_at > ${at}::timestamptz - make_interval(days => ${days}::int))`;
}

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
  eventSourceUrl: string | null;
  receivedAt: Date;
}

/** A conversion within the site's dedup window with the event's type (and custom name). */
export interface RecentMatch {
  conversionId: string;
  channelId: string;
  capiStatus: CapiStatus;
  coldLead: boolean;
  visitId: string | null;
  receivedAt: Date;
}

export interface EventContext {
  site: {
    id: string;
    websiteId: string;
    dedupWindowSeconds: number;
    activePixels: number;
    defaultCountry: string | null;
  };
  /** The first verified acquisition on the site (first touch: later joins never move it). */
  acquisition: Acquisition | null;
  /** The most recent conversion on the site. */
  latest: PriorConversion | null;
  /**
   * The most recent conversion on the site that carries attribution (a visit or an override),
   * but not one carrying the visit of an entry tie past its window.
   */
  attributed: PriorConversion | null;
  /** Whether the supplied channel is one of the site's; null when none was supplied. */
  channelOnSite: boolean | null;
  /** The newest matching conversion per candidate channel (supplied, acquisition's, latest's). */
  recent: RecentMatch[];
}

export interface EventContextQuery {
  accountId: string;
  /** The site the request named (or its key is limited to); null lets the history decide. */
  siteId: string | null;
  telegramUserId: number;
  channelId: string | null;
  eventType: EventTypeName;
  customEventName: string | null;
  now: Date;
  /** When the event happened: an entry's tie is the lead's acquisition within the window before it. */
  eventTime: Date;
  /** ATTRIBUTION_WINDOW_DAYS. */
  windowDays: number;
}

interface PriorJson {
  id: string;
  channel_id: string | null;
  visit_id: string | null;
  api_visit_override: ApiVisitOverride | null;
  event_source_url: string | null;
  received_at: string;
}

function prior(j: PriorJson | null): PriorConversion | null {
  return j
    ? {
        conversionId: j.id,
        channelId: j.channel_id,
        visitId: j.visit_id,
        apiVisitOverride: j.api_visit_override,
        eventSourceUrl: j.event_source_url,
        receivedAt: new Date(j.received_at),
      }
    : null;
}

const PRIOR_FIELDS =
  'c.id, c.channel_id, c.visit_id, c.api_visit_override, c.event_source_url, c.received_at';

/**
 * Everything an event needs, in one round trip. Without a named site the event lands on the site
 * of the user's first verified acquisition in the account, else of their most recent conversion
 * there; null means neither exists (a cold lead that must name its site). An entry's tie past its
 * window leaves the lead as it would be without it: no acquisition, its event no earlier
 * conversion, and its visit carried forward by no later one. Prepared once per connection: it
 * runs on every business event.
 */
const EVENT_CONTEXT_SQL = `
  WITH acq_all AS (${acquisitions('$8', '$9')}),
  expired AS (SELECT k.conversion_id, k.visit_id FROM entry_clicks k WHERE k.used_by = $1 AND NOT ${tieInWindow('k', '$8', '$9')}),
  site AS (
    SELECT s.id, s.website_id, s.dedup_window_seconds, s.default_country FROM sites s
    WHERE s.account_id = $2 AND s.id = COALESCE(
      $3::uuid,
      (SELECT a.site_id FROM acq_all a JOIN sites x ON x.id = a.site_id AND x.account_id = $2 ORDER BY a.at, a.visit_created_at LIMIT 1),
      (SELECT c.site_id FROM conversions c JOIN sites x ON x.id = c.site_id AND x.account_id = $2
       WHERE c.telegram_user_id = $1 AND c.id NOT IN (SELECT conversion_id FROM expired WHERE conversion_id IS NOT NULL) ORDER BY c.received_at DESC, c.id DESC LIMIT 1))
  ),
  acq AS (SELECT a.site_id, a.channel_id, a.visit_id, a.at FROM acq_all a JOIN site ON a.site_id = site.id ORDER BY a.at, a.visit_created_at LIMIT 1),
  latest AS (SELECT ${PRIOR_FIELDS} FROM conversions c JOIN site ON c.site_id = site.id
             WHERE c.telegram_user_id = $1 AND c.id NOT IN (SELECT conversion_id FROM expired WHERE conversion_id IS NOT NULL)
             ORDER BY c.received_at DESC, c.id DESC LIMIT 1),
  attributed AS (SELECT ${PRIOR_FIELDS} FROM conversions c JOIN site ON c.site_id = site.id
                 WHERE c.telegram_user_id = $1 AND (c.visit_id IS NOT NULL OR c.api_visit_override IS NOT NULL)
                   AND c.id NOT IN (SELECT conversion_id FROM expired WHERE conversion_id IS NOT NULL)
                   AND (c.visit_id IS NULL OR c.visit_id NOT IN (SELECT visit_id FROM expired WHERE visit_id IS NOT NULL))
                 ORDER BY c.received_at DESC, c.id DESC LIMIT 1),
  recent AS (
    SELECT DISTINCT ON (c.channel_id) c.id, c.channel_id, c.capi_status, c.cold_lead, c.visit_id, c.received_at
    FROM conversions c JOIN site ON c.site_id = site.id
    WHERE site.dedup_window_seconds > 0 AND c.telegram_user_id = $1 AND c.event_type = $5
      AND c.custom_event_name IS NOT DISTINCT FROM $6::text
      AND c.received_at >= $7::timestamptz - make_interval(secs => site.dedup_window_seconds)
      AND c.channel_id IN ($4::uuid, (SELECT channel_id FROM acq), (SELECT channel_id FROM latest))
    ORDER BY c.channel_id, c.received_at DESC, c.id DESC
  )
  SELECT site.id, site.website_id, site.dedup_window_seconds, site.default_country,
    (SELECT count(*)::int FROM pixels p WHERE p.site_id = site.id AND p.active) AS active_pixels,
    (SELECT row_to_json(acq) FROM acq) AS acq,
    (SELECT row_to_json(latest) FROM latest) AS latest,
    (SELECT row_to_json(attributed) FROM attributed) AS attributed,
    CASE WHEN $4::uuid IS NULL THEN NULL
         ELSE EXISTS (SELECT 1 FROM channels ch WHERE ch.id = $4::uuid AND ch.site_id = site.id) END AS channel_on_site,
    (SELECT json_agg(recent) FROM recent) AS recent
  FROM site`;

/** The row the event context statement returns. */
export interface EventContextRow {
  id: string;
  website_id: string;
  dedup_window_seconds: number;
  default_country: string | null;
  active_pixels: number;
  acq: { site_id: string; channel_id: string | null; visit_id: string; at: string } | null;
  latest: PriorJson | null;
  attributed: PriorJson | null;
  channel_on_site: boolean | null;
  recent:
    | {
        id: string;
        channel_id: string;
        capi_status: CapiStatus;
        cold_lead: boolean;
        visit_id: string | null;
        received_at: string;
      }[]
    | null;
}

/** The context read for the lead lock (`withLeadLock`): it runs under the lock, in the lock's round trip. */
export function eventContextRead(q: EventContextQuery): PreparedCall {
  return {
    name: 'capigram_event_context_read',
    sql: EVENT_CONTEXT_SQL,
    values: [
      q.telegramUserId,
      q.accountId,
      q.siteId,
      q.channelId,
      q.eventType,
      q.customEventName,
      q.now,
      q.eventTime,
      q.windowDays,
    ],
  };
}

/** The context from the statement's rows; null when no site resolved. */
export function toEventContext(rows: readonly EventContextRow[]): EventContext | null {
  const r = rows[0];
  if (!r) return null;
  return {
    site: {
      id: r.id,
      websiteId: r.website_id,
      dedupWindowSeconds: r.dedup_window_seconds,
      activePixels: r.active_pixels,
      defaultCountry: r.default_country,
    },
    acquisition: r.acq
      ? {
          siteId: r.acq.site_id,
          channelId: r.acq.channel_id,
          visitId: r.acq.visit_id,
          at: new Date(r.acq.at),
        }
      : null,
    latest: prior(r.latest),
    attributed: prior(r.attributed),
    channelOnSite: r.channel_on_site,
    recent: (r.recent ?? []).map((m) => ({
      conversionId: m.id,
      channelId: m.channel_id,
      capiStatus: m.capi_status,
      coldLead: m.cold_lead,
      visitId: m.visit_id,
      receivedAt: new Date(m.received_at),
    })),
  };
}

/**
 * The first verified acquisition on a site whose visit happened before `visitBefore`: the
 * attribution a conversion received at that time may recover (a later visit cannot have caused
 * it; an entry's tie counts within the window before that time).
 */
export async function findAcquisitionBefore(
  db: Queryable,
  siteId: string,
  telegramUserId: number,
  visitBefore: Date,
  windowDays: number,
): Promise<Acquisition | null> {
  const { rows } = await db.query<{ site_id: string; channel_id: string | null; visit_id: string; at: Date }>(
    `SELECT site_id, channel_id, visit_id, at FROM (${acquisitions('$3', '$4')}) a
     WHERE site_id = $2 AND visit_created_at < $3
     ORDER BY at, visit_created_at LIMIT 1`,
    [telegramUserId, siteId, visitBefore, windowDays],
  );
  const r = rows[0];
  return r ? { siteId: r.site_id, channelId: r.channel_id, visitId: r.visit_id, at: r.at } : null;
}
