// A server that became read-only under Capigram's connections (a failover leaves the old primary a
// standby, or the address now reaches one): a write it refuses (SQLSTATE 25006) is answered 503
// UNAVAILABLE, never 500, and the connection is dropped from the pool, not handed out again; once
// the address reaches a writable server, the next request gets a new connection and 2xx.
//
// The pool here has one connection, made read-only from inside its own session
// (`SET SESSION CHARACTERISTICS`, which nothing outside a session can do) and the database made
// read-only for new sessions (`ALTER DATABASE … SET default_transaction_read_only`), which is what
// a hot standby answers to writes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox } from '../../backend/crypto/secret-box.js';
import { createPool, type Pool } from '../../backend/db/pool.js';
import { isDatabaseUnavailable, isServerReadOnly } from '../../backend/db/unavailable.js';
import { startTestApp, TEST_SECRET_KEY, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { attributedJoin, newUser, seedTenant, type Tenant } from '../api/support.js';

let db: TestDatabase;
let pool: Pool;
let app: TestApp;
let tenant: Tenant;

beforeAll(async () => {
  db = await createTestDatabase(2);
  pool = createPool(db.url, 1);
  app = await startTestApp(pool);
  tenant = await seedTenant(db.pool, createSecretBox(TEST_SECRET_KEY), { platforms: ['meta'] });
});
afterAll(async () => {
  await app.stop();
  await pool.end();
  await db.drop();
});

const databaseName = () => new URL(db.url).pathname.slice(1);

async function postConversion(): Promise<{ status: number; body: { code?: string; conversionId?: string } }> {
  const user = newUser();
  await attributedJoin(db.pool, {
    siteId: tenant.site.siteId,
    channelId: tenant.site.channels.main,
    telegramUserId: user,
  });
  const res = await fetch(`${app.url}/api/v1/events/conversion`, {
    method: 'POST',
    headers: { authorization: `Bearer ${tenant.site.siteKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ telegramUserId: user, eventType: 'Lead' }),
  });
  return { status: res.status, body: (await res.json()) as { code?: string; conversionId?: string } };
}

const backendPid = async () =>
  (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;

describe('a server that became read-only', () => {
  it('a refused write is 503 UNAVAILABLE and its connection is dropped; 2xx on a new one once writable', async () => {
    expect((await postConversion()).status).toBe(201);
    const before = await backendPid();

    // The pooled connection and every new session are read-only now.
    await db.pool.query(`ALTER DATABASE "${databaseName()}" SET default_transaction_read_only = on`);
    await pool.query('SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY');
    expect(await backendPid()).toBe(before);

    const refused = await postConversion();
    expect(refused).toMatchObject({ status: 503, body: { code: 'UNAVAILABLE' } });
    // Dropped, not returned: the next query runs on a new connection (read-only as well).
    const after = await backendPid();
    expect(after).not.toBe(before);
    const { rows: gone } = await db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [before]);
    expect(gone).toEqual([]);
    // Refused again on that new (read-only) connection, dropped again: the pool holds none.
    expect((await postConversion()).status).toBe(503);
    expect(pool.totalCount).toBe(0);

    // The address reaches a writable server again.
    await db.pool.query(`ALTER DATABASE "${databaseName()}" RESET default_transaction_read_only`);
    const back = await postConversion();
    expect(back.status).toBe(201);
    // Nothing was written by the refused requests: only the two accepted conversions exist.
    const { rows } = await db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM conversions WHERE site_id = $1',
      [tenant.site.siteId],
    );
    expect(rows[0]!.n).toBe(2);
  });
});

describe('which answers mean "not there right now"', () => {
  it.each([
    {
      err: { code: '25006', message: 'cannot execute INSERT in a read-only transaction' },
      readOnly: true,
      away: true,
    },
    { err: { code: '55000', message: 'recovery is in progress' }, readOnly: true, away: true },
    {
      err: { code: '57P03', message: 'the database system is in recovery mode' },
      readOnly: true,
      away: true,
    },
    {
      err: { code: '57014', message: 'canceling statement due to statement timeout' },
      readOnly: false,
      away: true,
    },
    {
      err: { code: '55P03', message: 'canceling statement due to lock timeout' },
      readOnly: false,
      away: true,
    },
    { err: new Error('Query read timeout'), readOnly: false, away: true },
    {
      err: { code: '23505', message: 'duplicate key value violates unique constraint' },
      readOnly: false,
      away: false,
    },
    { err: { code: '55000', message: 'object not in prerequisite state' }, readOnly: false, away: false },
    { err: new Error('cannot execute INSERT in a read-only transaction'), readOnly: false, away: false },
  ])('$err.message', ({ err, readOnly, away }) => {
    expect(isServerReadOnly(err)).toBe(readOnly);
    expect(isDatabaseUnavailable(err)).toBe(away);
  });
});
