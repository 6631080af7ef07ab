import type { Pool, PoolClient } from '../../db/pool.js';

/**
 * Business events for one Telegram user of one account run one at a time: their transaction starts
 * with an advisory lock, so concurrent duplicates see each other (the second waits, then finds the
 * first's conversion and reuses it). Per account rather than per site because the site may only
 * be known from the user's history, which is read under the lock.
 *
 * Round trips are what an event costs, so the transaction takes as few as it can. BEGIN, the lock
 * and the first read under it travel together: a multi-statement simple query, in which each
 * statement takes its own snapshot, so the read sees everything committed before the lock was
 * granted. The last write may likewise travel with the COMMIT. The simple protocol takes no
 * parameters, so these statements are prepared once per connection (SQL `PREPARE`, which keeps
 * their plans) and executed with literal values quoted by the driver; the lock key is checked
 * before it is written into the text.
 */
const LEAD_LOCK_CLASS = 4_040_001; // the two-int lock space never collides with single-bigint locks
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const NAME = /^[a-z_][a-z0-9_]*$/;

/** A statement with `$n` parameters (types inferred as for a parameterised query) and their values. */
export interface PreparedCall {
  name: string;
  sql: string;
  values: readonly unknown[];
}

/** What the work under the lock ends with: its result, or a last write sent with the COMMIT and the result read from its rows. */
export type LockedFinish<T> = { result: T } | { last: PreparedCall; result: (rows: never[]) => T };

// Per connection: the statements it has prepared. A connection that is closed takes its entry along.
const preparedOn = new WeakMap<PoolClient, Set<string>>();

async function ensurePrepared(client: PoolClient, call: PreparedCall): Promise<void> {
  if (!NAME.test(call.name)) throw new Error('withLeadLock: malformed statement name');
  let names = preparedOn.get(client);
  if (names === undefined) preparedOn.set(client, (names = new Set()));
  if (names.has(call.name)) return;
  await client.query(`PREPARE ${call.name} AS ${call.sql}`);
  names.add(call.name);
}

/** A value as the driver would send it (objects as JSON), written as a quoted literal. */
function literal(client: PoolClient, v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'boolean') return v ? 'TRUE' : 'FALSE';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error('withLeadLock: non-finite number');
    return client.escapeLiteral(String(v));
  }
  if (typeof v === 'string') return client.escapeLiteral(v);
  if (v instanceof Date) return client.escapeLiteral(v.toISOString());
  return client.escapeLiteral(JSON.stringify(v));
}

function execute(client: PoolClient, call: PreparedCall): string {
  return `EXECUTE ${call.name}(${call.values.map((v) => literal(client, v)).join(', ')})`;
}

export async function withLeadLock<T, R>(
  pool: Pool,
  accountId: string,
  telegramUserId: number,
  read: PreparedCall,
  fn: (tx: PoolClient, rows: R[]) => Promise<LockedFinish<T>>,
): Promise<T> {
  if (!UUID.test(accountId) || !Number.isSafeInteger(telegramUserId)) throw new Error('withLeadLock: malformed lock key');
  const client = await pool.connect();
  try {
    await ensurePrepared(client, read);
    const opened = (await client.query(
      `BEGIN; SELECT pg_advisory_xact_lock(${LEAD_LOCK_CLASS}, hashtext('${accountId}:${telegramUserId}')); ${execute(client, read)}`,
    )) as unknown as { rows: R[] }[];
    const finish = await fn(client, opened[2]!.rows);
    if (!('last' in finish)) {
      await client.query('COMMIT');
      return finish.result;
    }
    await ensurePrepared(client, finish.last);
    const closed = (await client.query(`${execute(client, finish.last)}; COMMIT`)) as unknown as { rows: never[] }[];
    return finish.result(closed[0]!.rows);
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
