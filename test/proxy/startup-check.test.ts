// `npm run proxy` asks the tracker about its --website-id before it serves: an unknown one stops
// the start with a clear message (exit 1); an unreachable tracker is a warning and the proxy
// serves anyway. The real proxy entry point as a child process, against the real app.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { spawnService, type ServiceProcess } from '../harness/process.js';

let db: TestDatabase;
let app: TestApp;
let origin: Server;
let upstream: string;
let websiteId: string;
const running: ServiceProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  app = await startTestApp(db.pool);
  const { accountId } = await createAccount(db.pool, { name: 'Proxy start' });
  ({ websiteId } = await createSite(db.pool, { accountId, name: 'Shop', domains: ['127.0.0.1'] }));
  origin = createServer((_req, res) => res.end('<!doctype html><title>origin</title>'));
  await new Promise<void>((ok) => origin.listen(0, '127.0.0.1', ok));
  upstream = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const p of running) if (p.child.exitCode === null) p.child.kill('SIGTERM');
  await Promise.all(running.map((p) => p.exit()));
  await new Promise((ok) => origin.close(ok));
  await app.stop();
  await db.drop();
});

function proxy(tracker: string, id: string): ServiceProcess {
  const p = spawnService('proxy/main.ts', {
    PROXY_UPSTREAM: upstream,
    PROXY_TRACKER_URL: tracker,
    PROXY_WEBSITE_ID: id,
    PROXY_PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
  });
  running.push(p);
  return p;
}

it('an unknown --website-id stops the start with the reason', async () => {
  const p = proxy(app.url, 'ws_doesNotExist000');
  expect(await p.exit()).toBe(1);
  expect(p.output()).toContain(
    `capigram proxy: the tracker at ${app.url} does not know --website-id ws_doesNotExist000 (websiteId ws_doesNotExist000 is not known): check the websiteId`,
  );
  expect(p.output()).not.toContain('listening');
});

it('a known one starts without a warning, and the check leaves no visit behind', async () => {
  const p = proxy(app.url, websiteId);
  await p.waitFor(/Capigram proxy listening on/);
  expect(p.output()).not.toContain('could not confirm');
  expect(Number((await db.pool.query('SELECT count(*) FROM visits')).rows[0].count)).toBe(0);
});

it('an unreachable tracker is a warning; the proxy serves the site anyway', async () => {
  // A port nothing listens on: a server's, closed again.
  const closed = createServer();
  await new Promise<void>((ok) => closed.listen(0, '127.0.0.1', ok));
  const port = (closed.address() as AddressInfo).port;
  await new Promise((ok) => closed.close(ok));
  const p = proxy(`http://127.0.0.1:${port}`, websiteId);
  const [, url] = (await p.waitFor(/"url":"(http:\/\/[^"]+)"/)) as unknown as [string, string];
  expect(p.output()).toMatch(
    /the tracker could not confirm --website-id ws_\S+ \(ECONNREFUSED\); starting anyway/,
  );
  expect(await (await fetch(`${url}/`)).text()).toContain('<title>origin</title>');
});
