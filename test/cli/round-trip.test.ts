// The operator's first steps, end to end through the CLI: account → site → bot → channel → pixels
// → key, each printing the JSON of the contract, against the fake Telegram.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEFAULT_BOT, DEFAULT_CHAT, cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
beforeAll(async () => {
  w = await cliWorld();
});
afterAll(async () => {
  await w.close();
});

const ID = expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);

it('account → site → bot → channel → pixel (each platform) → key', async () => {
  const account = await w.ok('account', 'create', '--name', 'Acme');
  expect(account).toEqual({ accountId: ID });

  const site = await w.ok(
    'site',
    'create',
    '--account',
    account.accountId,
    '--name',
    'Shop',
    '--domain',
    'shop.example.com',
    '--domain',
    'example.com',
    '--url',
    'https://shop.example.com',
  );
  expect(site).toEqual({ siteId: ID, websiteId: expect.stringMatching(/^ws_/) });

  const bot = await w.ok('bot', 'add', '--account', account.accountId, '--token', DEFAULT_BOT.token);
  expect(bot).toEqual({
    botId: ID,
    webhookUrl: `https://capigram.example.com/backend/telegram/${bot.botId}`,
  });
  const [setWebhook] = w.telegram.calls('setWebhook');
  expect(setWebhook).toMatchObject({
    url: bot.webhookUrl,
    secret_token: expect.stringMatching(/^[A-Za-z0-9_-]+$/),
  });
  expect(setWebhook!.allowed_updates).toEqual(
    expect.arrayContaining(['chat_member', 'chat_join_request', 'my_chat_member']),
  );

  const channel = await w.ok(
    'channel',
    'add',
    '--site',
    site.siteId,
    '--bot',
    bot.botId,
    '--telegram-channel-id',
    String(DEFAULT_CHAT.id),
    '--title',
    'Main',
    '--default',
  );
  expect(channel).toEqual({ channelId: ID });
  const listed = await w.ok('channel', 'list', '--site', site.siteId);
  expect(listed.channels).toEqual([
    expect.objectContaining({
      channelId: channel.channelId,
      telegramChannelId: String(DEFAULT_CHAT.id),
      title: 'Main',
      eventType: 'Subscribe',
      botIsAdmin: true,
      poolSize: 0,
    }),
  ]);

  const pixels = [
    [
      '--platform',
      'meta',
      '--pixel-id',
      '1234567890',
      '--access-token',
      'EAAmeta-token-0001',
      '--test-event-code',
      'TEST1',
    ],
    ['--platform', 'tiktok', '--pixel-code', 'CTIKTOK01', '--access-token', 'tiktok-token-0001'],
    ['--platform', 'snapchat', '--pixel-id', 'snap-pixel-01', '--access-token', 'snap-token-0001'],
    [
      '--platform',
      'google',
      '--customer-id',
      '1234567890',
      '--conversion-action',
      '555',
      '--api',
      'ads',
      '--developer-token',
      'google-dev-0001',
      '--oauth-token',
      'google-oauth-0001',
    ],
  ];
  for (const p of pixels)
    expect(await w.ok('pixel', 'add', '--site', site.siteId, ...p)).toEqual({ pixelId: ID });
  const { rows } = await w.db.pool.query(
    'SELECT platform FROM pixels WHERE site_id = $1 AND active ORDER BY created_at',
    [site.siteId],
  );
  expect(rows.map((r) => r.platform)).toEqual(['meta', 'tiktok', 'snapchat', 'google']);

  const key = await w.ok('key', 'create', '--account', account.accountId, '--name', 'backend');
  expect(key).toEqual({ keyId: ID, apiKey: expect.stringMatching(/^cgk_/) });
  expect(await w.ok('key', 'list', '--account', account.accountId)).toEqual({
    keys: [
      { keyId: key.keyId, name: 'backend', siteId: null, createdAt: expect.any(String), revokedAt: null },
    ],
  });
  expect(await w.ok('key', 'revoke', '--key', key.keyId)).toEqual({ keyId: key.keyId, revoked: true });
  expect((await w.ok('key', 'list', '--account', account.accountId)).keys[0].revokedAt).toEqual(
    expect.any(String),
  );
});
