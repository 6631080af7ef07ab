import { execFile } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * A PostgreSQL primary with a streaming standby, made the way an operator makes one: `initdb`,
 * `pg_basebackup -R` (which writes `standby.signal` and `primary_conninfo`), the standby started on
 * another loopback port. Debian's PostgreSQL 15 binaries, since the embedded ones have no
 * `pg_basebackup` or `pg_dump`. As root, the servers run as the `postgres` user.
 */
export const PG_BIN = '/usr/lib/postgresql/15/bin';

const run = promisify(execFile);

export interface PgServer {
  port: number;
  dataDir: string;
  url(database?: string): string;
  /** `pg_ctl stop` with the given mode: `fast` (a clean shutdown) or `immediate` (a crash). */
  stop(mode: 'fast' | 'immediate'): Promise<void>;
  /** `pg_ctl promote`: a standby becomes a primary that takes writes. */
  promote(): Promise<void>;
  /** Runs one of the PostgreSQL client programs (pg_dump, pg_restore, createdb…) as the server's user. */
  tool(program: string, args: string[]): Promise<string>;
}

export interface StandbyPair {
  /** A directory of theirs (the servers' user may write there), removed with them. */
  dir: string;
  /** The CA that signed the servers' certificate (for `localhost` and 127.0.0.1): TLS is on. */
  caFile: string;
  primary: PgServer;
  standby: PgServer;
  /** Stops both servers (whatever state they are in) and removes their files. */
  close(): Promise<void>;
}

function owner(): { uid?: number; gid?: number } {
  return process.getuid?.() === 0 ? POSTGRES_IDS : {};
}

let POSTGRES_IDS: { uid?: number; gid?: number } = {};

async function postgresIds(): Promise<void> {
  if (process.getuid?.() !== 0) return;
  const id = async (flag: string) => Number((await run('id', [flag, 'postgres'])).stdout.trim());
  POSTGRES_IDS = { uid: await id('-u'), gid: await id('-g') };
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

function server(dataDir: string, port: number, log: string): PgServer & { start(): Promise<void> } {
  const pgCtl = (args: string[]) => run(join(PG_BIN, 'pg_ctl'), ['-D', dataDir, ...args], owner());
  return {
    port,
    dataDir,
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    async start() {
      await pgCtl([
        'start',
        '-w',
        '-t',
        '60',
        '-l',
        log,
        '-o',
        `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''`,
      ]);
    },
    async stop(mode) {
      await pgCtl(['stop', '-w', '-m', mode]).catch(() => undefined);
    },
    async promote() {
      await pgCtl(['promote', '-w', '-t', '60']);
    },
    async tool(program, args) {
      return (
        await run(join(PG_BIN, program), ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', ...args], {
          ...owner(),
          maxBuffer: 64 * 1024 * 1024,
        })
      ).stdout;
    },
  };
}

/**
 * A primary and its standby, both running. `settings` go to the primary's postgresql.auto.conf
 * before the base backup, so the standby has them too.
 */
export async function startStandbyPair(
  prefix: string,
  settings: Record<string, string> = {},
): Promise<StandbyPair> {
  await postgresIds();
  // Under the system's temporary directory (which the postgres user can enter), owned by it.
  const root = mkdtempSync(join(tmpdir(), `capigram-${prefix}-`));
  if (POSTGRES_IDS.uid !== undefined) chownSync(root, POSTGRES_IDS.uid, POSTGRES_IDS.gid!);
  const primaryDir = join(root, 'primary');
  const standbyDir = join(root, 'standby');
  mkdirSync(primaryDir, { mode: 0o700 });
  if (POSTGRES_IDS.uid !== undefined) chownSync(primaryDir, POSTGRES_IDS.uid, POSTGRES_IDS.gid!);
  await run(
    join(PG_BIN, 'initdb'),
    ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'],
    owner(),
  );
  const tls = await certificates(root);
  const conf = {
    ssl: 'on',
    ssl_cert_file: tls.cert,
    ssl_key_file: tls.key,
    // Throw-away data: durability costs time and proves nothing here.
    fsync: 'off',
    full_page_writes: 'off',
    max_connections: '100',
    wal_keep_size: '256MB',
    ...settings,
  };
  appendFileSync(
    join(primaryDir, 'postgresql.auto.conf'),
    Object.entries(conf)
      .map(([k, v]) => `${k} = '${v}'\n`)
      .join(''),
  );
  const primary = server(primaryDir, await freePort(), join(root, 'primary.log'));
  await primary.start();
  // -R: standby.signal and primary_conninfo; -X stream: the WAL written meanwhile comes along.
  await run(
    join(PG_BIN, 'pg_basebackup'),
    [
      '-h',
      '127.0.0.1',
      '-p',
      String(primary.port),
      '-U',
      'postgres',
      '-D',
      standbyDir,
      '-R',
      '-X',
      'stream',
      '--checkpoint=fast',
    ],
    owner(),
  );
  const standby = server(standbyDir, await freePort(), join(root, 'standby.log'));
  await standby.start();
  return {
    dir: root,
    caFile: tls.ca,
    primary,
    standby,
    async close() {
      await standby.stop('immediate');
      await primary.stop('immediate');
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * A CA and a server certificate it signed for `localhost` and 127.0.0.1, made with openssl; the key
 * readable by the server's user alone, as PostgreSQL insists.
 */
async function certificates(dir: string): Promise<{ ca: string; cert: string; key: string }> {
  const f = (name: string) => join(dir, name);
  const openssl = (args: string[]) => run('openssl', args);
  await openssl([
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=Capigram test CA',
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.pem'),
  ]);
  await openssl([
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    '/CN=localhost',
    '-keyout',
    f('server.key'),
    '-out',
    f('server.csr'),
  ]);
  writeFileSync(f('san.ext'), 'subjectAltName = DNS:localhost, IP:127.0.0.1\n');
  await openssl([
    'x509',
    '-req',
    '-in',
    f('server.csr'),
    '-CA',
    f('ca.pem'),
    '-CAkey',
    f('ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    f('san.ext'),
    '-out',
    f('server.pem'),
  ]);
  chmodSync(f('server.key'), 0o600);
  if (POSTGRES_IDS.uid !== undefined)
    for (const name of ['server.key', 'server.pem', 'ca.pem'])
      chownSync(f(name), POSTGRES_IDS.uid, POSTGRES_IDS.gid!);
  return { ca: f('ca.pem'), cert: f('server.pem'), key: f('server.key') };
}
