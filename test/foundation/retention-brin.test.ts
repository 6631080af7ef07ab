// Migration 181: after retention frees room on old pages and VACUUM records it, new visits are
// written there. The retention walk's time windows must still read only the pages of their own
// time, not every old range that took a new row.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setClause, VISIT_RAW_FIELDS } from '../../backend/domain/erasure/fields.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

let db: TestDatabase;
let siteId: string;
beforeAll(async () => {
  db = await createTestDatabase(4);
  const {
    rows: [account],
  } = await db.pool.query<{ id: string }>(`INSERT INTO accounts (name) VALUES ('brin') RETURNING id`);
  const {
    rows: [site],
  } = await db.pool.query<{ id: string }>(
    `INSERT INTO sites (account_id, name, website_id, domains) VALUES ($1, 'B', 'ws_brin_multi', ARRAY['b.example.com']) RETURNING id`,
    [account!.id],
  );
  siteId = site!.id;
});
afterAll(async () => db.drop());

const OLD = 3_200;
const START = '2024-01-01T00:00:00Z';

/** Rows the plan read from the heap but dropped on rechecking the window (summed over its nodes). */
function recheckedAway(plan: Record<string, unknown>): number {
  const own =
    Number(plan['Rows Removed by Index Recheck'] ?? 0) + Number(plan['Rows Removed by Filter'] ?? 0);
  const kids = (plan.Plans as Record<string, unknown>[] | undefined) ?? [];
  return own + kids.reduce((n, k) => n + recheckedAway(k), 0);
}

describe('the time BRIN index after retention freed old pages', () => {
  it('a window of old rows reads its own ranges, not every old range new rows were written into', async () => {
    // A year-old stretch of visits, a minute apart, in time order as track/init writes them.
    await db.pool.query(
      `INSERT INTO visits (site_id, temp_id, session_id, href, landing_page, referrer, client_ip, user_agent, fbc, fbp, created_at, updated_at)
       SELECT $1, gen_random_uuid(), gen_random_uuid(), 'https://b.example.com/landing?fbclid=IwAR' || g || '&utm_source=fb',
              '/landing?fbclid=IwAR' || g, 'https://l.facebook.com/', '198.51.100.' || (g % 250),
              'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148', 'fb.1.1.IwAR' || g, 'fb.1.1.' || g,
              $2::timestamptz + g * interval '1 minute', $2::timestamptz + g * interval '1 minute'
         FROM generate_series(1, $3::int) g ORDER BY g`,
      [siteId, START, OLD],
    );
    // Retention clears the older half; VACUUM records the room that made.
    await db.pool.query(
      `UPDATE visits SET ${setClause(VISIT_RAW_FIELDS)} WHERE site_id = $1 AND created_at <= $2::timestamptz + $3::int * interval '1 minute'`,
      [siteId, START, OLD / 2],
    );
    await db.pool.query('VACUUM visits');
    const {
      rows: [before],
    } = await db.pool.query<{ pages: number }>(
      `SELECT max((ctid::text::point)[0])::int AS pages FROM visits WHERE site_id = $1`,
      [siteId],
    );
    // Today's visits: they go into the old pages' room.
    for (let i = 0; i < 600; i++) {
      await db.pool.query(
        `INSERT INTO visits (site_id, temp_id, session_id, href, client_ip, user_agent) VALUES ($1, $2, $3, 'https://b.example.com/', '203.0.113.9', 'Mozilla/5.0 Today')`,
        [siteId, randomUUID(), randomUUID()],
      );
    }
    const {
      rows: [placed],
    } = await db.pool.query<{ in_old: number }>(
      `SELECT count(*)::int AS in_old FROM visits WHERE site_id = $1 AND created_at > now() - interval '1 hour' AND (ctid::text::point)[0] <= $2`,
      [siteId, before!.pages],
    );
    expect(placed!.in_old).toBeGreaterThan(300); // the situation under test: new rows on old pages
    await db.pool.query(`SELECT brin_summarize_new_values('visits_created_brin'::regclass)`);

    // A window a little past the cleared half, as the walk's next batch reads it, along the index.
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL enable_seqscan = off');
      await client.query('SET LOCAL enable_indexscan = off');
      const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(
        `EXPLAIN (ANALYZE, FORMAT JSON)
         SELECT id FROM visits WHERE created_at >= $1::timestamptz AND created_at < $2::timestamptz`,
        [
          new Date(Date.parse(START) + (OLD / 2 + 200) * 60_000),
          new Date(Date.parse(START) + (OLD / 2 + 400) * 60_000),
        ],
      );
      const plan = rows[0]!['QUERY PLAN'][0].Plan;
      expect(JSON.stringify(plan)).toContain('visits_created_brin');
      expect(plan['Actual Rows']).toBe(200);
      // The window's rows lie in two ranges of 16 pages, and what else of those ranges is read is
      // less than two ranges' rows; with one interval per range, every old range that took a new
      // row matched too (measured: 1,360 rows read and dropped, against about 280 now).
      const { rows: size } = await client.query<{ per_page: number }>(
        `SELECT (count(*)::float8 / (max((ctid::text::point)[0]) + 1)) AS per_page FROM visits`,
      );
      expect(recheckedAway(plan)).toBeLessThan(2 * 16 * size[0]!.per_page);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });
});
