import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { adminTokenLine } from '../../backend/crypto/local-secrets.js';
import { spawnService, type ServiceProcess } from '../harness/process.js';

/**
 * `npm start` as a newcomer runs it: no DATABASE_URL, so an embedded PostgreSQL in $DATA_DIR/pg.
 * The data survives a restart, SIGTERM stops everything cleanly, and a SIGKILLed server's orphaned
 * PostgreSQL is adopted by the next start.
 */
const dataDir = mkdtempSync(join(tmpdir(), 'capigram-start-'));
// DATABASE_URL is cleared: this file is about the embedded database, even when the suite runs on an external one.
const env = { DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', WORKER: 'inline', DATABASE_URL: '' };
const running: ServiceProcess[] = [];

afterAll(async () => {
  for (const p of running) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  // A SIGKILLed server leaves PostgreSQL behind; stop it before removing its files.
  const pid = postmasterPid();
  if (pid) process.kill(pid, 'SIGINT');
  await new Promise((r) => setTimeout(r, 500));
  rmSync(dataDir, { recursive: true, force: true });
});

function postmasterPid(): number | null {
  const f = join(dataDir, 'pg', 'postmaster.pid');
  return existsSync(f) ? Number(readFileSync(f, 'utf8').split('\n')[0]) : null;
}

async function start(): Promise<{ p: ServiceProcess; url: string; ms: number }> {
  const t0 = performance.now();
  const p = spawnService('backend/main.ts', env);
  running.push(p);
  const [, url] = await p.waitFor(/Capigram listening on (http:\/\/\S+)/);
  let status = 0;
  while (status !== 200 && performance.now() - t0 < 15_000) {
    status = (await fetch(`${url}/readyz`).catch(() => null))?.status ?? 0;
  }
  expect(status).toBe(200);
  return { p, url: url!, ms: performance.now() - t0 };
}

async function query<T extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<T[]> {
  const port = Number(readFileSync(join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[3]);
  const password = readFileSync(join(dataDir, 'pg-password'), 'utf8').trim();
  const c = new pg.Client({ connectionString: `postgres://capigram:${password}@127.0.0.1:${port}/postgres` });
  await c.connect();
  try {
    return (await c.query<T>(sql, params)).rows;
  } finally {
    await c.end();
  }
}

describe('the generated admin token on the first start', () => {
  it('is printed, except where the output is a kept log (ADMIN_TOKEN_OUTPUT=file), where only its file is named', () => {
    const t = 'x'.repeat(43);
    expect(adminTokenLine(t, '/d', { output: 'token', terminal: false })).toBe(
      `${t} (generated into /d/admin-token)`,
    );
    expect(adminTokenLine(t, '/d', { output: 'file', terminal: false })).toBe(
      'generated into /d/admin-token (read it there)',
    );
    expect(adminTokenLine(t, '/d', { output: 'file', terminal: true })).toContain(t);
  });
});

describe('npm start with the embedded database', () => {
  it('serves /readyz within 15 s on a fresh data directory and prints its URLs and admin token', async () => {
    const { p, ms } = await start();
    expect(ms).toBeLessThan(15_000);
    expect(p.output()).toMatch(/business API: +http:\/\/localhost:0\/api\/v1/);
    expect(p.output()).toMatch(/dashboard: +http:\/\/localhost:0\/dashboard/);
    const token = readFileSync(join(dataDir, 'admin-token'), 'utf8').trim();
    expect(p.output()).toContain(`admin token:    ${token} (generated into ${dataDir}/admin-token)`);
    expect(existsSync(join(dataDir, 'secret-key'))).toBe(true);
    await query(`INSERT INTO accounts (name) VALUES ('survives restarts')`);
    p.child.kill('SIGTERM');
    expect(await p.exit()).toBe(0);
    // PostgreSQL was stopped with the server: no live postmaster left behind.
    expect(postmasterPid()).toBeNull();
  });

  it('keeps the data across a restart, and recovers after the server is killed with SIGKILL', async () => {
    const second = await start();
    // Shown once when generated; a restart says where it is, never the token again.
    const token = readFileSync(join(dataDir, 'admin-token'), 'utf8').trim();
    expect(second.p.output()).toContain(`admin token:    in ${dataDir}/admin-token\n`);
    expect(second.p.output()).not.toContain(token);
    second.p.child.kill('SIGKILL');
    await second.p.exit();
    const orphan = postmasterPid();
    expect(orphan).not.toBeNull();

    const third = await start();
    const rows = await query<{ name: string }>('SELECT name FROM accounts');
    expect(rows.map((r) => r.name)).toEqual(['survives restarts']);
    third.p.child.kill('SIGINT');
    expect(await third.p.exit()).toBe(0);
    expect(postmasterPid()).toBeNull();
  });

  it('a busy port ends the start with the reason and exit 1, and stops the database it started', async () => {
    const busy = createServer();
    await new Promise<void>((ok) => busy.listen(0, '127.0.0.1', ok));
    const port = (busy.address() as { port: number }).port;
    try {
      const p = spawnService('backend/main.ts', { ...env, PORT: String(port) });
      running.push(p);
      expect(await p.exit()).toBe(1);
      expect(p.output()).toContain(
        `Capigram failed to start: 127.0.0.1:${port} is already in use (another Capigram, or another program, listens there): stop it, or set PORT to a free port`,
      );
      expect(p.output()).not.toMatch(/\n\s+at /); // no stack trace
      expect(postmasterPid()).toBeNull();
    } finally {
      busy.close();
    }
  });
});
