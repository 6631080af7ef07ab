// `--help` with `--json`: stdout still holds exactly one JSON object, {"usage": "…"}, and the
// command is not run. No database is reachable here, so any attempt to open one would fail.
import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { runWith } from './harness.js';
import { scratchDir } from '../harness/scratch.js';

const env = { DATABASE_URL: 'postgres://nobody:x@127.0.0.1:1/none', DATA_DIR: scratchDir('cli') };
const run = (...argv: string[]) => runWith(env, argv);

async function usage(...argv: string[]): Promise<string> {
  const r = await run(...argv);
  expect(r.code, r.stderr).toBe(0);
  expect(r.stderr).toBe('');
  const out = r.json<{ usage: string }>();
  expect(Object.keys(out)).toEqual(['usage']);
  return out.usage;
}

describe('--help --json', () => {
  it('a command\'s help is {"usage"} holding the same text as without --json', async () => {
    const plain = await run('pixel', 'add', '--help');
    expect(plain.code).toBe(0);
    const text = await usage('pixel', 'add', '--json', '--help');
    expect(text).toBe(plain.stdout.trimEnd());
    expect(text).toContain('npm run admin -- pixel add --site SITE');
    expect(await usage('pixel', 'add', '--help', '--json')).toBe(text);
    expect(await usage('sends', 'retry', '-h', '--json')).toContain(
      'npm run admin -- sends retry --send SEND_ID [--json]',
    );
  });

  it('the overview and a group listing likewise, --json before or after', async () => {
    expect(await usage('--help', '--json')).toContain('  pixel add ');
    expect(await usage('--json', '--help')).toContain('  pixel add ');
    expect(await usage('--json', 'help')).toContain('  key create ');
    const group = await usage('key', '--help', '--json');
    expect(group).toContain('key revoke');
    expect(await usage('key', '--json', '-h')).toBe(group);
  });

  it('--help wins over missing required flags with --json too', async () => {
    expect(await usage('channel', 'add', '--json', '--help')).toContain('--telegram-channel-id');
  });

  it('refusals stay refusals: exit 1, nothing on stdout', async () => {
    for (const argv of [
      ['--json'],
      ['key', '--json'],
      ['acount', '--help', '--json'],
      ['key', 'delete', '--help', '--json'],
      ['key', 'create', '--help', '--colour', '--json'],
    ]) {
      const r = await run(...argv);
      expect(r.code, argv.join(' ')).toBe(1);
      expect(r.stdout, argv.join(' ')).toBe('');
      expect(r.stderr).not.toBe('');
    }
  });

  it("through npm itself, npm's own errors stay visible on stderr (.npmrc does not silence npm)", async () => {
    const childEnv = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => k.toLowerCase() !== 'npm_config_loglevel' && k.toLowerCase() !== 'npm_config_json',
      ),
    );
    const r = await new Promise<{ stdout: string; stderr: string }>((resolve) => {
      execFile(
        'npm',
        ['run', 'no-such-script'],
        { cwd: process.cwd(), env: childEnv, timeout: 60_000 },
        (_err, stdout, stderr) => resolve({ stdout, stderr }),
      );
    });
    expect(r.stderr).toContain('npm error Missing script: "no-such-script"');
  });

  it("through npm itself: .npmrc's json mode moves the banner to stderr, and stdout holds only the JSON", async () => {
    // Whatever npm loglevel this test runs under, the project's .npmrc is what is being checked.
    const childEnv = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => k.toLowerCase() !== 'npm_config_loglevel' && k.toLowerCase() !== 'npm_config_json',
      ),
    );
    const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        'npm',
        ['run', 'admin', '--', 'key', 'create', '--help', '--json'],
        { cwd: process.cwd(), env: { ...childEnv, ...env }, timeout: 60_000 },
        (err, stdout, stderr) =>
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
      );
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^\{"usage":"npm run admin -- key create .*\}\n$/s);
    // The banner is not gone, it is on stderr (npm's json mode).
    expect(r.stderr).toContain('> capigram@');
    expect(r.stdout.split('\n')).toHaveLength(2);
  });
});
