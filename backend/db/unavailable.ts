/**
 * Telling "the database is not there right now" from a bug. The HTTP layer answers the first with
 * 503 UNAVAILABLE instead of 500; delivery waits it out before giving up a platform's answer.
 */

/**
 * SQLSTATE classes and codes that mean the server is not there (or not for us) right now:
 * 08 connection exceptions, 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now
 * (starting up, shutting down, in recovery), 57P04 database_dropped, 57P05 idle_session_timeout,
 * 53 insufficient resources (too many connections, out of memory or disk), 25006
 * read_only_sql_transaction (the server became a standby: a failover), 57014 query_canceled (our
 * statement_timeout) and 55P03 lock_not_available (our lock_timeout): a wait the pool bounds
 * (db/pool.ts) ran out, which says the database is too busy or stuck now, not that the request
 * was wrong.
 */
const PG_UNAVAILABLE = /^(08|57P0|53|25006$|57014$|55P03$)/;

/**
 * A server that answers but cannot write: a hot standby, or a primary demoted by a failover.
 * 25006 is what a write gets on a standby; a few answers about recovery carry other codes
 * (55000 "recovery is in progress", the messages of a server in recovery) and are recognised by
 * their text.
 */
const READ_ONLY_MESSAGES =
  /(cannot execute \S+(?: \S+)? in a read-only transaction|recovery is in progress|the database system is in recovery mode|cannot be executed during recovery)/i;

/** True when the server answered that it is read-only now (a standby): see `db/pool.ts`, which then drops the connection. */
export function isServerReadOnly(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; message?: unknown };
  if (e.code === '25006') return true;
  return typeof e.message === 'string' && typeof e.code === 'string' && READ_ONLY_MESSAGES.test(e.message);
}

/** Socket errors of a connection to the database (Node's own codes). */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * node-postgres's own messages when a connection breaks or cannot be made, which carry no code:
 * a client that already saw its connection fail ("…encountered a connection error and is not
 * queryable"), one the server closed ("Connection terminated unexpectedly", "…due to connection
 * timeout"), a pool that could not connect in time, a query the client's own timeout ended (a
 * server that went silent), a pool being shut down by our own shutdown.
 */
const PG_CONNECTION_MESSAGES =
  /(timeout exceeded when trying to connect|Query read timeout|Connection terminated|encountered a connection error and is not queryable|Client was closed and is not queryable|pool (?:after calling end|is ending)|Cannot use a pool after calling end)/i;

/** True for errors that mean "the database is not there right now", not a bug. */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (typeof err !== 'object' || err === null || depth > 3) return false;
  const e = err as { code?: unknown; message?: unknown; errors?: unknown; cause?: unknown };
  if (typeof e.code === 'string' && (PG_UNAVAILABLE.test(e.code) || SOCKET_CODES.has(e.code))) return true;
  if (isServerReadOnly(err)) return true;
  if (typeof e.message === 'string' && PG_CONNECTION_MESSAGES.test(e.message)) return true;
  // Connecting to a name with several addresses fails with an AggregateError of each attempt's error.
  if (
    Array.isArray(e.errors) &&
    e.errors.length > 0 &&
    e.errors.every((x) => isDatabaseUnavailable(x, depth + 1))
  )
    return true;
  return e.cause !== undefined && isDatabaseUnavailable(e.cause, depth + 1);
}

/**
 * Runs `fn`, and again with backoff (100 ms doubling to 2 s) for as long as it fails because the
 * database is away, up to `patienceMs`; any other error, or the last one, is thrown. Only for
 * work that is safe to repeat after an unknown outcome (a COMMIT whose answer was lost).
 */
export async function whileDatabaseAway<T>(
  fn: () => Promise<T>,
  patienceMs: number,
  onRetry: (err: unknown) => void = () => undefined,
): Promise<T> {
  const deadline = Date.now() + patienceMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const wait = Math.min(2_000, 100 * 2 ** attempt);
      if (!isDatabaseUnavailable(err) || Date.now() + wait > deadline) throw err;
      onRetry(err);
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}
