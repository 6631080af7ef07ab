// `npm run demo -- --check` as a newcomer runs it: a child process, its own data directory, the
// whole journey headless with one line per step, exit 0 only when every step held. A second run
// on the same directory reuses the demo's set-up (and re-points the bot's webhook); with the Meta
// pixel switched off, the delivery step fails, names what did arrive, and the exit code is 1.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { scratchDir } from '../harness/scratch.js';

const dataDir = scratchDir('demo');
const STEPS = [
  'landing page',
  'visit',
  'invite click',
  'join',
  'conversion delivered',
  'business-API purchase',
  'lead numbers',
  'report numbers',
  'bot start',
  'mini app',
];

// DATABASE_URL and ADMIN_TOKEN are set on purpose: the demo must ignore them and keep to its own data.
const DEMO_ENV = {
  DATABASE_URL: 'postgres://must-not-be-used.invalid/db',
  ADMIN_TOKEN: 'not-the-demo-token-0123456789',
};

async function npm(
  args: string[],
  env: Record<string, string> = DEMO_ENV,
): Promise<{ code: number | null; out: string; stdout: string }> {
  const child = spawn('npm', args, {
    env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let stdout = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    stdout += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, out, stdout };
}

const checkLines = (out: string) => out.split('\n').filter((l) => l.startsWith('[sandbox] check '));

it('runs the journey headless, one line per step, and exits 0', async () => {
  const { code, out, stdout } = await npm(['run', 'demo', '--', '--check']);
  expect(code, out).toBe(0);
  const lines = checkLines(out);
  expect(
    lines.slice(0, STEPS.length).map((l) => /^\[sandbox\] check ok {4}([^:]+):/.exec(l)?.[1]),
    out,
  ).toEqual(STEPS);
  expect(lines.at(-1)).toMatch(
    /^\[sandbox\] check passed: every step held; first attributed conversion delivered \d+ ms after the visit/,
  );
  expect(out).toMatch(
    /lead \d+: 2 conversions \(Subscribe sent, Purchase sent\), the join attributed to the visit/,
  );
  // Every line the demo printed says it is the sandbox's (npm's banner goes to stderr: see .npmrc).
  expect(stdout.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('[sandbox]'))).toEqual([]);
  expect(out).toContain(`data directory:   ${dataDir}`);
  expect(out).not.toContain('not-the-demo-token');
  // Its own database and secrets, in its own directory.
  expect(readFileSync(join(dataDir, 'admin-token'), 'utf8').trim()).toMatch(/^\S{16,}$/);
  expect(JSON.parse(readFileSync(join(dataDir, 'sandbox.json'), 'utf8'))).toMatchObject({
    websiteId: expect.stringMatching(/^ws_/),
  });
}, 60_000);

it('a second run reuses the set-up; without the Meta pixel the delivery step fails and the exit code is 1', async () => {
  const again = await npm(['run', 'demo', '--', '--check']);
  expect(again.code, again.out).toBe(0);
  expect(again.out).not.toContain('pixels created');

  const { siteId } = JSON.parse(readFileSync(join(dataDir, 'sandbox.json'), 'utf8')) as { siteId: string };
  const list = await npm(['run', 'admin', '--', 'pixel', 'list', '--site', siteId, '--json'], {});
  const meta = (JSON.parse(list.stdout) as { pixels: { pixelId: string; platform: string }[] }).pixels.find(
    (p) => p.platform === 'meta',
  );
  expect(
    (await npm(['run', 'admin', '--', 'pixel', 'deactivate', '--pixel', meta!.pixelId, '--json'], {})).code,
  ).toBe(0);

  const { code, out } = await npm(['run', 'demo', '--', '--check'], {
    ...DEMO_ENV,
    SANDBOX_CHECK_TIMEOUT_MS: '1500',
  });
  expect(code, out).toBe(1);
  expect(out).toMatch(
    /\[sandbox\] check FAIL {2}conversion delivered: within 1500 ms only \[tiktok, snapchat, google\] took the Subscribe/,
  );
  expect(checkLines(out).at(-1)).toBe('[sandbox] check FAILED');
}, 90_000);
