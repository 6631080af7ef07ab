// The real entry point in its own process, as `npm run admin` runs it: stdout holds exactly one
// JSON object with --json (logs and warnings go to stderr), and the exit code says refused or not.
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEFAULT_BOT, cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
beforeAll(async () => {
  w = await cliWorld();
});
afterAll(async () => {
  await w.close();
});

function admin(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'backend/cli/main.ts', ...args],
      // LOG_LEVEL=info: were the logger on stdout, its lines would break the JSON below.
      { cwd: process.cwd(), env: { ...w.env, LOG_LEVEL: 'info', ...env }, timeout: 30_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

function onlyJson(stdout: string): Record<string, any> {
  const lines = stdout.split('\n');
  expect(lines).toHaveLength(2);
  expect(lines[1]).toBe('');
  return JSON.parse(lines[0]!);
}

it('success: exit 0 and exactly one JSON object on stdout; refusal: exit 1, one error object on stdout, the reason on stderr', async () => {
  const created = await admin(['account', 'create', '--name', 'Sub', '--json']);
  expect(created.code, created.stderr).toBe(0);
  const { accountId } = onlyJson(created.stdout);
  expect(accountId).toMatch(/^[0-9a-f-]{36}$/);

  const [key, bot, refused, badFlag] = await Promise.all([
    admin(['key', 'create', '--account', accountId, '--json']),
    admin(['bot', 'add', '--account', accountId, '--token', DEFAULT_BOT.token, '--json'], {
      PUBLIC_URL: 'http://localhost:3000',
    }),
    admin(['key', 'list', '--account', '00000000-0000-4000-8000-0000000000ff', '--json']),
    admin([
      'site',
      'create',
      '--account',
      accountId,
      '--name',
      'S',
      '--domain',
      'a.example.com',
      '--port',
      '1',
      '--json',
    ]),
  ]);

  expect(key.code, key.stderr).toBe(0);
  expect(Object.keys(onlyJson(key.stdout))).toEqual(['keyId', 'apiKey']);

  expect(bot.code, bot.stderr).toBe(0);
  expect(onlyJson(bot.stdout).webhookUrl).toMatch(/^http:\/\/localhost:3000\/backend\/telegram\//);
  expect(bot.stderr).toContain('warning: PUBLIC_URL (http://localhost:3000) is not https');

  expect(refused.code).toBe(1);
  expect(onlyJson(refused.stdout).error).toEqual({
    code: 'NOT_FOUND',
    message: 'account 00000000-0000-4000-8000-0000000000ff does not exist',
  });
  expect(refused.stderr).toContain('error: account 00000000-0000-4000-8000-0000000000ff does not exist');

  expect(badFlag.code).toBe(1);
  expect(onlyJson(badFlag.stdout).error.code).toBe('USAGE');
  expect(badFlag.stderr).toContain('unknown option --port for "site create"');
});

it('an invalid environment is a refusal naming the variable', async () => {
  const r = await admin(['account', 'create', '--name', 'X', '--json'], { PUBLIC_URL: 'not a url' });
  expect(r.code).toBe(1);
  expect(onlyJson(r.stdout).error.code).toBe('CONFIG');
  expect(r.stderr).toContain('PUBLIC_URL: PUBLIC_URL must be an absolute URL');
});
