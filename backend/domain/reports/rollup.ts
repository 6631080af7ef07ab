import { withTx, type Pool, type PoolClient } from '../../db/pool.js';

/**
 * The reports' roll-up (docs/reports.md): each site's raw rows are folded into `report_rows` up
 * to a watermark (`report_sealed.folded_until`), so that a report reads a few rows per day however
 * long the history is, and the write paths (track/init above all) carry no counter.
 *
 * The watermark trails the clock by `FOLD_LAG_MS` and moves in steps of `FOLD_STEP_MS`: every row
 * dated before it has been committed by then (the write paths stamp rows with the time of their
 * own transaction, which lasts seconds). Past days are folded whole; the current day in parts,
 * each appended to the day's rows (every column is additive), and once the day is over its parts
 * are replaced by one count of the whole day, which keeps `report_rows` at a few rows per day and
 * group. With the job every 15 minutes, a report reads live between half an hour and an hour of
 * today, whatever the time of day.
 *
 * A row that still lands before the watermark (a value set days later, a Telegram update
 * delivered late) marks its day dirty (triggers of migrations 140 and 145, for rows dated more
 * than 10 minutes back); the report reads a dirty day live and the next run folds it again.
 */
export const FOLD_LAG_MS = 30 * 60_000;
export const FOLD_STEP_MS = 15 * 60_000;
const DAY_MS = 86_400_000;

export interface RollupOptions {
  /** Whole days folded per site per run at most; the next run goes on. */
  maxDays?: number;
  /** Stop starting sites after this instant (ms); the next run goes on. */
  until?: number;
}

export interface RollupResult {
  /** Whole days folded (past days, and the current day once it is over). */
  sealed: number;
  /** Parts of the current day folded. */
  parts: number;
  /** Dirty days counted again. */
  resealed: number;
}

/** How far the watermark may go at `now`: FOLD_LAG_MS back, down to a FOLD_STEP_MS boundary. */
export function foldLimit(now: Date): Date {
  return new Date(Math.floor((now.getTime() - FOLD_LAG_MS) / FOLD_STEP_MS) * FOLD_STEP_MS);
}

export async function runRollup(pool: Pool, now: Date, o: RollupOptions = {}): Promise<RollupResult> {
  const limit = foldLimit(now).getTime();
  const maxDays = o.maxDays ?? 62;
  const out: RollupResult = { sealed: 0, parts: 0, resealed: 0 };
  const { rows: sites } = await pool.query<{ id: string }>('SELECT id FROM sites ORDER BY id');
  for (const { id } of sites) {
    if (o.until !== undefined && Date.now() > o.until) break;
    out.resealed += await resealDirty(pool, id);
    const n = await foldSite(pool, id, limit, maxDays);
    out.sealed += n.days;
    out.parts += n.parts;
  }
  return out;
}

/** Moves the site's watermark up to `limit` (ms): whole days while it can, then a part of the day. */
async function foldSite(
  pool: Pool,
  siteId: string,
  limit: number,
  maxDays: number,
): Promise<{ days: number; parts: number }> {
  let w = await watermark(pool, siteId);
  const n = { days: 0, parts: 0 };
  while (w !== null && w < limit && n.days < maxDays) {
    const from = w;
    const dayStart = Math.floor(from / DAY_MS) * DAY_MS;
    const whole = dayStart + DAY_MS <= limit;
    const to = whole ? dayStart + DAY_MS : limit;
    const moved = await withTx(pool, async (tx) => {
      // The site's row serialises two runs (two worker processes): the second waits, then finds
      // the watermark moved and stops.
      await tx.query(
        'INSERT INTO report_sealed (site_id, folded_until) VALUES ($1, $2) ON CONFLICT (site_id) DO NOTHING',
        [siteId, new Date(from)],
      );
      const { rows } = await tx.query<{ ms: string }>(
        `SELECT (extract(epoch FROM folded_until) * 1000)::bigint AS ms FROM report_sealed WHERE site_id = $1 FOR UPDATE`,
        [siteId],
      );
      if (Number(rows[0]!.ms) !== from) return false;
      // A whole day replaces the parts of it folded so far; a part is appended to them.
      if (whole)
        await tx.query('DELETE FROM report_rows WHERE site_id = $1 AND day = $2::date', [
          siteId,
          isoDay(dayStart),
        ]);
      await insertRows(tx, siteId, whole ? dayStart : from, to);
      await tx.query('UPDATE report_sealed SET folded_until = $2 WHERE site_id = $1', [siteId, new Date(to)]);
      return true;
    });
    if (!moved) break;
    if (whole) n.days++;
    else n.parts++;
    w = to;
  }
  return n;
}

/** The site's watermark (ms), or the start of the day of its first row; null: no rows yet. */
async function watermark(pool: Pool, siteId: string): Promise<number | null> {
  const { rows } = await pool.query<{ ms: string | null }>(
    `SELECT (extract(epoch FROM COALESCE(
       (SELECT folded_until FROM report_sealed WHERE site_id = $1),
       (SELECT date_trunc('day', least(
          (SELECT min(created_at) FROM visits WHERE site_id = $1),
          (SELECT min(received_at) FROM conversions WHERE site_id = $1),
          (SELECT min(m.occurred_at) FROM memberships m JOIN channels c ON c.id = m.channel_id WHERE c.site_id = $1),
          (SELECT min(i.assigned_at) FROM invitations i JOIN channels c ON c.id = i.channel_id WHERE c.site_id = $1)
        ) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')
     )) * 1000)::bigint AS ms`,
    [siteId],
  );
  return rows[0]!.ms === null ? null : Number(rows[0]!.ms);
}

async function insertRows(tx: PoolClient, siteId: string, from: number, to: number): Promise<void> {
  await tx.query(
    `INSERT INTO report_rows (site_id, day, channel_id, utm_source, utm_campaign, platform, visits, invite_clicks, joins, attributed_joins,
       conversions, currency, value, leaves, join_day, lasted_days, campaign_key)
     SELECT $1, day, channel_id, utm_source, utm_campaign, platform, visits, invite_clicks, joins, attributed_joins,
       conversions, currency, value, leaves, join_day, lasted_days, campaign_key
     FROM report_compute_at($1, $2, $3)`,
    [siteId, new Date(from), new Date(to)],
  );
}

/**
 * Counts again the site's dirty days, up to the watermark (the current day may be folded only in
 * part); the mark goes in the same transaction as the new rows, under the site's row lock so that
 * no fold moves the watermark meanwhile.
 */
async function resealDirty(pool: Pool, siteId: string): Promise<number> {
  const { rows } = await pool.query<{ day: string }>(
    `SELECT to_char(day, 'YYYY-MM-DD') AS day FROM report_dirty WHERE site_id = $1 ORDER BY day`,
    [siteId],
  );
  for (const { day } of rows) {
    await withTx(pool, async (tx) => {
      const { rows: w } = await tx.query<{ ms: string }>(
        `SELECT (extract(epoch FROM folded_until) * 1000)::bigint AS ms FROM report_sealed WHERE site_id = $1 FOR UPDATE`,
        [siteId],
      );
      const gone = await tx.query('DELETE FROM report_dirty WHERE site_id = $1 AND day = $2::date', [
        siteId,
        day,
      ]);
      if (gone.rowCount === 0 || w.length === 0) return;
      const dayStart = Date.parse(`${day}T00:00:00Z`);
      await tx.query('DELETE FROM report_rows WHERE site_id = $1 AND day = $2::date', [siteId, day]);
      await insertRows(tx, siteId, dayStart, Math.min(dayStart + DAY_MS, Number(w[0]!.ms)));
    });
  }
  return rows.length;
}

function isoDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}
