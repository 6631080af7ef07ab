// bot add|update --forward-url/--forward-secret and --no-forward: what is stored (the secret
// sealed), what Telegram is asked for (every update type while forwarding), and what is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox } from '../../backend/crypto/secret-box.js';
import { DEFAULT_BOT, SECRET_KEY_HEX, cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
let accountId: string;
beforeAll(async () => {
  w = await cliWorld();
  ({ accountId } = await w.ok('account', 'create', '--name', 'Forwarding'));
});
afterAll(async () => {
  await w.close();
});

const box = createSecretBox(Buffer.from(SECRET_KEY_HEX, 'hex'));
const row = async (botId: string) =>
  (
    await w.db.pool.query<{ forward_url: string | null; forward_secret_enc: string | null }>(
      'SELECT forward_url, forward_secret_enc FROM bots WHERE id = $1',
      [botId],
    )
  ).rows[0]!;
const OWN = ['message', 'chat_member', 'chat_join_request', 'my_chat_member'];

describe('bot add --forward-url', () => {
  it('refuses a secret without a URL, a URL that is not http(s), and a secret Telegram would not allow', async () => {
    expect(
      await w.refused(
        'bot',
        'add',
        '--account',
        accountId,
        '--token',
        DEFAULT_BOT.token,
        '--forward-secret',
        'abc',
      ),
    ).toMatch(/--forward-secret needs --forward-url/);
    expect(
      await w.refused(
        'bot',
        'add',
        '--account',
        accountId,
        '--token',
        DEFAULT_BOT.token,
        '--forward-url',
        'ftp://bot.example.com/x',
      ),
    ).toMatch(/http:\/\/ or https:\/\//);
    expect(
      await w.refused(
        'bot',
        'add',
        '--account',
        accountId,
        '--token',
        DEFAULT_BOT.token,
        '--forward-url',
        'https://bot.example.com/x',
        '--forward-secret',
        'has space',
      ),
    ).toMatch(/1–256 characters/);
    expect(w.telegram.calls('setWebhook')).toEqual([]);
  });

  it('stores the URL and the secret sealed, and asks Telegram for every update type', async () => {
    const out = await w.ok(
      'bot',
      'add',
      '--account',
      accountId,
      '--token',
      DEFAULT_BOT.token,
      '--forward-url',
      'https://bot.example.com/hook',
      '--forward-secret',
      'backend-Secret_1',
    );
    const r = await row(out.botId);
    expect(r.forward_url).toBe('https://bot.example.com/hook');
    expect(r.forward_secret_enc).not.toContain('backend-Secret_1');
    expect(box.open(r.forward_secret_enc!)).toBe('backend-Secret_1');
    expect(w.telegram.webhook(DEFAULT_BOT.token)!.allowed_updates).toEqual(
      expect.arrayContaining([...OWN, 'message', 'callback_query', 'pre_checkout_query']),
    );
    const { bots } = await w.ok<{ bots: { botId: string; forwardUrl: string | null }[] }>(
      'bot',
      'list',
      '--account',
      accountId,
    );
    expect(bots.find((b) => b.botId === out.botId)?.forwardUrl).toBe('https://bot.example.com/hook');

    // bot update: a new URL keeps the secret; --no-forward clears both and narrows the webhook again.
    const moved = await w.ok(
      'bot',
      'update',
      '--bot',
      out.botId,
      '--forward-url',
      'https://bot2.example.com/hook',
    );
    expect(moved).toEqual({ botId: out.botId, forwardUrl: 'https://bot2.example.com/hook' });
    expect(box.open((await row(out.botId)).forward_secret_enc!)).toBe('backend-Secret_1');
    const hooksBefore = w.telegram.calls('setWebhook').length;
    const off = await w.ok('bot', 'update', '--bot', out.botId, '--no-forward');
    expect(off).toEqual({
      botId: out.botId,
      forwardUrl: null,
      webhookUrl: `https://capigram.example.com/backend/telegram/${out.botId}`,
    });
    expect(w.telegram.calls('setWebhook')).toHaveLength(hooksBefore + 1);
    expect(w.telegram.webhook(DEFAULT_BOT.token)!.allowed_updates).toEqual(OWN);
    expect(await row(out.botId)).toEqual({ forward_url: null, forward_secret_enc: null });

    // On again: the webhook asks for everything again, and the answer says it was set.
    const on = await w.ok(
      'bot',
      'update',
      '--bot',
      out.botId,
      '--forward-url',
      'https://bot.example.com/hook',
      '--forward-secret',
      'second_secret',
    );
    expect(on.webhookUrl).toBe(`https://capigram.example.com/backend/telegram/${out.botId}`);
    expect(w.telegram.webhook(DEFAULT_BOT.token)!.allowed_updates).toContain('message');
    expect(box.open((await row(out.botId)).forward_secret_enc!)).toBe('second_secret');

    // Refusals of bot update.
    expect(await w.refused('bot', 'update', '--bot', out.botId)).toMatch(/nothing to change/);
    expect(
      await w.refused(
        'bot',
        'update',
        '--bot',
        out.botId,
        '--no-forward',
        '--forward-url',
        'https://x.example.com/',
      ),
    ).toMatch(/exclude each other/);
    expect(
      await w.refused('bot', 'update', '--bot', '8f1f5a55-2d2a-4a70-9a37-6f1b2f9d6e01', '--no-forward'),
    ).toMatch(/does not exist/);
    await w.ok('bot', 'update', '--bot', out.botId, '--no-forward');
    expect(await w.refused('bot', 'update', '--bot', out.botId, '--forward-secret', 'only_secret')).toMatch(
      /forwards nowhere yet/,
    );
    expect((await row(out.botId)).forward_secret_enc).toBeNull();
  });
});
