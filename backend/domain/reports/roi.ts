import type { Queryable } from '../../db/pool.js';
import { addMoney, costPer, roas, type Money, type RoiSums } from '../spend/roi-rules.js';
import { REPORT_ROWS_SQL } from './funnel.js';
import { utcDay } from './range.js';

/**
 * The ROI report (docs/spend.md): the platforms' spend and clicks (`spend_daily`) beside the
 * visits, joins, retained joins, conversions and value of the funnel's roll-up, per campaign, day
 * or platform. A visit's campaign is its campaign key (folded with the roll-up), else the campaign
 * with spend in the range whose name equals its utm_campaign (matched here, when reading). Money
 * stays per currency (spend/roi-rules.ts).
 *
 * Every grouping covers the whole site: what belongs to no campaign (organic joins, untagged
 * visits) is a row of its own (key null) by campaign, its click's platform (or `none`) by platform,
 * so the totals are the same whatever the grouping.
 */
export const ROI_GROUP_BYS = ['campaign', 'day', 'platform'] as const;
export type RoiGroupBy = (typeof ROI_GROUP_BYS)[number];

export interface RoiRow {
  /** The campaign id, the day (YYYY-MM-DD) or the platform; null: no campaign. */
  key: string | null;
  platform: string | null;
  campaignId: string | null;
  campaignName: string | null;
  spend: Money;
  clicks: number;
  visits: number;
  joins: number;
  /** Joins of the days old enough still members 7 and 30 days on; null: no day old enough. */
  retained: { d7: number | null; d30: number | null };
  conversions: number;
  value: Money;
  costPerJoin: Money;
  /** The spend of the days old enough, per retained join. */
  costPerRetained: { d7: Money; d30: Money };
  roas: number | null;
}

export type RoiWarning =
  | {
      kind: 'spend_without_visits';
      campaignId: string;
      platform: string;
      campaignName: string | null;
      spend: Money;
    }
  | { kind: 'visits_without_spend'; campaignId: string; platform: string | null; visits: number };

export interface RoiReport {
  from: string;
  to: string;
  groupBy: RoiGroupBy;
  rows: RoiRow[];
  totals: Omit<RoiRow, 'key' | 'platform' | 'campaignId' | 'campaignName'>;
  warnings: RoiWarning[];
}

interface Acc extends RoiSums {
  /** Spend of the days old enough for each horizon. */
  spendOld: { d7: Money; d30: Money };
}

function emptyAcc(): Acc {
  return {
    spend: {},
    clicks: 0,
    visits: 0,
    joins: 0,
    retained: { d7: 0, d30: 0 },
    conversions: 0,
    value: {},
    spendOld: { d7: {}, d30: {} },
  };
}

function merge(into: Acc, a: Acc): void {
  for (const [c, n] of Object.entries(a.spend)) addMoney(into.spend, c, n);
  for (const [c, n] of Object.entries(a.value)) addMoney(into.value, c, n);
  for (const h of ['d7', 'd30'] as const) {
    for (const [c, n] of Object.entries(a.spendOld[h])) addMoney(into.spendOld[h], c, n);
    into.retained[h] = (into.retained[h] ?? 0) + (a.retained[h] ?? 0);
  }
  into.clicks += a.clicks;
  into.visits += a.visits;
  into.joins += a.joins;
  into.conversions += a.conversions;
}

/** What the funnel's rows hold for one group (and currency of the conversions' value). */
interface ActivityRow {
  day: string | null;
  ck: string | null;
  name: string | null;
  platform: string | null;
  currency: string | null;
  visits: string;
  joins: string;
  conversions: string;
  value: string | null;
  retained_7: string;
  retained_30: string;
}

interface SpendRow {
  day: string | null;
  platform: string | null;
  campaign_id: string | null;
  name: string | null;
  /** The last day of the range the campaign was spent under this name. */
  named_on: string | null;
  currency: string;
  spend: string;
  spend_7: string | null;
  spend_30: string | null;
  clicks: string;
}

function activity(r: ActivityRow): Acc {
  const a = emptyAcc();
  a.visits = Number(r.visits);
  a.joins = Number(r.joins);
  a.conversions = Number(r.conversions);
  a.retained = { d7: Number(r.retained_7), d30: Number(r.retained_30) };
  if (r.currency !== null && r.value !== null) addMoney(a.value, r.currency, Number(r.value));
  return a;
}

/**
 * A campaign's spend rows. Nothing spent is no amount (a day a campaign ran without delivering
 * shows no "0 USD" beside the day's real spend, nor a cost of 0 in that currency).
 */
function spending(r: SpendRow): Acc {
  const a = emptyAcc();
  const add = (into: Money, n: string | null) => {
    if (n !== null && Number(n) !== 0) addMoney(into, r.currency, Number(n));
  };
  add(a.spend, r.spend);
  add(a.spendOld.d7, r.spend_7);
  add(a.spendOld.d30, r.spend_30);
  a.clicks = Number(r.clicks);
  return a;
}

function shift(day: string, days: number): string {
  return utcDay(new Date(Date.parse(`${day}T00:00:00Z`) + days * 86_400_000));
}

const earlier = (a: string, b: string) => (a < b ? a : b);
const later = (a: string, b: string) => (a > b ? a : b);

function daysBetween(from: string, to: string): string[] {
  const out: string[] = [];
  for (let d = from; d <= to; d = shift(d, 1)) out.push(d);
  return out;
}

/**
 * Figures of a group. `old` says per horizon whether any of its days is old enough: otherwise its
 * retained count is null (not yet known), not 0.
 */
function figures(
  a: Acc,
  old: { d7: boolean; d30: boolean },
): Omit<RoiRow, 'key' | 'platform' | 'campaignId' | 'campaignName'> {
  const retained = { d7: old.d7 ? a.retained.d7 : null, d30: old.d30 ? a.retained.d30 : null };
  return {
    spend: a.spend,
    clicks: a.clicks,
    visits: a.visits,
    joins: a.joins,
    retained,
    conversions: a.conversions,
    value: a.value,
    costPerJoin: costPer(a.spend, a.joins),
    costPerRetained: { d7: costPer(a.spendOld.d7, retained.d7), d30: costPer(a.spendOld.d30, retained.d30) },
    roas: roas(a.spend, a.value),
  };
}

interface Campaign {
  id: string;
  platform: string | null;
  name: string | null;
  hasSpend: boolean;
  acc: Acc;
  /** Its visits' activity by click platform (a campaign with no spend has no platform of its own). */
  byClick: Map<string, Acc>;
}

export async function roiReport(
  db: Queryable,
  q: { siteId: string; from: string; to: string; groupBy: RoiGroupBy; today?: string },
): Promise<RoiReport> {
  const today = q.today ?? utcDay(new Date());
  // Leaves of the range's joins that matter (before 30 days) happen up to 31 days after it.
  const readTo = later(q.to, earlier(shift(q.to, 31), today));
  // The last join day old enough for each horizon: the day ended `n` days before today began.
  const last = { d7: earlier(q.to, shift(today, -8)), d30: earlier(q.to, shift(today, -31)) };
  const old = { d7: last.d7 >= q.from, d30: last.d30 >= q.from };
  const byDay = q.groupBy === 'day';

  // The funnel's side and the platforms' side are read at once (two connections of a pool).
  const [{ rows: acts }, { rows: spends }] = await Promise.all([
    // A leave is counted with the join it ended: on that join's day (`a`), within the range.
    db.query<ActivityRow>(
      `WITH r AS (
         SELECT COALESCE(x.join_day, x.day) AS a, x.campaign_key AS ck,
                CASE WHEN x.campaign_key IS NULL THEN NULLIF(x.utm_campaign, '') END AS name,
                x.platform, x.currency, x.visits, x.joins, x.conversions, x.value, x.leaves, x.join_day, x.lasted_days
         FROM (${REPORT_ROWS_SQL}) x
       )
       SELECT ${byDay ? `CASE WHEN GROUPING(a) = 0 THEN to_char(a, 'YYYY-MM-DD') END` : 'NULL'} AS day, ck, name, platform, currency,
              sum(visits) AS visits, sum(joins) AS joins, sum(conversions) AS conversions, sum(value) AS value,
              COALESCE(sum(joins) FILTER (WHERE a <= $5::date), 0)
                - COALESCE(sum(leaves) FILTER (WHERE join_day <= $5::date AND lasted_days < 7), 0) AS retained_7,
              COALESCE(sum(joins) FILTER (WHERE a <= $6::date), 0)
                - COALESCE(sum(leaves) FILTER (WHERE join_day <= $6::date AND lasted_days < 30), 0) AS retained_30
       FROM r WHERE a BETWEEN $2::date AND $4::date
       GROUP BY GROUPING SETS ((ck, name, platform, currency)${byDay ? ', (a, currency)' : ''})`,
      [q.siteId, q.from, readTo, q.to, last.d7, last.d30],
    ),
    // A campaign's spend of a day is read per campaign ('' ad set) when the import wrote it so,
    // else as the sum of its ad sets: never both (the primary key finds the campaign's row). The
    // rows are summed per name too, each with the last day it was spent under, so that a renamed
    // campaign is shown by its latest name without sorting the range's rows.
    db.query<SpendRow>(
      `WITH d AS (
         SELECT s.platform, sd.day, sd.campaign_id, sd.currency, NULLIF(sd.campaign_name, '') AS name, sd.spend, sd.clicks
         FROM spend_sources s JOIN spend_daily sd ON sd.source_id = s.id
         WHERE s.site_id = $1 AND sd.day BETWEEN $2::date AND $3::date
           AND (sd.ad_set_id = '' OR NOT EXISTS (
             SELECT 1 FROM spend_daily c
             WHERE c.source_id = sd.source_id AND c.day = sd.day AND c.campaign_id = sd.campaign_id AND c.ad_set_id = ''))
       )
       SELECT ${byDay ? `CASE WHEN GROUPING(day) = 0 THEN to_char(day, 'YYYY-MM-DD') END` : 'NULL'} AS day,
              CASE WHEN GROUPING(campaign_id) = 0 THEN platform END AS platform,
              CASE WHEN GROUPING(campaign_id) = 0 THEN campaign_id END AS campaign_id, currency,
              CASE WHEN GROUPING(campaign_id) = 0 THEN name END AS name,
              CASE WHEN GROUPING(campaign_id) = 0 THEN to_char(max(day), 'YYYY-MM-DD') END AS named_on,
              sum(spend) AS spend, sum(spend) FILTER (WHERE day <= $4::date) AS spend_7,
              sum(spend) FILTER (WHERE day <= $5::date) AS spend_30, sum(clicks) AS clicks
       FROM d
       GROUP BY GROUPING SETS ((platform, campaign_id, currency, name)${byDay ? ', (day, currency)' : ''})`,
      [q.siteId, q.from, q.to, last.d7, last.d30],
    ),
  ]);

  const campaigns = new Map<string, Campaign>();
  const campaign = (id: string): Campaign => {
    let c = campaigns.get(id);
    if (!c)
      campaigns.set(
        id,
        (c = { id, platform: null, name: null, hasSpend: false, acc: emptyAcc(), byClick: new Map() }),
      );
    return c;
  };
  /** The last day each campaign's name was read on (a renamed campaign shows its latest name). */
  const namedOn = new Map<string, string>();
  for (const r of spends) {
    if (r.day !== null || r.campaign_id === null) continue;
    const c = campaign(r.campaign_id);
    c.platform ??= r.platform;
    if (r.name !== null && r.named_on !== null && r.named_on > (namedOn.get(c.id) ?? '')) {
      c.name = r.name;
      namedOn.set(c.id, r.named_on);
    }
    c.hasSpend = true;
    merge(c.acc, spending(r));
  }
  // Names of the campaigns with spend, for visits with no campaign key. Of campaigns sharing a
  // name, the one on the platform of the visit's click, else the first by platform and id.
  const byName = new Map<string, Campaign[]>();
  for (const c of [...campaigns.values()].sort((a, b) =>
    `${a.platform}:${a.id}`.localeCompare(`${b.platform}:${b.id}`),
  ))
    if (c.name !== null) byName.set(c.name, [...(byName.get(c.name) ?? []), c]);
  const match = (name: string | null, platform: string | null): Campaign | null => {
    const list = name === null ? undefined : byName.get(name);
    if (!list) return null;
    return list.find((c) => c.platform === platform) ?? list[0]!;
  };

  /** What belongs to no campaign, per click platform. */
  const loose = new Map<string, Acc>();
  for (const r of acts) {
    if (r.day !== null) continue;
    const c = r.ck !== null ? campaign(r.ck) : match(r.name, r.platform);
    const a = activity(r);
    const into = c === null ? loose : c.byClick;
    const p = r.platform ?? 'none';
    if (!into.has(p)) into.set(p, emptyAcc());
    merge(into.get(p)!, a);
    if (c !== null) merge(c.acc, a);
  }

  const warnings: RoiWarning[] = [];
  for (const c of campaigns.values()) {
    if (c.hasSpend && c.acc.visits === 0 && Object.values(c.acc.spend).some((n) => n !== 0))
      warnings.push({
        kind: 'spend_without_visits',
        campaignId: c.id,
        platform: c.platform!,
        campaignName: c.name,
        spend: c.acc.spend,
      });
    if (!c.hasSpend && c.acc.visits > 0)
      warnings.push({
        kind: 'visits_without_spend',
        campaignId: c.id,
        platform: dominant(c.byClick),
        visits: c.acc.visits,
      });
  }
  warnings.sort((a, b) => a.kind.localeCompare(b.kind) || a.campaignId.localeCompare(b.campaignId));

  const totals = emptyAcc();
  for (const c of campaigns.values()) merge(totals, c.acc);
  for (const a of loose.values()) merge(totals, a);

  let rows: RoiRow[];
  if (q.groupBy === 'campaign') {
    rows = [...campaigns.values()].map((c) => ({
      key: c.id,
      platform: c.platform ?? dominant(c.byClick),
      campaignId: c.id,
      campaignName: c.name,
      ...figures(c.acc, old),
    }));
    rows.sort(
      (a, b) => b.joins - a.joins || b.visits - a.visits || String(a.key).localeCompare(String(b.key)),
    );
    const rest = emptyAcc();
    for (const a of loose.values()) merge(rest, a);
    if (rest.visits + rest.joins + rest.conversions > 0)
      rows.push({ key: null, platform: null, campaignId: null, campaignName: null, ...figures(rest, old) });
  } else if (q.groupBy === 'platform') {
    const groups = new Map<string, Acc>();
    const into = (p: string, a: Acc) => {
      if (!groups.has(p)) groups.set(p, emptyAcc());
      merge(groups.get(p)!, a);
    };
    for (const c of campaigns.values()) {
      if (c.platform !== null) into(c.platform, c.acc);
      else for (const [p, a] of c.byClick) into(p, a);
    }
    for (const [p, a] of loose) into(p, a);
    rows = [...groups].map(([p, a]) => ({
      key: p,
      platform: p,
      campaignId: null,
      campaignName: null,
      ...figures(a, old),
    }));
    rows.sort(
      (a, b) =>
        Number(a.key === 'none') - Number(b.key === 'none') || String(a.key).localeCompare(String(b.key)),
    );
  } else {
    const groups = new Map<string, Acc>(daysBetween(q.from, q.to).map((d) => [d, emptyAcc()]));
    for (const r of acts) if (r.day !== null) merge(groups.get(r.day)!, activity(r));
    for (const r of spends) if (r.day !== null) merge(groups.get(r.day)!, spending(r));
    rows = [...groups].map(([d, a]) => ({
      key: d,
      platform: null,
      campaignId: null,
      campaignName: null,
      ...figures(a, { d7: d <= last.d7, d30: d <= last.d30 }),
    }));
  }
  return { from: q.from, to: q.to, groupBy: q.groupBy, rows, totals: figures(totals, old), warnings };
}

/** The click platform most of a campaign's visits came with (a campaign with no spend of its own). */
function dominant(byClick: Map<string, Acc>): string | null {
  let best: [string, number] | null = null;
  for (const [p, a] of byClick) if (best === null || a.visits > best[1]) best = [p, a.visits];
  return best?.[0] ?? null;
}
