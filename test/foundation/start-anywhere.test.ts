import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { spawnService, type ServiceProcess } from '../harness/process.js';

/**
 * `npm start` from a directory others cannot enter: `/root` (mode 700) is the default home on most
 * servers, and `mktemp -d` makes the same. Run as root, the embedded PostgreSQL cannot run as root
 * and the `postgres` user cannot reach a data directory below such a directory; Capigram still
 * starts (see `backend/db/embedded.ts`). As an ordinary user the same start simply works.
 */
const home = mkdtempSync(join(tmpdir(), 'capigram-home-'));
const dataDir = join(home, 'capigram', '.data');
const running: ServiceProcess[] = [];

afterAll(async () => {
  for (const p of running) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  const pidFile = join(dataDir, 'pg', 'postmaster.pid');
  if (existsSync(pidFile)) {
    process.kill(Number(readFileSync(pidFile, 'utf8').split('\n')[0]), 'SIGINT');
    await new Promise((r) => setTimeout(r, 500));
  }
  rmSync(home, { recursive: true, force: true });
});

it('starts, serves /readyz and stops cleanly with its data below a mode-700 directory', async () => {
  mkdirSync(join(home, 'capigram'), { mode: 0o700 });
  expect(statSync(home).mode & 0o777).toBe(0o700);
  const p = spawnService('backend/main.ts', {
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    WORKER: 'inline',
    DATABASE_URL: '',
  });
  running.push(p);
  const [, url] = await p.waitFor(/Capigram listening on (http:\/\/\S+)|failed to start/, 30_000);
  expect(url, p.output()).toBeDefined();
  let status = 0;
  const t0 = performance.now();
  while (status !== 200 && performance.now() - t0 < 15_000)
    status = (await fetch(`${url}/readyz`).catch(() => null))?.status ?? 0;
  expect(status).toBe(200);
  p.child.kill('SIGTERM');
  expect(await p.exit()).toBe(0);
  // The database stopped with the server.
  expect(readFileSync(join(dataDir, 'pg-owner.pid'), 'utf8')).toBe('');
  expect(existsSync(join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
}, 60_000);
