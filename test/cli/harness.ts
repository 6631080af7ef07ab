// What the CLI tests share: a test database, the fake Telegram, a private DATA_DIR, and `run`,
// which drives `runCli` in-process exactly as `npm run admin` does, capturing stdout and stderr.
import { rmSync } from 'node:fs';
import { expect } from 'vitest';
import { runCli } from '../../backend/cli/run.js';
import {
  DEFAULT_BOT,
  DEFAULT_CHAT,
  startTelegram,
  type FakeChat,
  type FakeBot,
  type TelegramFake,
} from '../fakes/telegram.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { scratchDir } from '../harness/scratch.js';

export const SECRET_KEY_HEX = '5e'.repeat(32);

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** The one JSON object on stdout; fails the test unless stdout is exactly one JSON line. */
  json<T = Record<string, any>>(): T;
}

export async function runWith(env: NodeJS.ProcessEnv, argv: string[]): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(
    argv,
    { stdout: { write: (s: string) => (stdout += s) }, stderr: { write: (s: string) => (stderr += s) } },
    env,
  );
  return {
    code,
    stdout,
    stderr,
    json<T>() {
      expect(stdout, `stderr: ${stderr}`).toMatch(/^\{.*\}\n$/);
      return JSON.parse(stdout) as T;
    },
  };
}

export interface CliWorld {
  db: TestDatabase;
  telegram: TelegramFake;
  env: NodeJS.ProcessEnv;
  dataDir: string;
  run(...argv: string[]): Promise<CliRun>;
  /** Runs with `--json`, expects exit 0 and returns the object printed. */
  ok<T = Record<string, any>>(...argv: string[]): Promise<T>;
  /** Expects exit 1, an empty stdout and a reason on stderr; returns the reason. */
  refused(...argv: string[]): Promise<string>;
  close(): Promise<void>;
}

export async function cliWorld(
  opts: { bots?: FakeBot[]; chats?: FakeChat[]; env?: NodeJS.ProcessEnv } = {},
): Promise<CliWorld> {
  const [db, telegram] = await Promise.all([
    createTestDatabase(4),
    startTelegram({ bots: opts.bots, chats: opts.chats }),
  ]);
  const dataDir = scratchDir('cli');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    SECRET_KEY: SECRET_KEY_HEX,
    TELEGRAM_API_URL: telegram.url,
    PUBLIC_URL: 'https://capigram.example.com',
    // pixel add asks Meta, Snap and Google about new credentials: nothing answers here unless a test
    // points these at its fakes (the refusal is immediate; the add goes on with a warning).
    META_GRAPH_URL: 'http://127.0.0.1:9',
    SNAPCHAT_API_URL: 'http://127.0.0.1:9',
    GOOGLE_ADS_API_URL: 'http://127.0.0.1:9',
    GOOGLE_OAUTH_URL: 'http://127.0.0.1:9',
    GOOGLE_DATA_MANAGER_URL: 'http://127.0.0.1:9',
    ...opts.env,
  };
  const run = (...argv: string[]) => runWith(env, argv);
  return {
    db,
    telegram,
    env,
    dataDir,
    run,
    async ok<T>(...argv: string[]) {
      const r = await run(...argv, '--json');
      expect(r.code, r.stderr).toBe(0);
      return r.json<T>();
    },
    async refused(...argv: string[]) {
      const r = await run(...argv);
      expect(r.code, `expected a refusal; stdout: ${r.stdout}`).toBe(1);
      // With --json the refusal is also the one error object on stdout; without, stdout stays empty.
      if (argv.includes('--json'))
        expect(r.json<{ error: { message: string } }>().error.message).not.toBe('');
      else expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^error: .+\n$/s);
      return r.stderr;
    },
    async close() {
      await Promise.all([db.drop(), telegram.close()]);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** An account, a site and a bot (the fake's default one, admin of DEFAULT_CHAT), made through the CLI. */
export async function seed(
  w: CliWorld,
): Promise<{ accountId: string; siteId: string; websiteId: string; botId: string }> {
  const { accountId } = await w.ok<{ accountId: string }>('account', 'create', '--name', 'Acme');
  const { siteId, websiteId } = await w.ok<{ siteId: string; websiteId: string }>(
    'site',
    'create',
    '--account',
    accountId,
    '--name',
    'Shop',
    '--domain',
    'shop.example.com',
  );
  const { botId } = await w.ok<{ botId: string }>(
    'bot',
    'add',
    '--account',
    accountId,
    '--token',
    DEFAULT_BOT.token,
  );
  return { accountId, siteId, websiteId, botId };
}

export { DEFAULT_BOT, DEFAULT_CHAT };
