// One send per subject and pixel, enforced by unique indexes that leave out the NULL subject key
// (a send is a conversion's or a visit's, never both), so no index entry is written for it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMigrations, NO_TRANSACTION_MARKER } from '../../backend/db/migrate.js';
import { createSends } from '../../backend/domain/outbox/sends.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { createConversion, createSiteWith, deliveryHarness, type DeliveryHarness } from './support.js';

let db: TestDatabase;
let h: DeliveryHarness;

beforeAll(async () => {
  db = await createTestDatabase();
  h = await deliveryHarness(db.pool);
});
afterAll(async () => {
  await h.close();
  await db.drop();
});

describe("sends' subject keys", () => {
  it('are re-indexed without stopping the write path (concurrently, outside a transaction)', () => {
    const m = listMigrations().find((x) => x.version === 212)!;
    expect(m.sql.split('\n')[0]).toBe(NO_TRANSACTION_MARKER);
    expect(m.sql.match(/CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS/g)).toHaveLength(2);
  });

  it('are unique per pixel, indexed without NULLs', async () => {
    const { rows } = await db.pool.query<{ def: string }>(
      `SELECT pg_get_indexdef(indexrelid) AS def FROM pg_index WHERE indrelid = 'sends'::regclass AND indisunique AND NOT indisprimary ORDER BY 1`,
    );
    expect(rows.map((r) => r.def.replace(/^.* USING /, ''))).toEqual([
      'btree (conversion_id, pixel_id) WHERE (conversion_id IS NOT NULL)',
      'btree (visit_id, pixel_id) WHERE (visit_id IS NOT NULL)',
    ]);
  });

  it('a subject gets one send per pixel however often its sends are created; a second row is refused', async () => {
    const { siteId, pixels } = await createSiteWith(h.deps, ['meta', 'tiktok']);
    const { conversionId, sends } = await createConversion(db.pool, siteId);
    expect(sends).toHaveLength(2);
    expect(await createSends(db.pool, { kind: 'conversion', id: conversionId, siteId })).toEqual([]);
    await expect(
      db.pool.query(
        `INSERT INTO sends (conversion_id, pixel_id, platform, event_id) VALUES ($1, $2, 'meta', $3)`,
        [conversionId, pixels.meta, `cnv_${conversionId}`],
      ),
    ).rejects.toMatchObject({ code: '23505' });
    const { rows } = await db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM sends WHERE conversion_id = $1',
      [conversionId],
    );
    expect(rows[0]!.n).toBe(2);
  });
});
