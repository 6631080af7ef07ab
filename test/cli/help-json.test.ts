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

  it('refusals stay refusals: exit 1, one {"error":{"code","message"}} on stdout, the reason on stderr', async () => {
    for (const argv of [
      ['--json'],
      ['key', '--json'],
      ['acount', '--help', '--json'],
      ['key', 'delete', '--help', '--json'],
      ['key', 'create', '--help', '--colour', '--json'],
    ]) {
      const r = await run(...argv);
      expect(r.code, argv.join(' ')).toBe(1);
      const { error } = r.json<{ error: { code: string; message: string } }>();
      expect(error.code, argv.join(' ')).toBe('USAGE');
      expect(r.stderr).toContain(`error: ${error.message}`);
    }
  });

  /** `npm run admin -- …` exactly as an operator types it, under the project's .npmrc alone. */
  function viaNpm(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    const childEnv = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => k.toLowerCase() !== 'npm_config_loglevel' && k.toLowerCase() !== 'npm_config_json',
      ),
    );
    return new Promise((resolve) => {
      execFile(
        'npm',
        ['run', 'admin', '--', ...args],
        { cwd: process.cwd(), env: { ...childEnv, ...env }, timeout: 60_000 },
        (err, stdout, stderr) =>
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
      );
    });
  }

  it('through npm itself: stdout holds the one JSON object, npm adds nothing (no banner, no error object)', async () => {
    const ok = await viaNpm(['key', 'create', '--help', '--json']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^\{"usage":"npm run admin -- key create .*\}\n$/s);
    expect(ok.stdout.split('\n')).toHaveLength(2);
    expect(`${ok.stdout}${ok.stderr}`).not.toContain('> capigram@');

    for (const args of [
      ['acount', 'list', '--json'],
      ['account', 'create', '--json'],
      ['key', 'create', '--account', 'x', '--colour', '--json'],
    ]) {
      const failed = await viaNpm(args);
      expect(failed.code, args.join(' ')).toBe(1);
      // Exactly one line, one object: npm's own `{"error":{"code":1,…}}` of its json mode is not there.
      expect(failed.stdout.split('\n'), failed.stdout).toHaveLength(2);
      const { error } = JSON.parse(failed.stdout) as { error: { code: string; message: string } };
      expect(Object.keys(error)).toEqual(['code', 'message']);
      expect(error.code).toBe('USAGE');
      expect(failed.stderr).toContain(error.message);
    }
  });
});
