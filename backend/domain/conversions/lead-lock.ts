import type { Pool, PoolClient } from '../../db/pool.js';

/**
 * Business events for one Telegram user of one account run one at a time: their transaction starts
 * with an advisory lock, so concurrent duplicates see each other (the second waits, then finds the
 * first's conversion and reuses it). Per account rather than per site because the site may only
 * be known from the user's history, which is read under the lock.
 *
 * BEGIN and the lock travel in one round trip. That needs the simple query protocol, which takes
 * no parameters, so both values are checked before they are written into the statement.
 */
const LEAD_LOCK_CLASS = 4_040_001; // the two-int lock space never collides with single-bigint locks
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export async function withLeadLock<T>(pool: Pool, accountId: string, telegramUserId: number, fn: (tx: PoolClient) => Promise<T>): Promise<T> {
  if (!UUID.test(accountId) || !Number.isSafeInteger(telegramUserId)) throw new Error('withLeadLock: malformed lock key');
  const client = await pool.connect();
  try {
    await client.query(`BEGIN; SELECT pg_advisory_xact_lock(${LEAD_LOCK_CLASS}, hashtext('${accountId}:${telegramUserId}'))`);
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
