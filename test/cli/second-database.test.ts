// Running the CLI without the server's DATA_DIR used to create a second, empty database silently.
import { existsSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { scratchDir } from '../harness/scratch.js';
import { SECRET_KEY_HEX, runWith } from './harness.js';

let db: TestDatabase;
let server: TestApp;
const dirs: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase(2);
  server = await startTestApp(db.pool);
});
afterAll(async () => {
  await server.stop();
  await db.drop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function freshEnv(port: string): NodeJS.ProcessEnv {
  const dataDir = scratchDir('cli-fresh');
  dirs.push(dataDir);
  return {
    PATH: process.env.PATH,
    DATA_DIR: dataDir,
    DATABASE_URL: '',
    SECRET_KEY: SECRET_KEY_HEX,
    HOST: '127.0.0.1',
    PORT: port,
  };
}

it('refuses to create a database when a Capigram server answers on the configured address, and says what to do', async () => {
  const env = freshEnv(new URL(server.url).port);
  const r = await runWith(env, ['account', 'list', '--json']);
  expect(r.code).toBe(1);
  expect(r.json<{ error: { code: string } }>().error.code).toBe('VALIDATION_FAILED');
  expect(r.stderr).toContain(
    `there is no database in DATA_DIR ${env.DATA_DIR}, but a Capigram server answers at ${server.url}`,
  );
  expect(r.stderr).toContain("with that server's DATA_DIR (or DATABASE_URL)");
  expect(existsSync(join(env.DATA_DIR!, 'pg'))).toBe(false);
});

it('creates one when nothing answers there, and says where', async () => {
  // A port that was free a moment ago: nothing listens on it.
  const port = await new Promise<number>((ok) => {
    const s: Server = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => ok(p));
    });
  });
  const env = freshEnv(String(port));
  const r = await runWith(env, ['account', 'create', '--name', 'Fresh', '--json']);
  expect(r.code, r.stderr).toBe(0);
  expect(r.json()).toHaveProperty('accountId');
  expect(r.stderr).toContain(
    `created a new database in ${join(env.DATA_DIR!, 'pg')} (DATA_DIR ${env.DATA_DIR}`,
  );
  const again = await runWith(env, ['account', 'list', '--json']);
  expect(again.code, again.stderr).toBe(0);
  expect(again.json<{ accounts: { name: string }[] }>().accounts.map((a) => a.name)).toEqual(['Fresh']);
  expect(again.stderr).toBe('');
}, 60_000);
