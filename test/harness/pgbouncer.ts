import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';

/**
 * Debian's PgBouncer (1.18) in transaction mode in front of a PostgreSQL, with the settings
 * docs/production.md gives an operator: the startup parameters node-postgres sends that PgBouncer
 * does not track are ignored (they are set on the role instead), and every client transaction may
 * run on any server connection.
 */
export const PGBOUNCER = '/usr/sbin/pgbouncer';

export interface PgBouncer {
  /** The server's URL with PgBouncer's address in place of the server's. */
  url: string;
  /** What PgBouncer logged (its refusals say why a client was turned away). */
  log(): string;
  close(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = net.createServer();
    srv.on('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => ok(typeof addr === 'object' && addr ? addr.port : 0));
    });
  });
}

export async function startPgBouncer(
  serverUrl: string,
  opts: { poolSize?: number } = {},
): Promise<PgBouncer> {
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username);
  const password = decodeURIComponent(server.password);
  const dir = mkdtempSync(join(tmpdir(), 'capigram-pgbouncer-'));
  const port = await freePort();
  // PgBouncer refuses to run as root: as root it runs as the postgres user.
  const asRoot = process.getuid?.() === 0;
  const ids = asRoot
    ? {
        uid: Number(execFileSync('id', ['-u', 'postgres']).toString().trim()),
        gid: Number(execFileSync('id', ['-g', 'postgres']).toString().trim()),
      }
    : {};
  // Clients are trusted on loopback here; PgBouncer logs in to the server with the password.
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" "${password}"\n`, { mode: 0o600 });
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${opts.poolSize ?? 8}`,
      'max_client_conn = 500',
      'ignore_startup_parameters = extra_float_digits, idle_in_transaction_session_timeout, statement_timeout, lock_timeout, options',
      '',
    ].join('\n'),
  );
  if (ids.uid !== undefined) {
    chownSync(dir, ids.uid, ids.gid!);
    for (const f of ['userlist.txt', 'pgbouncer.ini']) chownSync(join(dir, f), ids.uid, ids.gid!);
  }
  const child: ChildProcess = spawn(PGBOUNCER, [join(dir, 'pgbouncer.ini')], {
    ...ids,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => void (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => void (out += d.toString()));
  const exited = once(child, 'exit');
  // Up once it accepts connections.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const ok = await new Promise<boolean>((res) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        res(true);
      });
      s.once('error', () => res(false));
    });
    if (ok) break;
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`pgbouncer did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const url = new URL(serverUrl);
  url.port = String(port);
  return {
    url: url.toString(),
    log: () => out,
    async close() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
