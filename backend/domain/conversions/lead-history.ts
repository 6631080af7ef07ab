import type { Queryable } from '../../db/pool.js';
import type { CapiStatus } from '../outbox/capi-status.js';
import type { ApiVisitOverride, EventTypeName } from '../outbox/conversion-record.js';
import type { PreparedCall, SharedRead } from './lead-lock.js';
import type { NamedSite } from './site-scope.js';

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

/**
 * The site's conversion of the event's order (same event type and name, any time): the only one
 * an event with an `orderId` may match. `sameUser`: it is this Telegram user's (only then may the
 * event change it: another user's conversion is under another lead lock).
 */
export interface OrderMatch extends Omit<RecentMatch, 'channelId'> {
  channelId: string | null;
  sameUser: boolean;
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
  /** With an `orderId`: the site's conversion of that order, if any. */
  order: OrderMatch | null;
}

export interface EventContextQuery {
  accountId: string;
  /** The site the request named (or its key is limited to); null lets the history decide. */
  siteId: string | null;
  telegramUserId: number;
  channelId: string | null;
  eventType: EventTypeName;
  customEventName: string | null;
  /** The event's `orderId`; null for the recent-match rule. */
  orderId: string | null;
  now: Date;
  /** When the event happened: an entry's tie is the lead's acquisition within the window before it. */
  eventTime: Date;
  /** ATTRIBUTION_WINDOW_DAYS. */
  windowDays: number;
  /**
   * The site names the request gave (`siteNameLookups`), found by the statement itself (rows of
   * kind `n`), so that naming a site costs no round trip of its own; `siteId` is then null.
   */
  siteNames?: { ids: string[]; websiteIds: string[] } | undefined;
}

/**
 * Everything an event needs, in one round trip: the facts about the Telegram user in the account
 * (acquisition evidence, their newest conversions, recent conversions of the event's type, the
 * sites these name, the supplied channel), which `eventContextOf` turns into the context. The
 * statement only reads rows by the user's indexes; every rule is in `eventContextOf`.
 *
 * Why facts and not the answer: the decisions as SQL (a CTE per decision, each excluding the
 * expired ties' rows) made a plan of some eighty nodes whose set-up and tear-down PostgreSQL pays
 * on every execution: 300 µs of the database's CPU per event, against about 60 for this
 * statement (docs/benchmarks.md#business-api). Prepared once per connection: it runs on every
 * business event.
 *
 * Row kinds (`kind`):
 * - `a` attributed joins, `w` webhook conversions, `t` entry ties (every tie of the user, expired
 *   or not: `flag` says whether it is within the window, `ok` whether its entry, site and visit
 *   still hold), ordered by (`at`, `visit_at`), the order in which acquisitions are first;
 * - `c` the user's newest conversions in the account, newest first, at most the input's `newest` (`NEWEST_CONVERSIONS`,
 *   or all of them);
 * - `r` the user's conversions in the account with the event's type and custom name, within their
 *   site's dedup window, newest first;
 * - `s` the account's sites these rows name, and the named site;
 * - `h` the supplied channel;
 * - `o` with an order id, the conversion of that order (event type and name) on any of the account's
 *   sites (`ok`: it is this user's), found by the unique index of migration 191 site by site;
 * - `n` the sites the request named (`siteNames`), of any account: `site_id`, `website_id`, and
 *   the site's account as `id` (`namedSiteOf` applies the key's rules to them).
 */
export const NEWEST_CONVERSIONS = 32;

const QUERY_COLUMNS = `n int, telegram_user_id bigint, account_id uuid, site_id uuid, channel_id uuid, event_type text,
  custom_event_name text, order_id text, now timestamptz, event_time timestamptz, window_days int, newest int,
  site_ids uuid[], website_ids text[]`;

// Each event's facts are read by a LATERAL subquery fenced with OFFSET 0, so that every one is an
// index look-up by the event's user whatever the planner thinks of the input's size (it takes a
// set-returning function for a hundred rows, and would rather hash-join whole tables).
const EVENT_FACTS_SQL = `
  WITH q AS MATERIALIZED (SELECT * FROM jsonb_to_recordset($1::jsonb) AS q(${QUERY_COLUMNS})),
  acq AS MATERIALIZED (
    SELECT q.n, a.* FROM q CROSS JOIN LATERAL (
      SELECT 'a' AS kind, ch.site_id, m.channel_id, m.visit_id, m.occurred_at AS at, v.created_at AS visit_at, NULL::uuid AS id, NULL::boolean AS flag, true AS ok
      FROM memberships m JOIN channels ch ON ch.id = m.channel_id JOIN visits v ON v.id = m.visit_id AND v.site_id = ch.site_id
      WHERE m.telegram_user_id = q.telegram_user_id AND m.attributed AND m.kind <> 'leave'
      UNION ALL
      SELECT 'w', c.site_id, c.channel_id, c.visit_id, c.attributed_at, v.created_at, c.id, NULL, true
      FROM conversions c JOIN visits v ON v.id = c.visit_id AND v.site_id = c.site_id
      WHERE c.telegram_user_id = q.telegram_user_id AND c.source = 'webhook'
      UNION ALL
      SELECT 't', k.site_id, COALESCE(e.channel_id, s.default_channel_id), k.visit_id, k.used_at, v.created_at, k.conversion_id,
             ${tieInWindow('k', 'q.event_time', 'q.window_days')}, e.id IS NOT NULL AND s.id IS NOT NULL AND v.id IS NOT NULL
      FROM entry_clicks k LEFT JOIN entries e ON e.id = k.entry_id LEFT JOIN sites s ON s.id = k.site_id
        LEFT JOIN visits v ON v.id = k.visit_id AND v.site_id = k.site_id
      WHERE k.used_by = q.telegram_user_id
      OFFSET 0) a
  ),
  named AS MATERIALIZED (
    SELECT q.n, s.* FROM q CROSS JOIN LATERAL (
      SELECT id, account_id, website_id FROM sites WHERE id = ANY (q.site_ids) AND removed_at IS NULL
      UNION
      SELECT id, account_id, website_id FROM sites WHERE website_id = ANY (q.website_ids) AND removed_at IS NULL
      OFFSET 0) s
  ),
  conv AS MATERIALIZED (
    SELECT q.n, c.* FROM q CROSS JOIN LATERAL (
      SELECT c.id, c.site_id, c.channel_id, c.visit_id, c.api_visit_override, c.event_source_url, c.received_at
      FROM conversions c JOIN sites x ON x.id = c.site_id AND x.account_id = q.account_id
      WHERE c.telegram_user_id = q.telegram_user_id ORDER BY c.received_at DESC, c.id DESC LIMIT q.newest) c
  )
  (SELECT n, kind, site_id, channel_id, visit_id, at, visit_at, id, flag, ok,
          NULL::jsonb AS api_visit_override, NULL::text AS event_source_url, NULL::text AS capi_status,
          NULL::text AS website_id, NULL::int AS dedup_window_seconds, NULL::text AS default_country, NULL::int AS active_pixels
   FROM acq ORDER BY n, at, visit_at)
  UNION ALL
  (SELECT n, 'c', site_id, channel_id, visit_id, received_at, NULL, id, NULL, NULL, api_visit_override, event_source_url, NULL, NULL, NULL, NULL, NULL
   FROM conv ORDER BY n, received_at DESC, id DESC)
  UNION ALL
  (SELECT q.n, 'r', r.site_id, r.channel_id, r.visit_id, r.received_at, NULL, r.id, r.cold_lead, NULL, NULL, NULL, r.capi_status, NULL, NULL, NULL, NULL
   FROM q CROSS JOIN LATERAL (
     SELECT c.site_id, c.channel_id, c.visit_id, c.received_at, c.id, c.cold_lead, c.capi_status
     FROM conversions c JOIN sites x ON x.id = c.site_id AND x.account_id = q.account_id AND x.dedup_window_seconds > 0
     WHERE c.telegram_user_id = q.telegram_user_id AND c.event_type = q.event_type
       AND c.custom_event_name IS NOT DISTINCT FROM q.custom_event_name
       AND c.received_at >= q.now - make_interval(secs => x.dedup_window_seconds)
     OFFSET 0) r
   ORDER BY q.n, r.received_at DESC, r.id DESC)
  UNION ALL
  SELECT q.n, 's', s.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, s.website_id, s.dedup_window_seconds, s.default_country,
         (SELECT count(*)::int FROM pixels p WHERE p.site_id = s.id AND p.active)
  FROM (SELECT n, site_id FROM q WHERE site_id IS NOT NULL UNION SELECT n, id FROM named
        UNION SELECT n, site_id FROM acq UNION SELECT n, site_id FROM conv) mentioned
    JOIN q ON q.n = mentioned.n
    CROSS JOIN LATERAL (SELECT * FROM sites s WHERE s.id = mentioned.site_id AND s.account_id = q.account_id AND s.removed_at IS NULL OFFSET 0) s
  UNION ALL
  SELECT n, 'n', id, NULL, NULL, NULL, NULL, account_id, NULL, NULL, NULL, NULL, NULL, website_id, NULL, NULL, NULL FROM named
  UNION ALL
  SELECT q.n, 'o', o.site_id, o.channel_id, o.visit_id, o.received_at, NULL, o.id, o.cold_lead, o.telegram_user_id = q.telegram_user_id,
         NULL, NULL, o.capi_status, NULL, NULL, NULL, NULL
  FROM q CROSS JOIN LATERAL (
    SELECT c.* FROM sites x JOIN conversions c ON c.site_id = x.id AND c.event_type = q.event_type
      AND COALESCE(c.custom_event_name, '') = COALESCE(q.custom_event_name, '') AND c.order_id = q.order_id
    WHERE x.account_id = q.account_id AND q.order_id IS NOT NULL OFFSET 0) o
  UNION ALL
  SELECT q.n, 'h', h.site_id, h.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM q CROSS JOIN LATERAL (SELECT ch.site_id, ch.id FROM channels ch WHERE ch.id = q.channel_id OFFSET 0) h`;

/** A row of the facts statement (see there for what each kind fills). */
export interface EventFactRow {
  /** Which event of the statement's the row is about (1-based). */
  n: number;
  kind: 'a' | 'w' | 't' | 'c' | 'r' | 's' | 'h' | 'o' | 'n';
  site_id: string | null;
  channel_id: string | null;
  visit_id: string | null;
  at: Date | null;
  visit_at: Date | null;
  id: string | null;
  flag: boolean | null;
  ok: boolean | null;
  api_visit_override: ApiVisitOverride | null;
  event_source_url: string | null;
  capi_status: CapiStatus | null;
  website_id: string | null;
  dedup_window_seconds: number | null;
  default_country: string | null;
  active_pixels: number | null;
}

/** One event's part of the facts statement's input. */
function factsInput(q: EventContextQuery, newest: number | null) {
  return {
    telegram_user_id: q.telegramUserId,
    account_id: q.accountId,
    site_id: q.siteId,
    channel_id: q.channelId,
    event_type: q.eventType,
    custom_event_name: q.customEventName,
    order_id: q.orderId,
    now: q.now,
    event_time: q.eventTime,
    window_days: q.windowDays,
    newest,
    site_ids: q.siteNames?.ids ?? [],
    website_ids: q.siteNames?.websiteIds ?? [],
  };
}

/** The facts statement for the events `inputs` (from `factsInput`). */
function factsStatement(inputs: unknown[]): PreparedCall {
  const numbered = inputs.map((input, i) => ({ ...(input as object), n: i + 1 }));
  // As JSON text: the driver would send a bare array as a PostgreSQL array, not as jsonb.
  return { name: 'capigram_event_facts_read', sql: EVENT_FACTS_SQL, values: [JSON.stringify(numbered)] };
}

/**
 * The facts read for the lead lock (`withLeadLock`): it runs under the lock, in the lock's round
 * trip; a shared event transaction reads the facts of all its events in one statement.
 */
export function eventContextRead(
  q: EventContextQuery,
  newest: number | null = NEWEST_CONVERSIONS,
): SharedRead<EventFactRow> {
  return {
    kind: 'event_facts',
    input: factsInput(q, newest),
    statement: factsStatement,
    rowsOf: (rows, i) => (rows as EventFactRow[]).filter((r) => r.n === i + 1),
  };
}

/** What the newest conversions could not settle, because there may be older ones than those read. */
export interface Unsettled {
  /** No named site, no acquisition, and every conversion read is an expired tie's: the site is older. */
  site: boolean;
  latest: boolean;
  attributed: boolean;
}

/**
 * The context from the facts (pure): null when no site resolved. Without a named site the event
 * lands on the site of the user's first verified acquisition in the account, else of their most
 * recent conversion there. An entry's tie past its window leaves the lead as it would be without
 * it: no acquisition, its event no earlier conversion, and its visit carried forward by no later
 * one. `unsettled` is set when the answer may lie among conversions older than those read
 * (`newestRead` of them); `loadEventContext` then reads them all.
 */
export function eventContextOf(
  rows: readonly EventFactRow[],
  named: { siteId: string | null; channelId: string | null },
  newestRead: number | null = NEWEST_CONVERSIONS,
): { context: EventContext | null; unsettled: Unsettled | null } {
  const sites = new Map(rows.filter((r) => r.kind === 's').map((r) => [r.site_id!, r]));
  const ties = rows.filter((r) => r.kind === 't');
  const tieConversions = new Set(ties.flatMap((t) => (t.id === null ? [] : [t.id])));
  const expired = ties.filter((t) => t.flag === false);
  const expiredConversions = new Set(expired.flatMap((t) => (t.id === null ? [] : [t.id])));
  const expiredVisits = new Set(expired.flatMap((t) => (t.visit_id === null ? [] : [t.visit_id])));
  // In the statement's order: by (at, visit_at), first first.
  const acquisitions = rows.filter(
    (r) =>
      sites.has(r.site_id!) &&
      (r.kind === 'a' ||
        (r.kind === 'w' && !tieConversions.has(r.id!)) ||
        (r.kind === 't' && r.flag === true && r.ok === true)),
  );
  // Newest first, in the account (the statement joins the account's sites).
  const newest = rows.filter((r) => r.kind === 'c');
  const truncated = newestRead !== null && newest.length >= newestRead;
  const live = newest.filter((c) => !expiredConversions.has(c.id!));

  const siteId = named.siteId ?? acquisitions[0]?.site_id ?? live[0]?.site_id ?? null;
  const site = siteId === null ? undefined : sites.get(siteId);
  if (site === undefined) {
    const unsettled = named.siteId === null && acquisitions.length === 0 && truncated;
    return {
      context: null,
      unsettled: unsettled ? { site: true, latest: false, attributed: false } : null,
    };
  }
  const acq = acquisitions.find((a) => a.site_id === siteId);
  const onSite = live.filter((c) => c.site_id === siteId);
  const latest = onSite[0];
  const attributed = onSite.find(
    (c) =>
      (c.visit_id !== null || c.api_visit_override !== null) &&
      (c.visit_id === null || !expiredVisits.has(c.visit_id)),
  );
  const context: EventContext = {
    site: {
      id: siteId!,
      websiteId: site.website_id!,
      dedupWindowSeconds: site.dedup_window_seconds!,
      activePixels: site.active_pixels!,
      defaultCountry: site.default_country,
    },
    acquisition: acq
      ? { siteId: acq.site_id!, channelId: acq.channel_id, visitId: acq.visit_id!, at: acq.at! }
      : null,
    latest: latest ? priorOf(latest) : null,
    attributed: attributed ? priorOf(attributed) : null,
    channelOnSite: named.channelId === null ? null : rows.some((r) => r.kind === 'h' && r.site_id === siteId),
    recent: [],
    order: orderMatch(rows, siteId!),
  };
  context.recent = recentMatches(rows, context, named.channelId);
  const unsettled =
    truncated && (latest === undefined || attributed === undefined)
      ? { site: false, latest: latest === undefined, attributed: attributed === undefined }
      : null;
  return { context, unsettled };
}

function priorOf(r: EventFactRow): PriorConversion {
  return {
    conversionId: r.id!,
    channelId: r.channel_id,
    visitId: r.visit_id,
    apiVisitOverride: r.api_visit_override,
    eventSourceUrl: r.event_source_url,
    receivedAt: r.at!,
  };
}

/**
 * The newest matching conversion per candidate channel (the supplied one, the acquisition's, the
 * latest conversion's) on the context's site, ordered by channel.
 */
function recentMatches(
  rows: readonly EventFactRow[],
  ctx: Pick<EventContext, 'site' | 'acquisition' | 'latest'>,
  suppliedChannelId: string | null,
): RecentMatch[] {
  const candidates = new Set(
    [suppliedChannelId, ctx.acquisition?.channelId, ctx.latest?.channelId].filter(
      (c): c is string => typeof c === 'string',
    ),
  );
  const byChannel = new Map<string, RecentMatch>();
  for (const r of rows) {
    if (r.kind !== 'r' || r.site_id !== ctx.site.id || r.channel_id === null) continue;
    if (!candidates.has(r.channel_id) || byChannel.has(r.channel_id)) continue;
    byChannel.set(r.channel_id, {
      conversionId: r.id!,
      channelId: r.channel_id,
      capiStatus: r.capi_status!,
      coldLead: r.flag!,
      visitId: r.visit_id,
      receivedAt: r.at!,
    });
  }
  return [...byChannel.values()].sort((a, b) => compare(a.channelId, b.channelId));
}

function orderMatch(rows: readonly EventFactRow[], siteId: string): OrderMatch | null {
  const r = rows.find((o) => o.kind === 'o' && o.site_id === siteId);
  if (r === undefined) return null;
  return {
    conversionId: r.id!,
    channelId: r.channel_id,
    capiStatus: r.capi_status!,
    coldLead: r.flag!,
    visitId: r.visit_id,
    receivedAt: r.at!,
    sameUser: r.ok === true,
  };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The conversions an event may lock before its rules run (a shared transaction locks those of all
 * its events first): the recent matches not sent yet. While the context is unsettled, every recent
 * conversion of the user not sent yet (a superset: the latest conversion, and so a candidate
 * channel, may be among the older ones).
 */
export function recentToLock(
  rows: readonly EventFactRow[],
  named: { siteId: string | null; channelId: string | null },
): string[] {
  const { context, unsettled } = eventContextOf(rows, named);
  const recent =
    unsettled === null
      ? (context?.recent ?? [])
      : rows.filter((r) => r.kind === 'r').map((r) => ({ conversionId: r.id!, capiStatus: r.capi_status! }));
  // The user's own order conversions, which the event may change (another user's it never does).
  const orders = rows
    .filter((r) => r.kind === 'o' && r.ok === true)
    .map((r) => ({ conversionId: r.id!, capiStatus: r.capi_status! }));
  const ids = [...recent, ...orders].filter((m) => m.capiStatus !== 'sent').map((m) => m.conversionId);
  return [...new Set(ids)];
}

/**
 * The context, reading the user's older conversions when the newest could not settle it (rare: a
 * user with more than `NEWEST_CONVERSIONS` conversions in the account whose newest are on other
 * sites, carry no attribution, or are expired ties' events): the facts again, with every
 * conversion of the user in the account.
 */
export async function loadEventContext(
  tx: Queryable,
  rows: readonly EventFactRow[],
  q: EventContextQuery,
): Promise<EventContext | null> {
  const named = { siteId: q.siteId, channelId: q.channelId };
  const first = eventContextOf(rows, named);
  if (first.unsettled === null) return first.context;
  const all = factsStatement([factsInput(q, null)]);
  const { rows: everything } = await tx.query<EventFactRow>({ text: all.sql, values: [...all.values] });
  return eventContextOf(everything, named, null).context;
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

/**
 * What each site name of the request found among the facts' `n` rows, for `siteOfNames`: a UUID
 * by the site's id (in any case, as `findSite` finds it), anything else by its websiteId.
 */
export function namedSites(rows: readonly EventFactRow[]): (name: string) => NamedSite | null {
  const named = rows.filter((r) => r.kind === 'n');
  return (name) => {
    const lower = name.toLowerCase();
    const r = named.find((x) => x.site_id === lower || x.website_id === name);
    return r === undefined ? null : { id: r.site_id!, account_id: r.id! };
  };
}
