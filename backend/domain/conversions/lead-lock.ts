import type { Pool, PoolClient } from '../../db/pool.js';

/**
 * Business events for one Telegram user of one account run one at a time: their transaction starts
 * with an advisory lock, so concurrent duplicates see each other (the second waits, then finds the
 * first's conversion and reuses it). Per account rather than per site because the site may only
 * be known from the user's history, which is read under the lock.
 *
 * BEGIN, the lock and the first read under it travel in one round trip: a multi-statement simple
 * query, in which each statement takes its own snapshot, so the read sees everything committed
 * before the lock was granted. The simple protocol takes no parameters, so the read is a statement
 * prepared once per connection (SQL `PREPARE`, keeping its plan) and executed with literal values:
 * the lock key is checked before it is written into the text, the values are quoted by the driver.
 */
const LEAD_LOCK_CLASS = 4_040_001; // the two-int lock space never collides with single-bigint locks
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const NAME = /^[a-z_][a-z0-9_]*$/;

export type LiteralValue = string | number | boolean | Date | null;

/** The read that runs under the lock: its SQL with typed `$n` parameters, and their values. */
export interface LockedRead {
  name: string;
  types: readonly string[];
  sql: string;
  values: readonly LiteralValue[];
}

// Per connection: which reads it has prepared. A connection that is closed takes its entry along.
const preparedOn = new WeakMap<PoolClient, Set<string>>();

async function ensurePrepared(client: PoolClient, read: LockedRead): Promise<void> {
  let names = preparedOn.get(client);
  if (names === undefined) preparedOn.set(client, (names = new Set()));
  if (names.has(read.name)) return;
  await client.query(`PREPARE ${read.name} (${read.types.join(', ')}) AS ${read.sql}`);
  names.add(read.name);
}

function literal(client: PoolClient, v: LiteralValue): string {
  if (v === null) return 'NULL';
  if (typeof v === 'boolean') return v ? 'TRUE' : 'FALSE';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error('withLeadLock: non-finite number');
    return client.escapeLiteral(String(v));
  }
  return client.escapeLiteral(v instanceof Date ? v.toISOString() : v);
}

export async function withLeadLock<T, R>(
  pool: Pool,
  accountId: string,
  telegramUserId: number,
  read: LockedRead,
  fn: (tx: PoolClient, rows: R[]) => Promise<T>,
): Promise<T> {
  if (!UUID.test(accountId) || !Number.isSafeInteger(telegramUserId)) throw new Error('withLeadLock: malformed lock key');
  if (!NAME.test(read.name) || read.values.length !== read.types.length) throw new Error('withLeadLock: malformed read');
  const client = await pool.connect();
  try {
    await ensurePrepared(client, read);
    const args = read.values.map((v) => literal(client, v)).join(', ');
    const results = (await client.query(
      `BEGIN; SELECT pg_advisory_xact_lock(${LEAD_LOCK_CLASS}, hashtext('${accountId}:${telegramUserId}')); EXECUTE ${read.name}(${args})`,
    )) as unknown as { rows: R[] }[];
    const out = await fn(client, results[2]!.rows);
    await client.query('COMMIT');
    return out;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
