// Which errors mean "the database is not there right now" (503 UNAVAILABLE) rather than a bug
// (500): the errors node-postgres really raises when a server goes away, is refused, hangs or
// kills our session, then a table of SQLSTATE and socket codes.
import net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDatabaseUnavailable, toApiError } from '../../backend/http/errors.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

let db: TestDatabase;
const servers: net.Server[] = [];

beforeAll(async () => {
  db = await createTestDatabase(2);
});
afterAll(async () => {
  for (const s of servers) s.close();
  await db.drop();
});

/** A TCP server on loopback that does `onSocket` with every connection; its port. */
async function tcp(onSocket: (s: net.Socket) => void): Promise<number> {
  const server = net.createServer(onSocket);
  servers.push(server);
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return (server.address() as net.AddressInfo).port;
}

async function caught(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a failure');
}

function expectUnavailable(err: unknown) {
  expect(isDatabaseUnavailable(err), String(err)).toBe(true);
  const { apiError, unexpected } = toApiError(err);
  expect(apiError.status).toBe(503);
  expect(apiError.code).toBe('UNAVAILABLE');
  expect(unexpected).toBe(false);
}

describe('errors node-postgres raises when the server is away', () => {
  it('connection refused', async () => {
    const port = await tcp((s) => s.destroy());
    await new Promise<void>((ok) => servers.pop()!.close(() => ok())); // nothing listens there now
    const client = new pg.Client({ host: '127.0.0.1', port, user: 'x', database: 'x' });
    client.on('error', () => undefined);
    const refused = await caught(client.connect());
    expect((refused as { code?: string }).code).toBe('ECONNREFUSED');
    expectUnavailable(refused);
  });

  it('a server that closes the connection: "Connection terminated unexpectedly"', async () => {
    const port = await tcp((s) => s.once('data', () => s.destroy()));
    const client = new pg.Client({ host: '127.0.0.1', port, user: 'x', database: 'x' });
    client.on('error', () => undefined);
    const err = await caught(client.connect());
    // A close that arrives while the client is still writing is a reset instead (seen on a busy
    // machine): the same event, the other of the two messages node-postgres raises for it.
    expect(String(err)).toMatch(/Connection terminated unexpectedly|read ECONNRESET/);
    expectUnavailable(err);
  });

  it('a server that never answers: a connection timeout', async () => {
    const port = await tcp(() => undefined);
    const pool = new pg.Pool({
      host: '127.0.0.1',
      port,
      user: 'x',
      database: 'x',
      connectionTimeoutMillis: 200,
    });
    const err = await caught(pool.query('SELECT 1'));
    expect(String(err)).toMatch(/timeout/);
    expectUnavailable(err);
    await pool.end();
  });

  it('our session terminated by the server (57P01 admin_shutdown, as a restart does), then the client queried again', async () => {
    const victim = new pg.Client({ connectionString: db.url });
    victim.on('error', () => undefined);
    await victim.connect();
    const pid = (await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const running = caught(victim.query('SELECT pg_sleep(5)'));
    await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    const err = await running;
    expect((err as { code?: string }).code).toBe('57P01');
    expectUnavailable(err);
    const again = await caught(victim.query('SELECT 1'));
    // Which of the two depends on whether the client has seen its connection end yet: "Client has
    // encountered a connection error and is not queryable" (what the restart test met in the
    // web tier) or "Connection terminated unexpectedly".
    expect(String(again)).toMatch(/is not queryable|Connection terminated unexpectedly/);
    expectUnavailable(again);
  });
});

describe('the table', () => {
  const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });
  it.each([
    ['57P01 admin_shutdown', withCode('57P01')],
    ['57P02 crash_shutdown', withCode('57P02')],
    ['57P03 cannot_connect_now (starting up)', withCode('57P03', 'the database system is starting up')],
    ['08000 connection_exception', withCode('08000')],
    ['08003 connection_does_not_exist', withCode('08003')],
    ['08006 connection_failure', withCode('08006')],
    ['08001 unable to establish', withCode('08001')],
    ['08P01 protocol_violation', withCode('08P01')],
    ['53300 too_many_connections', withCode('53300')],
    ['ECONNREFUSED', withCode('ECONNREFUSED')],
    ['ECONNRESET', withCode('ECONNRESET')],
    ['EPIPE', withCode('EPIPE')],
    ['ETIMEDOUT', withCode('ETIMEDOUT')],
    ['EHOSTUNREACH', withCode('EHOSTUNREACH')],
    ['ENOTFOUND (DNS)', withCode('ENOTFOUND')],
    ['Connection terminated unexpectedly', new Error('Connection terminated unexpectedly')],
    [
      'Connection terminated due to connection timeout',
      new Error('Connection terminated due to connection timeout'),
    ],
    ['pool connect timeout', new Error('timeout exceeded when trying to connect')],
    ['not queryable', new Error('Client has encountered a connection error and is not queryable')],
    ['closed client', new Error('Client was closed and is not queryable')],
    ['pool ended', new Error('Cannot use a pool after calling end on the pool')],
    [
      'AggregateError of refused attempts',
      Object.assign(new AggregateError([withCode('ECONNREFUSED'), withCode('ECONNREFUSED')], ''), {
        code: undefined,
      }),
    ],
    ['wrapped in a cause', new Error('query failed', { cause: withCode('57P01') })],
  ])('%s → 503 UNAVAILABLE', (_name, err) => expectUnavailable(err));

  it.each([
    ['23505 unique_violation', withCode('23505')],
    ['40P01 deadlock', withCode('40P01')],
    ['42P01 undefined_table', withCode('42P01')],
    ['a plain bug', new TypeError("Cannot read properties of undefined (reading 'id')")],
    [
      'AggregateError with one real bug in it',
      new AggregateError([withCode('ECONNREFUSED'), new Error('boom')], ''),
    ],
    ['null', null],
    ['a string', 'ECONNREFUSED'],
  ])('%s is not "unavailable"', (_name, err) => {
    expect(isDatabaseUnavailable(err)).toBe(false);
  });
});
