// Migration 182: retention finds old rows along B-trees on their time. Whatever happened to the
// pages (rows cleared and VACUUM's room filled by new rows, the day's rows, a BRIN summary cut
// short), a batch reads its own rows and few others.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setClause, VISIT_RAW_FIELDS } from '../../backend/domain/erasure/fields.js';
import { batchSql, RETENTION_WALKS } from '../../backend/domain/erasure/retention.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

let db: TestDatabase;
let siteId: string;
beforeAll(async () => {
  db = await createTestDatabase(4);
  const {
    rows: [account],
  } = await db.pool.query<{ id: string }>(`INSERT INTO accounts (name) VALUES ('walk') RETURNING id`);
  const {
    rows: [site],
  } = await db.pool.query<{ id: string }>(
    `INSERT INTO sites (account_id, name, website_id, domains) VALUES ($1, 'W', 'ws_walk_index', ARRAY['w.example.com']) RETURNING id`,
    [account!.id],
  );
  siteId = site!.id;
});
afterAll(async () => db.drop());

const OLD = 3_200;
const START = '2024-01-01T00:00:00Z';
const BATCH = 100;

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

describe('the retention walk along its time index', () => {
  it('reads a batch of its own rows, after old rows were cleared, vacuumed, and new rows took their room', async () => {
    // A year-old stretch of visits, a minute apart, in time order as track/init writes them.
    await db.pool.query(
      `INSERT INTO visits (site_id, temp_id, session_id, href, landing_page, referrer, client_ip, user_agent, fbc, fbp, created_at, updated_at)
       SELECT $1, gen_random_uuid(), gen_random_uuid(), 'https://w.example.com/landing?fbclid=IwAR' || g || '&utm_source=fb',
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
        `INSERT INTO visits (site_id, temp_id, session_id, href, client_ip, user_agent) VALUES ($1, $2, $3, 'https://w.example.com/', '203.0.113.9', 'Mozilla/5.0 Today')`,
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
    await db.pool.query('ANALYZE visits');

    // The walk's next batch, from a little before the end of the cleared half (as after a
    // restart), with the walk's own statement, rolled back.
    const walk = RETENTION_WALKS.find((w) => w.target === 'visits')!;
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${batchSql(walk)}`,
        [
          new Date(Date.parse(START) + (OLD / 2 - 20) * 60_000),
          new Date(Date.parse(START) + (OLD + 1) * 60_000),
          BATCH,
          'visits',
        ],
      );
      const all = nodes(rows[0]!['QUERY PLAN'][0].Plan);
      const scan = all.find((n) => n['Index Name'] === walk.index);
      expect(scan, JSON.stringify(all.map((n) => n['Node Type']))).toBeDefined();
      // The batch's rows, and the 21 cleared ones before them it passes over: nothing else.
      expect(scan!['Actual Rows'] * scan!['Actual Loops']).toBe(BATCH);
      expect(scan!['Rows Removed by Filter']).toBe(21);
      // Reached by ctid, not by a join over the whole table.
      expect(all.some((n) => n['Node Type'] === 'Tid Scan')).toBe(true);
      expect(all.some((n) => n['Node Type'] === 'Seq Scan')).toBe(false);
      const cleared = all.find((n) => n['Node Type'] === 'ModifyTable');
      expect(cleared!['Actual Rows']).toBe(BATCH);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });

  it('has a B-tree on the time of every table it walks, and no BRIN left', async () => {
    const { rows } = await db.pool.query<{ name: string; am: string; def: string }>(
      `SELECT c.relname AS name, a.amname AS am, pg_get_indexdef(c.oid) AS def FROM pg_class c JOIN pg_am a ON a.oid = c.relam
        WHERE c.relkind = 'i' AND c.relnamespace = 'public'::regnamespace`,
    );
    for (const w of RETENTION_WALKS) {
      const index = rows.find((r) => r.name === w.index);
      expect(index?.am, w.index).toBe('btree');
      expect(index?.def).toContain(`ON public.${w.table} USING btree (${w.time})`);
    }
    expect(rows.filter((r) => r.am === 'brin')).toEqual([]);
  });
});
