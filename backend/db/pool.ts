import pg from 'pg';
import { isServerReadOnly } from './unavailable.js';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;
/** Anything that can run a query: the pool, or a client inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

// int8 (bigint) columns hold Telegram ids, which fit in a double; counts too. Parse them as numbers.
pg.types.setTypeParser(20, (v) => Number(v));
// numeric holds money values: parse them as numbers (values are bounded by validation).
pg.types.setTypeParser(1700, (v) => Number(v));

/**
 * Every wait on the database is bounded (docs/operations.md#timeouts). node-postgres bounds none
 * by default (unlike libpq it sets no TCP keepalive and no read timeout), so a server whose network
 * went silent held a query, and the transaction slot or job around it, for as long as TCP took to
 * give up: hours.
 */
export interface PoolTimeouts {
  /** Opening a connection (TCP, TLS, authentication). */
  connectMs: number;
  /** PostgreSQL cancels a statement running longer (`statement_timeout`). */
  statementMs: number;
  /** PostgreSQL ends a statement's wait for a lock after this long (`lock_timeout`). */
  lockMs: number;
  /**
   * How long PostgreSQL lets a connection of ours sit idle inside a transaction before it ends
   * the session (`idle_in_transaction_session_timeout`). No transaction of ours waits on anything
   * but PostgreSQL (save the operator's `bot add`, which holds one open across a single
   * setWebhook call of at most 5 s), so only a process that froze or lost its network
   * mid-transaction ever reaches it; its locks (a lead's lock, an Idempotency-Key claimed in an
   * event's transaction) are then released after this long instead of whenever TCP notices.
   */
  idleInTransactionMs: number;
  /**
   * The client's own bound on a query's answer: a little longer than `statementMs`, so that a
   * server that answers cancels first (the connection stays usable), and this only ends waits on
   * a server that does not answer at all. The connection is then destroyed, never reused.
   */
  queryMs: number;
  /** Idle time before the first TCP keepalive probe on a connection. */
  keepAliveMs: number;
}

export const DEFAULT_STATEMENT_TIMEOUT_MS = 60_000;
export const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
/** Past the statement timeout, the time a server's cancel answer has to arrive over a slow link. */
const QUERY_TIMEOUT_MARGIN_MS = 5_000;

/** The defaults (docs/operations.md#timeouts says why each). */
export function poolTimeouts(
  over: Partial<Pick<PoolTimeouts, 'connectMs' | 'statementMs' | 'idleInTransactionMs'>> = {},
): PoolTimeouts {
  const statementMs = over.statementMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  return {
    connectMs: over.connectMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    statementMs,
    lockMs: Math.min(10_000, statementMs),
    idleInTransactionMs: over.idleInTransactionMs ?? IDLE_IN_TRANSACTION_TIMEOUT_MS,
    // 0 turns the statement timeout off (an operator's choice); the client's bound stays.
    queryMs: (statementMs === 0 ? DEFAULT_STATEMENT_TIMEOUT_MS : statementMs) + QUERY_TIMEOUT_MARGIN_MS,
    keepAliveMs: 10_000,
  };
}

export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000;

/** node-postgres's error when `query_timeout` ends a query (it carries no code). */
const QUERY_READ_TIMEOUT = 'Query read timeout';

/**
 * A client that drops its own connection when that connection cannot be trusted any more:
 *
 * - a query that timed out on the client's side was sent and never answered; node-postgres leaves
 *   it active, and every later query on the connection would queue behind it;
 * - the server answered that it is read-only (a standby: what a failover leaves behind an old
 *   connection): every later write on it would be refused the same way, while a new connection
 *   to the same address reaches the promoted primary.
 *
 * Marked unqueryable at once (before the caller's own error handling releases it), so that the
 * pool discards it on release instead of handing it out again; then its socket is destroyed.
 */
class DroppingClient extends pg.Client {
  // node-postgres's query has a dozen overloads; this passes every call through unchanged.
  override query(...args: unknown[]): never {
    const last = args.at(-1);
    const call = pg.Client.prototype.query as (...a: unknown[]) => unknown;
    if (typeof last === 'function') {
      args[args.length - 1] = (err: unknown, res: unknown) => {
        if (err) this.dropIfUntrusted(err);
        (last as (e: unknown, r: unknown) => void)(err, res);
      };
      return call.apply(this, args) as never;
    }
    const out = call.apply(this, args);
    if (out instanceof Promise) out.catch((err: unknown) => this.dropIfUntrusted(err));
    return out as never;
  }

  private dropIfUntrusted(err: unknown): void {
    const timedOut = err instanceof Error && err.message === QUERY_READ_TIMEOUT;
    if (!timedOut && !isServerReadOnly(err)) return;
    // pg-pool's own test for a client not to reuse (its release reads `_queryable`).
    (this as unknown as { _queryable: boolean })._queryable = false;
    const stream = (this as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream;
    stream?.destroy();
  }
}

export function createPool(
  connectionString: string,
  max = 10,
  timeouts: Partial<Pick<PoolTimeouts, 'connectMs' | 'statementMs' | 'idleInTransactionMs'>> = {},
): Pool {
  const t = poolTimeouts(timeouts);
  const pool = new pg.Pool({
    Client: DroppingClient,
    connectionString,
    max,
    // Connections once opened are kept, never closed for being idle (an idle one costs a
    // backend's memory, no CPU): a new backend pays a fork, its catalog caches' warm-up and a
    // prepare of every statement it runs, which made the first invite clicks after a quiet spell
    // take 20–40 ms in the database alone (docs/benchmarks.md). 0 turns pg-pool's idle timer off.
    idleTimeoutMillis: 0,
    connectionTimeoutMillis: t.connectMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: t.keepAliveMs,
    statement_timeout: t.statementMs,
    lock_timeout: t.lockMs,
    idle_in_transaction_session_timeout: t.idleInTransactionMs,
    query_timeout: t.queryMs,
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
