// `npm test` on a fresh Debian machine: scripts/test-prerequisites.sh (npm's pretest, and .ci/run)
// installs the Debian packages the tests run for real where it may (root with apt-get) and
// otherwise stops at once with the one line that says what to install. Run against a directory of
// its own (PREREQUISITES_ROOT) with fake `id` and `apt-get` programs, so nothing is installed here.
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { scratchDir } from '../harness/scratch.js';

const SCRIPT = 'scripts/test-prerequisites.sh';
const ALL = [
  'chromium',
  'nginx-light',
  'libnginx-mod-http-js',
  'pgbouncer',
  'postgresql-15',
  'python3-requests',
];
const FILES: Record<string, string[]> = {
  chromium: ['usr/bin/chromium'],
  'nginx-light': ['usr/sbin/nginx'],
  'libnginx-mod-http-js': ['usr/lib/nginx/modules/ngx_http_js_module.so'],
  pgbouncer: ['usr/sbin/pgbouncer'],
  'postgresql-15': ['usr/lib/postgresql/15/bin/initdb', 'usr/lib/postgresql/15/bin/pg_basebackup'],
  // An empty executable: run as `python3 -c 'import requests'`, it succeeds as a Python with requests would.
  'python3-requests': ['usr/bin/python3'],
};

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function install(root: string, packages: readonly string[]): void {
  for (const p of packages)
    for (const f of FILES[p]!) {
      mkdirSync(dirname(join(root, f)), { recursive: true });
      writeFileSync(join(root, f), '');
      chmodSync(join(root, f), 0o755);
    }
}

/** A machine: the packages it has, who runs the script, and what its apt-get does. */
function run(o: { installed: readonly string[]; uid: number; aptGet?: 'installs' | 'fails' }) {
  const dir = scratchDir('prereq');
  dirs.push(dir);
  const root = join(dir, 'root');
  const bin = join(dir, 'bin');
  const log = join(dir, 'apt-get.log');
  mkdirSync(bin, { recursive: true });
  install(root, o.installed);
  const program = (name: string, body: string) => {
    writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`);
    chmodSync(join(bin, name), 0o755);
  };
  program('id', `echo ${o.uid}`);
  if (o.aptGet) {
    // Installs by writing the packages' files under the root, as dpkg would under /.
    const files = Object.entries(FILES)
      .map(
        ([p, fs]) =>
          `  ${p}) for f in ${fs.join(' ')}; do /bin/mkdir -p "$R/$(/usr/bin/dirname $f)"; : > "$R/$f"; /bin/chmod 755 "$R/$f"; done ;;`,
      )
      .join('\n');
    program(
      'apt-get',
      `echo "$*" >> ${log}\n${o.aptGet === 'fails' ? 'exit 100' : `R=${root}\n[ "$1" = install ] || exit 0\nfor p in "$@"; do case "$p" in\n${files}\n esac; done`}`,
    );
  }
  const started = performance.now();
  const r = spawnSync('/bin/bash', [SCRIPT], {
    env: { PATH: bin, PREREQUISITES_ROOT: root },
    encoding: 'utf8',
  });
  return {
    code: r.status,
    stdout: r.stdout,
    stderr: r.stderr,
    ms: performance.now() - started,
    aptGet: existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : [],
  };
}

it('npm test runs it first, and .ci/run uses the same script', () => {
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> };
  expect(pkg.scripts.pretest).toBe(`bash ${SCRIPT}`);
  expect(readFileSync('.ci/run', 'utf8')).toMatch(/^scripts\/test-prerequisites\.sh /m);
});

it('with everything installed: exit 0 at once, apt-get never asked, nothing printed', () => {
  const r = run({ installed: ALL, uid: 0, aptGet: 'installs' });
  expect(r).toMatchObject({ code: 0, stdout: '', stderr: '', aptGet: [] });
  expect(r.ms).toBeLessThan(1000);
});

it('not root: fails at once with the one line that says what to install', () => {
  const r = run({
    installed: ['chromium', 'pgbouncer', 'postgresql-15', 'python3-requests'],
    uid: 1000,
    aptGet: 'installs',
  });
  expect(r).toMatchObject({ code: 1, stdout: '', aptGet: [] });
  expect(r.stderr).toBe(
    'the tests need Debian packages: as root, apt-get install -y nginx-light libnginx-mod-http-js\n',
  );
});

it('root without apt-get: the same one line', () => {
  const r = run({ installed: [], uid: 0 });
  expect(r.code).toBe(1);
  expect(r.stderr).toBe(`the tests need Debian packages: as root, apt-get install -y ${ALL.join(' ')}\n`);
});

it('root with apt-get: installs what is missing, and only that', () => {
  const r = run({
    installed: ['nginx-light', 'pgbouncer', 'postgresql-15', 'python3-requests'],
    uid: 0,
    aptGet: 'installs',
  });
  expect(r.stderr).toBe('installing chromium libnginx-mod-http-js for the tests (apt-get)\n');
  expect(r.code).toBe(0);
  expect(r.aptGet).toEqual(['update -qq', 'install -y -qq chromium libnginx-mod-http-js']);
});

it('an install that fails stops the tests with what could not be installed', () => {
  const r = run({ installed: ALL.filter((p) => p !== 'chromium'), uid: 0, aptGet: 'fails' });
  expect(r.code).toBe(1);
  expect(r.stderr.split('\n').at(-2)).toBe(
    'the tests need Debian packages that apt-get could not install: chromium',
  );
});
