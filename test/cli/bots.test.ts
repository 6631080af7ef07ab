// bot add: getMe, setWebhook with a secret and the updates Capigram needs, the token encrypted.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { FakeBot } from '../fakes/telegram.js';
import { DEFAULT_BOT, cliWorld, runWith, type CliWorld } from './harness.js';

const OTHER_BOT = {
  token: '777111:Other-bot-token-abcdefghijk',
  id: 777111,
  first_name: 'Other',
  username: 'other_test_bot',
};
const TAKEN = (bot: FakeBot) =>
  `error: bot @${bot.username} is already registered by another account; Telegram delivers a bot's updates to one webhook only, so each account needs its own bot\n`;

let w: CliWorld;
let accountId: string;
beforeAll(async () => {
  w = await cliWorld({ bots: [DEFAULT_BOT, OTHER_BOT] });
  ({ accountId } = await w.ok('account', 'create', '--name', 'Bots'));
});
afterAll(async () => {
  await w.close();
});
beforeEach(() => {
  w.telegram.reset();
});

// Telegram delivers a bot's updates to one webhook only, so a bot belongs to one account: a test
// that adds a bot to an account of its own gets a bot of its own, known to the fake Telegram.
let nextBotId = 777200;
function freshBot(): FakeBot {
  const id = nextBotId++;
  const bot = {
    token: `${id}:Fresh-bot-token-abcdefghijk`,
    id,
    first_name: `Bot${id}`,
    username: `bot${id}_test_bot`,
  };
  w.telegram.bots.set(bot.token, bot);
  return bot;
}

const botRow = async (botId: string) =>
  (
    await w.db.pool.query(
      'SELECT telegram_bot_id, username, token_enc, webhook_secret_hash, webhook_url, webhook_set_at FROM bots WHERE id = $1',
      [botId],
    )
  ).rows[0];

describe('bot add', () => {
  it('checks the token, sets the webhook with a secret and chat_member, chat_join_request, my_chat_member; prints {"botId","webhookUrl"}', async () => {
    const out = await w.ok('bot', 'add', '--account', accountId, '--token', DEFAULT_BOT.token);
    expect(Object.keys(out)).toEqual(['botId', 'webhookUrl']);
    expect(out.webhookUrl).toBe(`https://capigram.example.com/backend/telegram/${out.botId}`);

    expect(w.telegram.received.map((r) => r.path)).toEqual([
      `/bot${DEFAULT_BOT.token}/getMe`,
      `/bot${DEFAULT_BOT.token}/setWebhook`,
    ]);
    const hook = w.telegram.webhook(DEFAULT_BOT.token)!;
    expect(hook.url).toBe(out.webhookUrl);
    expect(hook.secret_token).toMatch(/^[A-Za-z0-9_-]{32,256}$/);
    expect(hook.allowed_updates).toEqual(
      expect.arrayContaining(['chat_member', 'chat_join_request', 'my_chat_member']),
    );

    const row = await botRow(out.botId);
    expect(row.telegram_bot_id).toBe(DEFAULT_BOT.id);
    expect(row.username).toBe(DEFAULT_BOT.username);
    expect(row.webhook_url).toBe(out.webhookUrl);
    expect(row.webhook_set_at).toBeInstanceOf(Date);
    // Only the secret's hash is kept: enough to check Telegram's header, useless to forge it.
    expect(row.webhook_secret_hash.equals(createHash('sha256').update(hook.secret_token!).digest())).toBe(
      true,
    );
    expect(row.token_enc).not.toContain(DEFAULT_BOT.token);
    expect(row.token_enc).not.toContain(DEFAULT_BOT.token.split(':')[1]);
  });

  it('--no-webhook checks the token but leaves the webhook alone', async () => {
    const out = await w.ok('bot', 'add', '--account', accountId, '--token', OTHER_BOT.token, '--no-webhook');
    expect(out.webhookUrl).toBe(`https://capigram.example.com/backend/telegram/${out.botId}`);
    expect(w.telegram.calls('getMe')).toHaveLength(1);
    expect(w.telegram.calls('setWebhook')).toHaveLength(0);
    expect(w.telegram.webhook(OTHER_BOT.token)).toBeUndefined();
    expect((await botRow(out.botId)).webhook_set_at).toBeNull();
  });

  it('the human summary says whether the webhook was set', async () => {
    const { accountId: other } = await w.ok('account', 'create', '--name', 'Human');
    const r = await w.run('bot', 'add', '--account', other, '--token', freshBot().token, '--no-webhook');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^Bot added: [0-9a-f-]{36}\n {2}webhook: https:\/\/capigram\.example\.com\/backend\/telegram\/\S+ \(not set: --no-webhook\)\n$/,
    );
  });

  it('warns on stderr when PUBLIC_URL is not https, keeping stdout to the one JSON object', async () => {
    const { accountId: other } = await w.ok('account', 'create', '--name', 'Local');
    const env = { ...w.env, PUBLIC_URL: 'http://localhost:3000' };
    const r = await runWith(env, ['bot', 'add', '--account', other, '--token', freshBot().token, '--json']);
    expect(r.code).toBe(0);
    expect(r.json().webhookUrl).toMatch(/^http:\/\/localhost:3000\/backend\/telegram\//);
    expect(r.stderr).toContain('warning: PUBLIC_URL (http://localhost:3000) is not https');
    expect(r.stderr).toContain('--no-webhook');

    const { accountId: third } = await w.ok('account', 'create', '--name', 'Local2');
    const quiet = await runWith(env, [
      'bot',
      'add',
      '--account',
      third,
      '--token',
      freshBot().token,
      '--no-webhook',
      '--json',
    ]);
    expect(quiet.code).toBe(0);
    expect(quiet.stderr).toBe('');
  });

  it('refuses a malformed token without calling Telegram', async () => {
    expect(await w.refused('bot', 'add', '--account', accountId, '--token', 'not-a-token')).toBe(
      'error: --token: does not look like a Telegram bot token (123456:ABC…)\n',
    );
    expect(w.telegram.received).toHaveLength(0);
  });

  it('refuses a token Telegram does not know, and stores nothing', async () => {
    const before = (await w.db.pool.query('SELECT count(*)::int AS n FROM bots')).rows[0].n;
    const reason = await w.refused(
      'bot',
      'add',
      '--account',
      accountId,
      '--token',
      '123456:Unknown-token-abcdefghijklmn',
    );
    expect(reason).toBe('error: the token could not be checked with Telegram (getMe): invalid token\n');
    expect(reason).not.toContain('Unknown-token');
    expect((await w.db.pool.query('SELECT count(*)::int AS n FROM bots')).rows[0].n).toBe(before);
  });

  it('refuses when Telegram refuses the webhook, and stores nothing', async () => {
    const { accountId: other } = await w.ok('account', 'create', '--name', 'Ftp');
    const bot = freshBot();
    const r = await runWith({ ...w.env, PUBLIC_URL: 'ftp://capigram.example.com' }, [
      'bot',
      'add',
      '--account',
      other,
      '--token',
      bot.token,
    ]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain(
      'error: Telegram refused the webhook ftp://capigram.example.com/backend/telegram/',
    );
    expect(r.stderr).toContain('Bad Request: invalid webhook URL specified');
    expect(
      (await w.db.pool.query('SELECT count(*)::int AS n FROM bots WHERE account_id = $1', [other])).rows[0].n,
    ).toBe(0);
    expect(w.telegram.webhook(bot.token)).toBeUndefined();
  });

  it('refuses when Telegram is unreachable', async () => {
    const r = await runWith({ ...w.env, TELEGRAM_API_URL: 'http://127.0.0.1:1' }, [
      'bot',
      'add',
      '--account',
      accountId,
      '--token',
      DEFAULT_BOT.token,
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'error: the token could not be checked with Telegram (getMe): Telegram unreachable\n',
    );
  });

  it('refuses an unknown account before calling Telegram, and a bot registered twice', async () => {
    expect(
      await w.refused(
        'bot',
        'add',
        '--account',
        '00000000-0000-4000-8000-000000000001',
        '--token',
        DEFAULT_BOT.token,
      ),
    ).toBe('error: account 00000000-0000-4000-8000-000000000001 does not exist\n');
    expect(w.telegram.received).toHaveLength(0);
    const { accountId: other } = await w.ok('account', 'create', '--name', 'Twice');
    const bot = freshBot();
    await w.ok('bot', 'add', '--account', other, '--token', bot.token, '--no-webhook');
    expect(await w.refused('bot', 'add', '--account', other, '--token', bot.token, '--no-webhook')).toBe(
      `error: bot @${bot.username} is already registered for this account\n`,
    );
  });

  // Telegram keeps one webhook per bot: a second setWebhook would re-point the live bot to a URL
  // and secret never stored, and every update after it would fail the secret check.
  it('refuses a bot already registered with its webhook without touching that webhook', async () => {
    const { accountId: other } = await w.ok('account', 'create', '--name', 'Live');
    const bot = freshBot();
    await w.ok('bot', 'add', '--account', other, '--token', bot.token);
    const live = { ...w.telegram.webhook(bot.token)! };
    expect(w.telegram.calls('setWebhook')).toHaveLength(1);

    expect(await w.refused('bot', 'add', '--account', other, '--token', bot.token)).toBe(
      `error: bot @${bot.username} is already registered for this account\n`,
    );
    expect(w.telegram.calls('setWebhook')).toHaveLength(1);
    expect(w.telegram.webhook(bot.token)).toEqual(live);
    const { rows } = await w.db.pool.query(
      'SELECT webhook_url, webhook_secret_hash FROM bots WHERE account_id = $1',
      [other],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0].webhook_url).toBe(live.url);
    expect(rows[0].webhook_secret_hash.equals(createHash('sha256').update(live.secret_token!).digest())).toBe(
      true,
    );
  });

  it('of two concurrent adds of one bot, one is stored and sets the webhook; the other is refused before setWebhook', async () => {
    const { accountId: other } = await w.ok('account', 'create', '--name', 'Race');
    const bot = freshBot();
    // Slow answers make both pass getMe before either inserts, and keep the winner's transaction
    // open during its setWebhook while the other reaches the insert.
    w.telegram.latencyMs = 150;
    const runs = await Promise.all(
      [1, 2].map(() => w.run('bot', 'add', '--account', other, '--token', bot.token, '--json')),
    );
    expect(runs.map((r) => r.code).sort()).toEqual([0, 1]);
    const loser = runs.find((r) => r.code === 1)!;
    expect(loser.stderr).toBe(`error: bot @${bot.username} is already registered for this account\n`);
    const winner = runs.find((r) => r.code === 0)!.json<{ botId: string; webhookUrl: string }>();

    expect(w.telegram.calls('getMe')).toHaveLength(2);
    expect(w.telegram.calls('setWebhook')).toHaveLength(1);
    const hook = w.telegram.webhook(bot.token)!;
    expect(hook.url).toBe(winner.webhookUrl);
    const row = await botRow(winner.botId);
    expect(row.webhook_secret_hash.equals(createHash('sha256').update(hook.secret_token!).digest())).toBe(
      true,
    );
  });

  // Telegram delivers a bot's updates to one webhook only: a second account's setWebhook would
  // take them from the first account, whose stored secret would then match nothing.
  it('refuses a bot registered by another account, leaving that account its webhook and secret', async () => {
    const bot = freshBot();
    const { accountId: owner } = await w.ok('account', 'create', '--name', 'Owner');
    const { accountId: second } = await w.ok('account', 'create', '--name', 'Second');
    const { botId } = await w.ok('bot', 'add', '--account', owner, '--token', bot.token);
    const live = { ...w.telegram.webhook(bot.token)! };
    expect(w.telegram.calls('setWebhook')).toHaveLength(1);

    const r = await w.run('bot', 'add', '--account', second, '--token', bot.token);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(TAKEN(bot));
    // --no-webhook does not make it acceptable: the bot would still be another account's.
    expect(await w.refused('bot', 'add', '--account', second, '--token', bot.token, '--no-webhook')).toBe(
      TAKEN(bot),
    );

    expect(w.telegram.calls('setWebhook')).toHaveLength(1);
    expect(w.telegram.webhook(bot.token)).toEqual(live);
    const { rows } = await w.db.pool.query(
      'SELECT id, account_id, webhook_url, webhook_secret_hash FROM bots WHERE telegram_bot_id = $1',
      [bot.id],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: botId, account_id: owner, webhook_url: live.url });
    expect(rows[0].webhook_secret_hash.equals(createHash('sha256').update(live.secret_token!).digest())).toBe(
      true,
    );
  });

  it('of two concurrent adds of one bot for two accounts, one is stored and sets the webhook; the other is refused', async () => {
    const bot = freshBot();
    const { accountId: first } = await w.ok('account', 'create', '--name', 'RaceA');
    const { accountId: second } = await w.ok('account', 'create', '--name', 'RaceB');
    // As above: both pass getMe before either inserts, and the winner's transaction stays open
    // during its setWebhook while the other reaches the check.
    w.telegram.latencyMs = 150;
    const accounts = [first, second];
    const runs = await Promise.all(
      accounts.map((account) => w.run('bot', 'add', '--account', account, '--token', bot.token, '--json')),
    );
    expect(runs.map((r) => r.code).sort()).toEqual([0, 1]);
    const loser = runs.find((r) => r.code === 1)!;
    expect(loser.json<{ error: { message: string } }>().error.message).toBe(
      TAKEN(bot).slice('error: '.length, -1),
    );
    expect(loser.stderr).toBe(TAKEN(bot));
    const winnerAccount = accounts[runs.findIndex((r) => r.code === 0)];
    const winner = runs.find((r) => r.code === 0)!.json<{ botId: string; webhookUrl: string }>();

    expect(w.telegram.calls('getMe')).toHaveLength(2);
    expect(w.telegram.calls('setWebhook')).toHaveLength(1);
    const hook = w.telegram.webhook(bot.token)!;
    expect(hook.url).toBe(winner.webhookUrl);
    const { rows } = await w.db.pool.query(
      'SELECT id, account_id, webhook_secret_hash FROM bots WHERE telegram_bot_id = $1',
      [bot.id],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: winner.botId, account_id: winnerAccount });
    expect(rows[0].webhook_secret_hash.equals(createHash('sha256').update(hook.secret_token!).digest())).toBe(
      true,
    );
  });
});
