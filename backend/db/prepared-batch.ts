import type { Pool, PoolClient } from './pool.js';

/**
 * Several statements in one round trip. On a loopback connection each query costs a socket write
 * and read on both sides, which on the hot paths outweighs the statements themselves; PostgreSQL's
 * simple protocol runs a multi-statement query string in one exchange (with its own snapshot per
 * statement, so a read after a lock in the same string sees what was committed before the lock was
 * granted). The simple protocol takes no parameters, so statements that would need them are SQL
 * `PREPARE`d once per connection (which keeps their plans) and run with `EXECUTE` and literal
 * values quoted by the driver.
 *
 * Behind a transaction-mode pooler (PgBouncer with `pool_mode = transaction`) a prepared statement
 * lives on one server connection, and the next transaction of the same client may run on another.
 * There (`runStatementsInline`) each call is written out in full instead, its parameters replaced
 * by literals cast to the very types PostgreSQL infers for them (learnt once per statement from a
 * `PREPARE` that is deallocated in the same round trip): the same statement, planned each time.
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

// Clients of pools that go through a transaction-mode pooler.
const inlineClients = new WeakSet<object>();

/**
 * Marks a pool as going through a transaction-mode pooler: its clients keep no prepared statements,
 * neither SQL ones (this file's batches) nor the protocol's named statements that node-postgres
 * makes for a query given a `name` (the hot paths' `name:` queries). Those run as the protocol's
 * unnamed statement instead, which lives for one query and so never outlives a transaction; the
 * driver offers no setting for it, so the clients' `query` drops the name.
 */
export function runStatementsInline(pool: Pool): void {
  pool.on('connect', (client) => {
    inlineClients.add(client);
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (config: unknown, ...rest: unknown[]) =>
      query(unnamed(config), ...rest);
  });
}

/** A query config without its statement name; anything else (text, a cursor or stream) as it is. */
function unnamed(config: unknown): unknown {
  if (config === null || typeof config !== 'object' || !('name' in config) || !('text' in config))
    return config;
  if (typeof (config as { submit?: unknown }).submit === 'function') return config;
  const { name: _name, ...rest } = config as Record<string, unknown>;
  return rest;
}

// Per statement name: the parameter types PostgreSQL infers (the same on every connection).
const inferredTypes = new Map<string, { sql: string; types: string[] }>();

export async function ensurePrepared(client: PoolClient, call: PreparedCall): Promise<void> {
  if (!NAME.test(call.name)) throw new Error('prepared batch: malformed statement name');
  if (inlineClients.has(client)) {
    if (inferredTypes.get(call.name)?.sql === call.sql) return;
    // One simple-protocol message: the pooler keeps it on one server connection, which it leaves
    // without the statement.
    const res = (await client.query(
      `PREPARE ${call.name} AS ${call.sql}; SELECT parameter_types::text[] AS types FROM pg_prepared_statements WHERE name = '${call.name}'; DEALLOCATE ${call.name}`,
    )) as unknown as { rows: { types: string[] }[] }[];
    inferredTypes.set(call.name, { sql: call.sql, types: res[1]!.rows[0]!.types });
    return;
  }
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

/** `EXECUTE name(literals…)` for a call prepared on this connection (`ensurePrepared`). */
export function execute(client: PoolClient, call: PreparedCall): string {
  const values = call.values.map((v) => literal(client, v));
  if (!inlineClients.has(client)) return `EXECUTE ${call.name}(${values.join(', ')})`;
  const types = inferredTypes.get(call.name)!.types;
  return substituteParameters(call.sql, (n) => {
    if (n < 1 || n > values.length) throw new Error(`prepared batch: ${call.name} has no value for $${n}`);
    return `(${values[n - 1]}::${types[n - 1]})`;
  });
}

/**
 * The statement with each `$n` outside quotes and comments replaced. A dollar-quoted string (which
 * our statements do not use) is refused rather than guessed at.
 */
export function substituteParameters(sql: string, value: (n: number) => string): string {
  let out = '';
  let i = 0;
  while (i < sql.length) {
    const ch = sql[i]!;
    if (ch === "'" || ch === '"') {
      const end = sql.indexOf(ch, i + 1);
      if (end < 0) throw new Error('prepared batch: unterminated quote');
      out += sql.slice(i, end + 1);
      i = end + 1;
    } else if (ch === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      const stop = end < 0 ? sql.length : end;
      out += sql.slice(i, stop);
      i = stop;
    } else if (ch === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      if (end < 0) throw new Error('prepared batch: unterminated comment');
      out += sql.slice(i, end + 2);
      i = end + 2;
    } else if (ch === '$') {
      const m = /^\$(\d+)/.exec(sql.slice(i, i + 12));
      if (!m) throw new Error('prepared batch: dollar quoting cannot be inlined');
      out += value(Number(m[1]));
      i += m[0].length;
    } else {
      out += ch;
      i++;
    }
  }
  return out;
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

/**
 * `calls` as one transaction in one round trip: `BEGIN`, each call in turn, `COMMIT`; the rows of
 * each call. With `genericPlans`, PostgreSQL runs them on the plan it made once for the
 * connection's prepared statement instead of planning each execution for its values (its default
 * when a value-specific plan looks cheaper), for statements whose shape leaves the planner no
 * choice worth making per call: on the delivery statements planning cost as much as running.
 * A failure rolls the whole transaction back (`withSession`).
 */
export async function runTransaction(
  pool: Pool,
  calls: readonly PreparedCall[],
  { genericPlans = false } = {},
): Promise<unknown[][]> {
  return withSession(pool, async (client) => {
    for (const call of calls) await ensurePrepared(client, call);
    const head = genericPlans ? ['BEGIN', 'SET LOCAL plan_cache_mode = force_generic_plan'] : ['BEGIN'];
    const sql = [...head, ...calls.map((call) => execute(client, call)), 'COMMIT'].join('; ');
    const results = (await client.query(sql)) as unknown as { rows: unknown[] }[];
    return calls.map((_, i) => results[head.length + i]!.rows);
  });
}
