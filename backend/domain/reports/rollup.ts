import { withTx, type Pool, type PoolClient } from '../../db/pool.js';

/**
 * The reports' roll-up (docs/reports.md): whole past days of each site are folded from the raw
 * rows into `report_rows` ("sealed"), so that a report reads a few rows per day however long the
 * history is, and the write paths (track/init above all) carry no counter.
 *
 * A day is sealed once it ended more than `SEAL_LAG_MS` ago: every row of it has been committed
 * by then (the write paths stamp rows with the time of their own transaction, which lasts
 * seconds). A row that still lands in a sealed day (a value set days later, a Telegram update
 * delivered late) marks the day dirty (triggers in migration 140); the report reads a dirty day
 * live and the next run seals it again. The shorter the lag, the less a report reads live: with
 * an hour, only today (and, in the first hour after midnight UTC, yesterday).
 */
export const SEAL_LAG_MS = 3_600_000;
const DAY_MS = 86_400_000;

export interface RollupOptions {
  /** Days sealed per site per run at most; the next run goes on. */
  maxDays?: number;
  /** Stop starting sites after this instant (ms); the next run goes on. */
  until?: number;
}

export interface RollupResult {
  sealed: number;
  resealed: number;
}

/** The first day not to seal yet at `now`: days before it ended more than SEAL_LAG_MS ago. */
export function sealLimit(now: Date): string {
  return new Date(Math.floor((now.getTime() - SEAL_LAG_MS) / DAY_MS) * DAY_MS).toISOString().slice(0, 10);
}

export async function runRollup(pool: Pool, now: Date, o: RollupOptions = {}): Promise<RollupResult> {
  const limit = sealLimit(now);
  const maxDays = o.maxDays ?? 62;
  const out: RollupResult = { sealed: 0, resealed: 0 };
  const { rows: sites } = await pool.query<{ id: string }>('SELECT id FROM sites ORDER BY id');
  for (const { id } of sites) {
    if (o.until !== undefined && Date.now() > o.until) break;
    out.resealed += await resealDirty(pool, id);
    out.sealed += await sealSite(pool, id, limit, maxDays);
  }
  return out;
}

/** Seals the site's next days up to `limit` (exclusive), one transaction per day. */
async function sealSite(pool: Pool, siteId: string, limit: string, maxDays: number): Promise<number> {
  let day = await nextDay(pool, siteId);
  let n = 0;
  while (day !== null && day < limit && n < maxDays) {
    const sealing = day;
    await withTx(pool, async (tx) => {
      // The site's row serialises two runs (two worker processes): the second waits, then finds
      // the day sealed and moves on.
      await tx.query('INSERT INTO report_sealed (site_id, sealed_before) VALUES ($1, $2::date) ON CONFLICT (site_id) DO NOTHING', [siteId, sealing]);
      const { rows } = await tx.query<{ sealed_before: string }>(
        `SELECT to_char(sealed_before, 'YYYY-MM-DD') AS sealed_before FROM report_sealed WHERE site_id = $1 FOR UPDATE`,
        [siteId],
      );
      if (rows[0]!.sealed_before !== sealing) return;
      await replaceDay(tx, siteId, sealing);
      await tx.query(`UPDATE report_sealed SET sealed_before = $2::date + 1 WHERE site_id = $1`, [siteId, sealing]);
    });
    n++;
    day = nextDate(sealing);
  }
  return n;
}

/** The site's first day not sealed: after the sealed ones, or the day of its first row. */
async function nextDay(pool: Pool, siteId: string): Promise<string | null> {
  const { rows } = await pool.query<{ day: string | null }>(
    `SELECT to_char(COALESCE(
       (SELECT sealed_before FROM report_sealed WHERE site_id = $1),
       (SELECT (least(
          (SELECT min(created_at) FROM visits WHERE site_id = $1),
          (SELECT min(received_at) FROM conversions WHERE site_id = $1),
          (SELECT min(m.occurred_at) FROM memberships m JOIN channels c ON c.id = m.channel_id WHERE c.site_id = $1),
          (SELECT min(i.assigned_at) FROM invitations i JOIN channels c ON c.id = i.channel_id WHERE c.site_id = $1)
        ) AT TIME ZONE 'UTC')::date)
     ), 'YYYY-MM-DD') AS day`,
    [siteId],
  );
  return rows[0]!.day;
}

async function replaceDay(tx: PoolClient, siteId: string, day: string): Promise<void> {
  await tx.query('DELETE FROM report_rows WHERE site_id = $1 AND day = $2::date', [siteId, day]);
  await tx.query(
    `INSERT INTO report_rows (site_id, day, channel_id, utm_source, utm_campaign, platform, visits, invite_clicks, joins, attributed_joins,
       conversions, currency, value, leaves, join_day, lasted_days)
     SELECT $1, day, channel_id, utm_source, utm_campaign, platform, visits, invite_clicks, joins, attributed_joins,
       conversions, currency, value, leaves, join_day, lasted_days
     FROM report_compute($1, $2::date, $2::date)`,
    [siteId, day],
  );
}

/** Seals again the site's dirty days; the mark goes in the same transaction as the new rows. */
async function resealDirty(pool: Pool, siteId: string): Promise<number> {
  const { rows } = await pool.query<{ day: string }>(`SELECT to_char(day, 'YYYY-MM-DD') AS day FROM report_dirty WHERE site_id = $1 ORDER BY day`, [siteId]);
  for (const { day } of rows) {
    await withTx(pool, async (tx) => {
      const gone = await tx.query('DELETE FROM report_dirty WHERE site_id = $1 AND day = $2::date', [siteId, day]);
      if (gone.rowCount === 0) return;
      await replaceDay(tx, siteId, day);
    });
  }
  return rows.length;
}

function nextDate(day: string): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) + DAY_MS).toISOString().slice(0, 10);
}
