import pg from 'pg';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;
/** Anything that can run a query: the pool, or a client inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

// int8 (bigint) columns hold Telegram ids, which fit in a double; counts too. Parse them as numbers.
pg.types.setTypeParser(20, (v) => Number(v));
// numeric holds money values: parse them as numbers (values are bounded by validation).
pg.types.setTypeParser(1700, (v) => Number(v));

/**
 * How long PostgreSQL lets a connection of ours sit idle inside a transaction before it ends the
 * session. No transaction of ours waits on anything but PostgreSQL (save the operator's `bot add`,
 * which holds one open across a single setWebhook call of at most 5 s), so only a process that froze
 * or lost its network mid-transaction ever reaches it; then its locks (a lead's lock, an
 * Idempotency-Key claimed in an event's transaction) are released after this long instead of
 * whenever TCP notices, which can take hours.
 */
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000;

export function createPool(
  connectionString: string,
  max = 10,
  { idleInTransactionTimeoutMs = IDLE_IN_TRANSACTION_TIMEOUT_MS } = {},
): Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 10_000,
    idle_in_transaction_session_timeout: idleInTransactionTimeoutMs,
  });
  // An idle client losing its connection (database restart) must not crash the process.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/** Runs `fn` in a transaction; rolls back on any error. */
export async function withTx<T>(pool: Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const out = await fn(client);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
