// The connection pool's sessions: a transaction left idle (its process froze mid-transaction) is
// ended by PostgreSQL, so the locks it held are released rather than held until TCP notices.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createPool, type Pool } from '../../backend/db/pool.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

let db: TestDatabase;
const pools: Pool[] = [];

beforeAll(async () => {
  db = await createTestDatabase(2);
});
afterAll(async () => {
  for (const pool of pools) await pool.end();
  await db.drop();
});

describe('sessions of the pool', () => {
  it('have a one-minute limit on idling inside a transaction', async () => {
    const pool = createPool(db.url, 1);
    pools.push(pool);
    const { rows } = await pool.query<{ idle_in_transaction_session_timeout: string }>(
      'SHOW idle_in_transaction_session_timeout',
    );
    expect(rows[0]!.idle_in_transaction_session_timeout).toBe('1min');
  });

  it('lose a transaction left idle past the limit, and its locks with it', async () => {
    const pool = createPool(db.url, 1, { idleInTransactionMs: 300 });
    pools.push(pool);
    const frozen = await pool.connect();
    frozen.on('error', () => undefined);
    await frozen.query('BEGIN');
    await frozen.query('SELECT pg_advisory_xact_lock(4242, 1)');
    const taken = async () =>
      (await db.pool.query<{ got: boolean }>('SELECT pg_try_advisory_xact_lock(4242, 1) AS got')).rows[0]!
        .got;
    expect(await taken()).toBe(false);

    await new Promise((r) => setTimeout(r, 800));
    expect(await taken()).toBe(true);
    await expect(frozen.query('SELECT 1')).rejects.toThrow();
    frozen.release(true);
  });
});

describe('connections of the pool', () => {
  // A new backend costs a fork, its catalog caches' warm-up and a prepare of each statement: the
  // first clicks after a quiet spell paid 20–40 ms for it while idle connections were closed.
  it('stay open however long they sit idle, on the same backends', async () => {
    // Only timers are faked (the network is real): an hour passes for the pool's idle timer, if
    // releasing a connection set one.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const pool = createPool(db.url, 2);
      pools.push(pool);
      const pids = async () => {
        const clients = [await pool.connect(), await pool.connect()];
        const seen = await Promise.all(
          clients.map(
            async (c) => (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid,
          ),
        );
        for (const c of clients) c.release();
        return seen.sort();
      };
      const before = await pids();
      expect(pool.idleCount).toBe(2);
      vi.advanceTimersByTime(60 * 60_000);
      expect(pool.totalCount).toBe(2);
      expect(await pids()).toEqual(before);
    } finally {
      vi.useRealTimers();
    }
  });
});
