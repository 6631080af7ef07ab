import type { Pool } from '../../backend/db/pool.js';

/** A site and one spend source of `platform` on it; the credentials column holds a placeholder (the importers are given them unsealed). */
export async function insertSpendSource(pool: Pool, platform: string, accountRef: string): Promise<string> {
  const { rows } = await pool.query<{ id: string }>(
    `WITH a AS (INSERT INTO accounts (name) VALUES ($1) RETURNING id),
          s AS (INSERT INTO sites (account_id, website_id, name, domains)
                SELECT id, 'w-' || $1, $1, ARRAY[$1 || '.example'] FROM a RETURNING id)
     INSERT INTO spend_sources (site_id, platform, account_ref, credentials)
     SELECT id, $1, $2, 'v1.a.b.c' FROM s RETURNING id`,
    [platform, accountRef],
  );
  return rows[0]!.id;
}

export async function spendTotals(
  pool: Pool,
  sourceId: string,
): Promise<{ n: number; spend: number; clicks: number; first: string; last: string }> {
  const { rows } = await pool.query(
    `SELECT count(*)::int AS n, sum(spend)::float8 AS spend, sum(clicks)::int AS clicks,
            min(day)::text AS first, max(day)::text AS last
     FROM spend_daily WHERE source_id = $1`,
    [sourceId],
  );
  return rows[0];
}

/** Reads `read()` every 50 ms until `ok` holds or `ms` have passed; returns the last reading. */
export async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, ms = 6000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (ok(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
}
