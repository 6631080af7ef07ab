// Claiming a send is a heap-only (HOT) update: it changes no column any index of `sends` reads, so
// PostgreSQL writes the new row version beside the old one and not one index entry. The queue's
// order is `queue_at`, which only joining the queue moves (creation, a retry, an operator's retry);
// the lease lives in `next_attempt_at`, which no index reads.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimBatch, duePixels } from '../../backend/delivery/claim.js';
import { writeOutcomes } from '../../backend/delivery/outcomes.js';
import { createPool, type Pool } from '../../backend/db/pool.js';
import { claimSendsSql } from '../../backend/domain/outbox/sends.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import {
  createConversion,
  createSiteWith,
  deliveryHarness,
  type DeliveryHarness,
  waitUntil,
} from './support.js';

let db: TestDatabase;
let h: DeliveryHarness;
// One connection, so that the claim's statistics are flushed by a call on the same backend.
let claimPool: Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  h = await deliveryHarness(db.pool);
  claimPool = createPool(db.url, 1);
});
afterAll(async () => {
  await claimPool.end();
  await h.close();
  await db.drop();
});

/** The columns an index of `sends` reads: its keys, and those its predicate or expressions name. */
async function indexedColumns(): Promise<Map<string, string[]>> {
  const { rows } = await db.pool.query<{ name: string; def: string }>(
    `SELECT i.relname AS name, pg_get_indexdef(x.indexrelid) AS def
       FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = 'sends'::regclass`,
  );
  const { rows: columns } = await db.pool.query<{ attname: string }>(
    `SELECT attname FROM pg_attribute WHERE attrelid = 'sends'::regclass AND attnum > 0 AND NOT attisdropped`,
  );
  return new Map(
    rows.map((r) => [
      r.name,
      columns
        .map((c) => c.attname)
        .filter((c) => new RegExp(`\\b${c}\\b`).test(r.def.replace(/^.*? ON /, ''))),
    ]),
  );
}

async function updates(): Promise<{ all: number; hot: number }> {
  const { rows } = await db.pool.query<{ all: string; hot: string }>(
    `SELECT n_tup_upd AS all, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relid = 'sends'::regclass`,
  );
  return { all: Number(rows[0]!.all), hot: Number(rows[0]!.hot) };
}

describe('claiming sends', () => {
  it('sets no column that an index of sends reads', async () => {
    const set = /UPDATE sends SET (.*)\n/.exec(claimSendsSql(() => 'SELECT 1'))![1]!;
    const claimed = [...set.matchAll(/(\w+) = /g)].map((m) => m[1]!);
    expect(claimed).toEqual(['attempts', 'next_attempt_at', 'in_flight', 'updated_at']);
    const indexes = await indexedColumns();
    expect(indexes.get('sends_queue')).toEqual(['pixel_id', 'status', 'queue_at']);
    for (const [name, columns] of indexes)
      expect({ name, both: columns.filter((c) => claimed.includes(c)) }).toEqual({ name, both: [] });
  });

  it('is written as heap-only updates; a leased send is not due until its lease ends, and a retry moves its place in the queue', async () => {
    const { siteId, pixels } = await createSiteWith(h.deps, ['meta']);
    const sends = 12;
    for (let i = 0; i < sends; i++) await createConversion(db.pool, siteId);

    const before = await updates();
    const claim = await claimBatch(claimPool, pixels.meta!, 100, 60_000);
    expect(claim?.sends.length).toBe(sends);
    await claimPool.query('SELECT pg_stat_force_next_flush()');
    const after = await waitUntil(
      async () => {
        const u = await updates();
        return u.all - before.all >= sends && u;
      },
      5000,
      'the claim in the statistics',
    );
    expect({ all: after.all - before.all, hot: after.hot - before.hot }).toEqual({ all: sends, hot: sends });

    // Their places in the queue have passed, their lease has not: nothing is due.
    expect(await claimBatch(db.pool, pixels.meta!, 100, 60_000)).toBeNull();
    expect(await duePixels(db.pool)).toEqual([]);

    // A retry joins the queue again at its next attempt; a send whose lease ran out is due again.
    const [retried, ...rest] = claim!.sends;
    await writeOutcomes(
      { pool: db.pool, metrics: h.deps.metrics },
      {
        claim: claim!,
        platform: 'meta',
        outcomes: [{ sendId: retried!.id, kind: 'retry', error: 'HTTP 500', delayMs: 60_000 }],
        conversionOf: new Map(),
      },
    );
    const { rows } = await db.pool.query<{ same: boolean; later: boolean }>(
      `SELECT queue_at = next_attempt_at AS same, queue_at > now() + interval '50 seconds' AS later FROM sends WHERE id = $1`,
      [retried!.id],
    );
    expect(rows[0]).toEqual({ same: true, later: true });
    await db.pool.query(
      `UPDATE sends SET next_attempt_at = now() - interval '1 second' WHERE id = ANY($1::uuid[])`,
      [rest.map((s) => s.id)],
    );
    expect(await duePixels(db.pool)).toEqual([{ pixelId: pixels.meta, platform: 'meta' }]);
    const again = await claimBatch(db.pool, pixels.meta!, 100, 60_000);
    expect(new Set(again?.sends.map((s) => s.id))).toEqual(new Set(rest.map((s) => s.id)));
    expect(again?.sends.every((s) => s.attempts === 2)).toBe(true);
  });
});
