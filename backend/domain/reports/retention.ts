import type { Queryable } from '../../db/pool.js';
import { REPORT_ROWS_SQL } from './funnel.js';

/**
 * Retention per campaign: of the joins made on the days of a range, the share still members 1, 7
 * and 30 days after joining. A day's joins count for a horizon once the horizon has fully passed
 * for all of them (the day ended at least N days before today); until then the share is null.
 * Read from the same rows as the funnel: a leave is recorded with the day of the join it ended
 * and the whole days between them.
 */
const HORIZONS = [1, 7, 30] as const;

export interface CampaignRetention {
  /** utm_campaign of the visits the joins came from; null: organic joins and visits without one. */
  campaign: string | null;
  joins: number;
  /** Per horizon: the share of the joins old enough that were still members, or null. */
  retained: Record<`d${(typeof HORIZONS)[number]}`, number | null>;
}

export async function campaignRetention(
  db: Queryable,
  q: { siteId: string; from: string; to: string; today: string },
): Promise<CampaignRetention[]> {
  const horizon = (n: number) => `
    sum(r.joins) FILTER (WHERE r.day BETWEEN $2::date AND least($4::date, $3::date - ${n + 1}))::bigint AS joins_${n},
    sum(r.leaves) FILTER (WHERE r.join_day BETWEEN $2::date AND least($4::date, $3::date - ${n + 1}) AND r.lasted_days < ${n})::bigint AS lost_${n}`;
  // The rows run to today ($3): leaves of the range's joins happen after the range ($2 to $4).
  const { rows } = await db.query<Record<string, number | string | null>>(
    `SELECT NULLIF(r.utm_campaign, '') AS campaign,
            sum(r.joins) FILTER (WHERE r.day BETWEEN $2::date AND $4::date)::bigint AS joins,
            ${HORIZONS.map(horizon).join(',')}
     FROM (${REPORT_ROWS_SQL}) r
     GROUP BY 1`,
    [q.siteId, q.from, q.today, q.to],
  );
  return rows
    .map((r) => ({
      campaign: r.campaign as string | null,
      joins: Number(r.joins ?? 0),
      retained: Object.fromEntries(
        HORIZONS.map((n) => {
          const joins = Number(r[`joins_${n}`] ?? 0);
          return [
            `d${n}`,
            joins === 0 ? null : Math.round((1 - Number(r[`lost_${n}`] ?? 0) / joins) * 10_000) / 10_000,
          ];
        }),
      ) as CampaignRetention['retained'],
    }))
    .filter((r) => r.joins > 0)
    .sort(
      (a, b) =>
        b.joins - a.joins ||
        Number(a.campaign === null) - Number(b.campaign === null) ||
        String(a.campaign).localeCompare(String(b.campaign)),
    );
}
