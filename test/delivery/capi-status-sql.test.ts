// capiStatus is decided twice: in TypeScript (`capiStatusOf`, for the writers that read a
// conversion's sends) and as SQL (`capiStatusAggregateSql`, inside the delivery outcome statement).
// Both, over every combination of up to three send statuses, give the same answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capiStatusOf, type SendStatus } from '../../backend/domain/outbox/capi-status.js';
import { capiStatusAggregateSql } from '../../backend/domain/outbox/sends.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

const STATUSES: SendStatus[] = ['pending', 'sent', 'failed', 'skipped'];

function combinations(max: number): SendStatus[][] {
  const out: SendStatus[][] = [];
  const grow = (prefix: SendStatus[]) => {
    if (prefix.length > 0) out.push(prefix);
    if (prefix.length < max) for (const s of STATUSES) grow([...prefix, s]);
  };
  grow([]);
  return out;
}

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase(2);
});
afterAll(async () => {
  await db.drop();
});

describe('capiStatus in SQL', () => {
  it('agrees with capiStatusOf for every combination of up to three sends', async () => {
    const groups = combinations(3);
    const { rows } = await db.pool.query<{ n: number; status: string }>(
      `SELECT g.n, ${capiStatusAggregateSql('g.status')} AS status
       FROM jsonb_to_recordset($1::jsonb) AS g(n int, status text) GROUP BY g.n ORDER BY g.n`,
      [JSON.stringify(groups.flatMap((statuses, n) => statuses.map((status) => ({ n, status }))))],
    );
    expect(rows).toHaveLength(groups.length);
    for (const r of rows) expect([groups[r.n], r.status]).toEqual([groups[r.n], capiStatusOf(groups[r.n]!)]);
  });
});
