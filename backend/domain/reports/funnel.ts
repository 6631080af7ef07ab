import type { Queryable } from '../../db/pool.js';

/**
 * The funnel of a site (docs/reports.md): visits → invite clicks → joins (attributed and organic)
 * → conversions → value per currency, with leaves and retained joins, grouped by day or by one of
 * the visit's attributes. What is folded is read from `report_rows`, the rest (the last hour or
 * so) live from the raw rows through the same SQL function, so a report costs a few rows per day
 * of its range whatever the size of the history and the time of day.
 */
export const GROUP_BYS = ['day', 'utm_source', 'utm_campaign', 'channel', 'platform'] as const;
export type GroupBy = (typeof GROUP_BYS)[number];

export interface FunnelCounts {
  visits: number;
  inviteClicks: number;
  /**
   * Of `visits`, those that took an invite link (once each, however many links they took). Null in
   * the rows by platform: an erased visit no longer says which platform it came from (its totals
   * still count it).
   */
  clickedVisits: number | null;
  /** Of `clickedVisits`, those an attributed join was traced to; null where `clickedVisits` is. */
  joinedVisits: number | null;
  joins: number;
  attributedJoins: number;
  organicJoins: number;
  leaves: number;
  retained: number;
  conversions: number;
  /** Summed per currency, never across currencies. */
  value: Record<string, number>;
}

interface FunnelRow extends FunnelCounts {
  /** The day (YYYY-MM-DD), utm value, channel id or platform; null when the visit had none. */
  key: string | null;
}

export interface Funnel {
  from: string;
  to: string;
  groupBy: GroupBy;
  /** Only this channel's visits, clicks, joins, leaves and conversions; null: the whole site. */
  channelId: string | null;
  rows: FunnelRow[];
  totals: FunnelCounts;
}

const KEY_SQL: Record<GroupBy, string> = {
  day: `to_char(r.day, 'YYYY-MM-DD')`,
  utm_source: `NULLIF(r.utm_source, '')`,
  utm_campaign: `NULLIF(r.utm_campaign, '')`,
  channel: `r.channel_id::text`,
  platform: `r.platform`,
};

const COLUMNS = `day, channel_id, utm_source, utm_campaign, platform, visits, invite_clicks, joins, attributed_joins, conversions, currency, value, leaves, join_day, lasted_days, campaign_key`;

/**
 * The rows of a site for the UTC days [$2, $3]: what lies before the site's watermark from
 * `report_rows` (except dirty days), what lies after it and the dirty days live. The watermark
 * trails the clock by half an hour to an hour, so the live part is that much of today. The dirty
 * days are read once, as an array, rather than looked up for each row (a year of rows is tens of
 * thousands): measured on 90 days of a 10-million-visit history, a sixth of the ROI report's time.
 */
export const REPORT_ROWS_SQL = `
  WITH s AS (
    SELECT COALESCE((SELECT folded_until FROM report_sealed WHERE site_id = $1), '-infinity'::timestamptz) AS w,
           $2::date::timestamp AT TIME ZONE 'UTC' AS t0, ($3::date + 1)::timestamp AT TIME ZONE 'UTC' AS t1
  )
  SELECT ${COLUMNS} FROM report_rows r, s
  WHERE r.site_id = $1 AND r.day BETWEEN $2::date AND $3::date AND r.day <= (s.w AT TIME ZONE 'UTC')::date
    AND r.day <> ALL (ARRAY(SELECT d.day FROM report_dirty d WHERE d.site_id = $1))
  UNION ALL
  SELECT ${COLUMNS} FROM s, report_compute_at($1, greatest(s.t0, s.w), s.t1)
  UNION ALL
  SELECT x.day, x.channel_id, x.utm_source, x.utm_campaign, x.platform, x.visits, x.invite_clicks, x.joins, x.attributed_joins,
         x.conversions, x.currency, x.value, x.leaves, x.join_day, x.lasted_days, x.campaign_key
  FROM s, report_dirty d, report_compute_at($1, d.day::timestamp AT TIME ZONE 'UTC', least((d.day + 1)::timestamp AT TIME ZONE 'UTC', s.w)) x
  WHERE d.site_id = $1 AND d.day BETWEEN $2::date AND $3::date AND d.day::timestamp AT TIME ZONE 'UTC' < s.w`;

interface SumRow {
  key: string | null;
  /** Leaves of joins made in the range. */
  lost: boolean;
  join_day: string | null;
  currency: string | null;
  visits: number;
  invite_clicks: number;
  joins: number;
  attributed_joins: number;
  conversions: number;
  value: number | null;
  leaves: number;
}

function emptyCounts(): FunnelCounts {
  return {
    visits: 0,
    inviteClicks: 0,
    clickedVisits: 0,
    joinedVisits: 0,
    joins: 0,
    attributedJoins: 0,
    organicJoins: 0,
    leaves: 0,
    retained: 0,
    conversions: 0,
    value: {},
  };
}

/** Money is numeric(18,4) in the database; sums in JS are rounded back to that. */
function money(n: number): number {
  return Math.round(n * 10_000) / 10_000;
}

function add(into: FunnelCounts, r: SumRow): void {
  into.visits += r.visits;
  into.inviteClicks += r.invite_clicks;
  into.joins += r.joins;
  into.attributedJoins += r.attributed_joins;
  into.organicJoins += r.joins - r.attributed_joins;
  into.leaves += r.leaves;
  into.conversions += r.conversions;
  if (r.currency !== null && r.value !== null)
    into.value[r.currency] = money((into.value[r.currency] ?? 0) + r.value);
}

/** Every UTC day from `from` to `to`, inclusive. */
function daysBetween(from: string, to: string): string[] {
  const out: string[] = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += 86_400_000)
    out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}

export async function funnelReport(
  db: Queryable,
  q: { siteId: string; from: string; to: string; groupBy: GroupBy; channelId?: string | null },
): Promise<Funnel> {
  const key = KEY_SQL[q.groupBy];
  // A leave lowers the retained joins of the group of the join it ended; by day, that is the
  // join's day, not the leave's.
  const { rows } = await db.query<SumRow>(
    `SELECT ${key} AS key, COALESCE(r.join_day BETWEEN $2::date AND $3::date, false) AS lost,
            to_char(r.join_day, 'YYYY-MM-DD') AS join_day, r.currency,
            sum(r.visits)::bigint AS visits, sum(r.invite_clicks)::bigint AS invite_clicks, sum(r.joins)::bigint AS joins,
            sum(r.attributed_joins)::bigint AS attributed_joins, sum(r.conversions)::bigint AS conversions, sum(r.value) AS value,
            sum(r.leaves)::bigint AS leaves
     FROM (${REPORT_ROWS_SQL}) r
     WHERE $4::uuid IS NULL OR r.channel_id = $4::uuid
     GROUP BY 1, 2, 3, 4`,
    [q.siteId, q.from, q.to, q.channelId ?? null],
  );
  const groups = new Map<string | null, FunnelCounts>();
  if (q.groupBy === 'day') for (const d of daysBetween(q.from, q.to)) groups.set(d, emptyCounts());
  const lost = new Map<string | null, number>();
  const totals = emptyCounts();
  let lostTotal = 0;
  for (const r of rows) {
    let g = groups.get(r.key);
    if (!g) groups.set(r.key, (g = emptyCounts()));
    add(g, r);
    add(totals, r);
    if (r.lost) {
      const k = q.groupBy === 'day' ? r.join_day : r.key;
      lost.set(k, (lost.get(k) ?? 0) + r.leaves);
      lostTotal += r.leaves;
    }
  }
  for (const r of await visitOutcomes(db, q, key)) {
    totals.clickedVisits = (totals.clickedVisits ?? 0) + r.clicked;
    totals.joinedVisits = (totals.joinedVisits ?? 0) + r.joined;
    if (q.groupBy === 'platform') continue;
    let g = groups.get(r.key);
    if (!g) groups.set(r.key, (g = emptyCounts()));
    g.clickedVisits = (g.clickedVisits ?? 0) + r.clicked;
    g.joinedVisits = (g.joinedVisits ?? 0) + r.joined;
  }
  if (q.groupBy === 'platform')
    for (const g of groups.values()) {
      g.clickedVisits = null;
      g.joinedVisits = null;
    }
  for (const [k, g] of groups) g.retained = g.joins - (lost.get(k) ?? 0);
  totals.retained = totals.joins - lostTotal;
  const list = [...groups].map(([k, g]) => ({ key: k, ...g }));
  if (q.groupBy !== 'day')
    list.sort(
      (a, b) => b.visits - a.visits || b.joins - a.joins || String(a.key).localeCompare(String(b.key)),
    );
  return { from: q.from, to: q.to, groupBy: q.groupBy, channelId: q.channelId ?? null, rows: list, totals };
}

/**
 * Of the range's visits, grouped as the funnel groups them, how many took an invite link and how
 * many of those an attributed join was traced to. The invite clicks and joins of the funnel are
 * counted on their own day and include links taken without a visit (a bot's deep link, a Mini
 * App), a visit's second link, and visits of days before the range, so they can outnumber the
 * range's visits; these two counts are subsets of the visits and give the rates. They are read
 * from the invitations taken since the range began (a few per click, through their
 * `(channel_id, assigned_at)` index), never from all the visits.
 */
async function visitOutcomes(
  db: Queryable,
  q: { siteId: string; from: string; to: string; channelId?: string | null },
  key: string,
): Promise<{ key: string | null; clicked: number; joined: number }[]> {
  const { rows } = await db.query<{ key: string | null; clicked: number; joined: number }>(
    `WITH r AS (
       SELECT DISTINCT ON (v.id) v.id, (v.created_at AT TIME ZONE 'UTC')::date AS day, v.channel_id, v.utm_source, v.utm_campaign,
              report_platform(v.fbc, v.ttclid, v.gclid, v.gbraid, v.wbraid, v.sccid) AS platform
       FROM channels ch JOIN invitations i ON i.channel_id = ch.id JOIN visits v ON v.id = i.visit_id
       WHERE ch.site_id = $1 AND i.assigned_at >= $2::date::timestamp AT TIME ZONE 'UTC'
         AND v.site_id = $1 AND v.created_at >= $2::date::timestamp AT TIME ZONE 'UTC'
         AND v.created_at < ($3::date + 1)::timestamp AT TIME ZONE 'UTC'
         AND ($4::uuid IS NULL OR v.channel_id = $4::uuid)
     )
     SELECT ${key} AS key, count(*)::int AS clicked,
            count(*) FILTER (WHERE EXISTS (
              SELECT 1 FROM invitations i JOIN memberships m
                ON m.channel_id = i.channel_id AND m.occurred_at >= i.assigned_at
              WHERE i.visit_id = r.id AND m.visit_id = r.id AND m.kind = 'join' AND m.attributed))::int AS joined
     FROM r GROUP BY 1`,
    [q.siteId, q.from, q.to, q.channelId ?? null],
  );
  return rows;
}

/** A share of a set, as a fraction in [0, 1]; null when the set is empty. */
export function shareOf(part: number | null, of: number | null): number | null {
  return part === null || of === null || of === 0 ? null : part / of;
}

/**
 * The funnel's rates, each a subset over its set: visits that took a link over visits, and of
 * those, the ones that ended in an attributed join.
 */
export function funnelRates(c: Pick<FunnelCounts, 'visits' | 'clickedVisits' | 'joinedVisits'>): {
  clickRate: number | null;
  joinRate: number | null;
} {
  return {
    clickRate: shareOf(c.clickedVisits, c.visits),
    joinRate: shareOf(c.joinedVisits, c.clickedVisits),
  };
}
