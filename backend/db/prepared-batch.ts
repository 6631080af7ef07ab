import type { Pool, PoolClient } from './pool.js';

/**
 * Several statements in one round trip. On a loopback connection each query costs a socket write
 * and read on both sides, which on the hot paths outweighs the statements themselves; PostgreSQL's
 * simple protocol runs a multi-statement query string in one exchange (with its own snapshot per
 * statement, so a read after a lock in the same string sees what was committed before the lock was
 * granted). The simple protocol takes no parameters, so statements that would need them are SQL
 * `PREPARE`d once per connection (which keeps their plans) and run with `EXECUTE` and literal
 * values quoted by the driver.
 */

/** A statement with `$n` parameters (types inferred as for a parameterised query) and their values. */
export interface PreparedCall {
  name: string;
  sql: string;
  values: readonly unknown[];
}

const NAME = /^[a-z_][a-z0-9_]*$/;

// Per connection: the statements it has prepared. A connection that is closed takes its entry along.
const preparedOn = new WeakMap<PoolClient, Set<string>>();

export async function ensurePrepared(client: PoolClient, call: PreparedCall): Promise<void> {
  if (!NAME.test(call.name)) throw new Error('prepared batch: malformed statement name');
  let names = preparedOn.get(client);
  if (names === undefined) preparedOn.set(client, (names = new Set()));
  if (names.has(call.name)) return;
  await client.query(`PREPARE ${call.name} AS ${call.sql}`);
  names.add(call.name);
}

/** A value as the driver would send it (objects as JSON), written as a quoted literal. */
export function literal(client: PoolClient, v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'boolean') return v ? 'TRUE' : 'FALSE';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error('prepared batch: non-finite number');
    return client.escapeLiteral(String(v));
  }
  if (typeof v === 'string') return client.escapeLiteral(v);
  if (v instanceof Date) return client.escapeLiteral(v.toISOString());
  return client.escapeLiteral(JSON.stringify(v));
}

/** `EXECUTE name(literals…)` for a call prepared on this connection. */
export function execute(client: PoolClient, call: PreparedCall): string {
  return `EXECUTE ${call.name}(${call.values.map((v) => literal(client, v)).join(', ')})`;
}

/**
 * A connection for a transaction that the caller opens and closes in its own query strings
 * (`BEGIN; …` and `…; COMMIT`): on any error it is rolled back before the connection goes back
 * to the pool.
 */
export async function withSession<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    return await fn(client);
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
