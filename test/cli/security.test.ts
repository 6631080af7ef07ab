// Secrets at rest: no API key, bot token, webhook secret or platform token in clear anywhere in the
// database; sealed tokens open with SECRET_KEY and with nothing else.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox, parseSecretKey } from '../../backend/crypto/secret-box.js';
import { DEFAULT_BOT, SECRET_KEY_HEX, cliWorld, runWith, seed, type CliWorld } from './harness.js';

// The bot added without SECRET_KEY belongs to an account of its own, so it is a bot of its own:
// a bot belongs to one account (Telegram delivers its updates to one webhook only).
const GEN_BOT = {
  token: '777444:Generated-key-bot-token-abcd',
  id: 777444,
  first_name: 'Gen',
  username: 'gen_key_test_bot',
};

let w: CliWorld;
const secrets: string[] = [];
let botId: string;
let siteId: string;

beforeAll(async () => {
  w = await cliWorld({ bots: [DEFAULT_BOT, GEN_BOT] });
  const s = await seed(w);
  botId = s.botId;
  siteId = s.siteId;
  secrets.push(
    DEFAULT_BOT.token,
    DEFAULT_BOT.token.split(':')[1]!,
    w.telegram.webhook(DEFAULT_BOT.token)!.secret_token!,
  );
  for (let i = 0; i < 3; i++) {
    const k = await w.ok<{ apiKey: string }>(
      'key',
      'create',
      '--account',
      s.accountId,
      ...(i === 1 ? ['--site', s.siteId] : []),
    );
    secrets.push(k.apiKey, k.apiKey.slice(17));
  }
  const platformTokens = {
    meta: 'EAAGsecret-meta-token-000111',
    tiktok: 'secret-tiktok-token-000222',
    snap: 'secret-snap-token-000333',
    dev: 'secret-google-dev-000444',
    oauth: 'ya29.secret-google-oauth-000555',
  };
  await w.ok(
    'pixel',
    'add',
    '--site',
    s.siteId,
    '--platform',
    'meta',
    '--pixel-id',
    '1234567890',
    '--access-token',
    platformTokens.meta,
  );
  await w.ok(
    'pixel',
    'add',
    '--site',
    s.siteId,
    '--platform',
    'tiktok',
    '--pixel-code',
    'CTIK01',
    '--access-token',
    platformTokens.tiktok,
  );
  await w.ok(
    'pixel',
    'add',
    '--site',
    s.siteId,
    '--platform',
    'snapchat',
    '--pixel-id',
    'snap01',
    '--access-token',
    platformTokens.snap,
  );
  await w.ok(
    'pixel',
    'add',
    '--site',
    s.siteId,
    '--platform',
    'google',
    '--customer-id',
    '1234567890',
    '--conversion-action',
    '77',
    '--api',
    'ads',
    '--developer-token',
    platformTokens.dev,
    '--oauth-token',
    platformTokens.oauth,
  );
  secrets.push(...Object.values(platformTokens));
});
afterAll(async () => {
  await w.close();
});

/** Every row of every table outside the system schemas, as JSON text (bytea shows as \x hex). */
async function dumpDatabase(): Promise<string> {
  const { rows: tables } = await w.db.pool.query<{ schema: string; name: string }>(
    `SELECT table_schema AS schema, table_name AS name FROM information_schema.tables
     WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`,
  );
  expect(tables.map((t) => t.name)).toEqual(
    expect.arrayContaining(['api_keys', 'bots', 'pixels', 'accounts', 'sites']),
  );
  let dump = '';
  for (const t of tables) {
    const { rows } = await w.db.pool.query(
      `SELECT row_to_json(x)::text AS j FROM "${t.schema}"."${t.name}" x`,
    );
    dump += `${rows.map((r) => r.j).join('\n')}\n`;
  }
  return dump;
}

describe('secrets at rest', () => {
  it('no secret appears in any column of any table, in clear, hex or base64', async () => {
    const dump = await dumpDatabase();
    expect(dump).toContain(siteId); // the dump really holds the data
    expect(secrets.length).toBeGreaterThanOrEqual(14);
    for (const secret of secrets) {
      for (const form of [
        secret,
        Buffer.from(secret).toString('hex'),
        Buffer.from(secret).toString('base64'),
        Buffer.from(secret).toString('base64url'),
      ]) {
        expect(dump.includes(form), `found ${secret.slice(0, 6)}… as ${form.slice(0, 10)}…`).toBe(false);
      }
    }
  });

  it('the bot token opens with SECRET_KEY and fails with any other key', async () => {
    const { rows } = await w.db.pool.query<{ token_enc: string }>(
      'SELECT token_enc FROM bots WHERE id = $1',
      [botId],
    );
    const sealed = rows[0]!.token_enc;
    expect(createSecretBox(parseSecretKey(SECRET_KEY_HEX)).open(sealed)).toBe(DEFAULT_BOT.token);
    expect(() => createSecretBox(parseSecretKey('a7'.repeat(32))).open(sealed)).toThrow();
  });

  it('pixel credentials open with SECRET_KEY and fail with any other key', async () => {
    const { rows } = await w.db.pool.query<{ secrets_enc: string }>(
      `SELECT secrets_enc FROM pixels WHERE platform = 'meta' AND site_id = $1`,
      [siteId],
    );
    const sealed = rows[0]!.secrets_enc;
    expect(JSON.parse(createSecretBox(parseSecretKey(SECRET_KEY_HEX)).open(sealed))).toEqual({
      accessToken: 'EAAGsecret-meta-token-000111',
    });
    expect(() => createSecretBox(parseSecretKey('b8'.repeat(32))).open(sealed)).toThrow();
  });

  it('without SECRET_KEY a key is generated into DATA_DIR and used to seal tokens', async () => {
    const { SECRET_KEY: _, ...env } = w.env;
    const dataDir = `${w.dataDir}/generated`;
    const { accountId } = (
      await runWith({ ...env, DATA_DIR: dataDir }, ['account', 'create', '--name', 'Gen', '--json'])
    ).json<{ accountId: string }>();
    const r = await runWith({ ...env, DATA_DIR: dataDir }, [
      'bot',
      'add',
      '--account',
      accountId,
      '--token',
      GEN_BOT.token,
      '--no-webhook',
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const generated = readFileSync(join(dataDir, 'secret-key'), 'utf8').trim();
    expect(generated).toMatch(/^[0-9a-f]{64}$/);
    const { rows } = await w.db.pool.query<{ token_enc: string }>(
      'SELECT token_enc FROM bots WHERE id = $1',
      [r.json().botId],
    );
    expect(createSecretBox(parseSecretKey(generated)).open(rows[0]!.token_enc)).toBe(GEN_BOT.token);
    expect(() => createSecretBox(parseSecretKey(SECRET_KEY_HEX)).open(rows[0]!.token_enc)).toThrow();
  });
});
