// What an operator needs to find their way back: account list, site list, bot list; and the two
// bot commands a bot added with --no-webhook (or moved to a new PUBLIC_URL) needs: bot webhook,
// bot remove.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestApp } from '../harness/app.js';
import { DEFAULT_BOT, DEFAULT_CHAT, cliWorld, runWith, type CliWorld } from './harness.js';

const SECOND_BOT = {
  token: '778100:Second-bot-token-abcdefghijk',
  id: 778100,
  first_name: 'Second',
  username: 'second_test_bot',
};
const READD_BOT = {
  token: '778300:Readd-bot-token-abcdefghijk',
  id: 778300,
  first_name: 'Readd',
  username: 'readd_test_bot',
};
const SECOND_CHAT = {
  id: -1002000000777,
  title: 'R chat',
  type: 'channel' as const,
  admins: { [SECOND_BOT.id]: { can_invite_users: true }, [READD_BOT.id]: { can_invite_users: true } },
};

let w: CliWorld;
let acme: { accountId: string; siteId: string; websiteId: string; botId: string };
let other: { accountId: string; siteId: string };

beforeAll(async () => {
  w = await cliWorld({ bots: [DEFAULT_BOT, SECOND_BOT], chats: [DEFAULT_CHAT, SECOND_CHAT] });
  const { accountId } = await w.ok('account', 'create', '--name', 'Acme');
  const site = await w.ok(
    'site',
    'create',
    '--account',
    accountId,
    '--name',
    'Shop',
    '--domain',
    'shop.example.com',
    '--domain',
    'www.shop.example.com',
  );
  const { botId } = await w.ok(
    'bot',
    'add',
    '--account',
    accountId,
    '--token',
    DEFAULT_BOT.token,
    '--no-webhook',
  );
  acme = { accountId, siteId: site.siteId, websiteId: site.websiteId, botId };
  const o = await w.ok('account', 'create', '--name', 'Other');
  const os = await w.ok(
    'site',
    'create',
    '--account',
    o.accountId,
    '--name',
    'Other shop',
    '--domain',
    'other.example.com',
  );
  other = { accountId: o.accountId, siteId: os.siteId };
});
afterAll(async () => {
  await w.close();
});
beforeEach(() => {
  w.telegram.reset();
});

const secretHash = async (botId: string): Promise<Buffer> =>
  (
    await w.db.pool.query<{ webhook_secret_hash: Buffer }>(
      'SELECT webhook_secret_hash FROM bots WHERE id = $1',
      [botId],
    )
  ).rows[0]!.webhook_secret_hash;

describe('account list', () => {
  it('lists every account with its sites and bots, oldest first', async () => {
    const out = await w.ok('account', 'list');
    expect(out.accounts).toEqual([
      { accountId: acme.accountId, name: 'Acme', createdAt: expect.any(String), sites: 1, bots: 1 },
      { accountId: other.accountId, name: 'Other', createdAt: expect.any(String), sites: 1, bots: 0 },
    ]);
    const human = await w.run('account', 'list');
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^accountId\s+name\s+sites\s+bots\s+created\n/);
    expect(human.stdout).toContain(acme.accountId);
  });
});

describe('site list', () => {
  it("lists one account's sites with their public websiteId, or every site", async () => {
    const mine = await w.ok('site', 'list', '--account', acme.accountId);
    expect(mine.sites).toEqual([
      {
        siteId: acme.siteId,
        websiteId: acme.websiteId,
        accountId: acme.accountId,
        name: 'Shop',
        url: null,
        domains: ['shop.example.com', 'www.shop.example.com'],
        defaultChannelId: null,
        channels: 0,
        activePixels: 0,
        createdAt: expect.any(String),
        // Install checks: no visit yet (the table says "waiting for the first visit").
        firstVisitAt: null,
        lastVisitAt: null,
        refusedHosts: [],
      },
    ]);
    const human = await w.run('site', 'list', '--account', acme.accountId);
    expect(human.stdout).toContain('waiting for the first visit');
    const all = await w.ok('site', 'list');
    expect(all.sites.map((s: { siteId: string }) => s.siteId)).toEqual([acme.siteId, other.siteId]);
  });

  it('refuses an unknown or malformed account', async () => {
    expect(await w.refused('site', 'list', '--account', '00000000-0000-4000-8000-000000000000')).toContain(
      'does not exist',
    );
    expect(await w.refused('site', 'list', '--account', 'nope')).toContain('not a valid id');
  });
});

describe('bot webhook', () => {
  it('sets the webhook of a bot added with --no-webhook, with a fresh secret whose hash is stored', async () => {
    expect((await w.ok('bot', 'list', '--account', acme.accountId)).bots[0].webhookSetAt).toBeNull();
    const out = await w.ok('bot', 'webhook', '--bot', acme.botId);
    expect(out).toEqual({
      botId: acme.botId,
      webhookUrl: `https://capigram.example.com/backend/telegram/${acme.botId}`,
    });
    const hook = w.telegram.webhook(DEFAULT_BOT.token)!;
    expect(hook.url).toBe(out.webhookUrl);
    expect(hook.allowed_updates).toEqual(
      expect.arrayContaining(['chat_member', 'chat_join_request', 'my_chat_member']),
    );
    expect(
      (await secretHash(acme.botId)).equals(createHash('sha256').update(hook.secret_token!).digest()),
    ).toBe(true);
    const listed = (await w.ok('bot', 'list', '--account', acme.accountId)).bots[0];
    expect(listed).toMatchObject({
      botId: acme.botId,
      username: DEFAULT_BOT.username,
      telegramBotId: DEFAULT_BOT.id,
      webhookUrl: out.webhookUrl,
      channels: 0,
    });
    expect(listed.webhookSetAt).toEqual(expect.any(String));
    expect(JSON.stringify(listed)).not.toContain(DEFAULT_BOT.token.split(':')[1]);
  });

  it('sets it again at a new PUBLIC_URL with a new secret; the old one stops working', async () => {
    const before = await secretHash(acme.botId);
    const r = await runWith({ ...w.env, PUBLIC_URL: 'https://track.acme.example' }, [
      'bot',
      'webhook',
      '--bot',
      acme.botId,
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.json().webhookUrl).toBe(`https://track.acme.example/backend/telegram/${acme.botId}`);
    expect(w.telegram.webhook(DEFAULT_BOT.token)!.url).toBe(
      `https://track.acme.example/backend/telegram/${acme.botId}`,
    );
    expect((await secretHash(acme.botId)).equals(before)).toBe(false);
  });

  it('keeps the stored secret when Telegram refuses, and says why', async () => {
    const before = await secretHash(acme.botId);
    w.telegram.failNext(1, { type: 'invalidToken' });
    expect(await w.refused('bot', 'webhook', '--bot', acme.botId)).toContain('Telegram refused the webhook');
    expect((await secretHash(acme.botId)).equals(before)).toBe(true);
  });

  it('refuses an unknown bot', async () => {
    expect(await w.refused('bot', 'webhook', '--bot', '00000000-0000-4000-8000-000000000000')).toContain(
      'does not exist',
    );
  });
});

describe('bot remove', () => {
  it("deletes the webhook, deactivates the bot's channels, keeps their history, and lets the bot be added again", async () => {
    const { accountId } = await w.ok('account', 'create', '--name', 'Removal');
    const { siteId } = await w.ok(
      'site',
      'create',
      '--account',
      accountId,
      '--name',
      'R',
      '--domain',
      'r.example.com',
    );
    const { botId } = await w.ok('bot', 'add', '--account', accountId, '--token', SECOND_BOT.token);
    const { channelId } = await w.ok(
      'channel',
      'add',
      '--site',
      siteId,
      '--bot',
      botId,
      '--telegram-channel-id',
      String(SECOND_CHAT.id),
      '--title',
      'R',
      '--default',
    );
    const secret = w.telegram.webhook(SECOND_BOT.token)!.secret_token!;
    const app = await startTestApp(w.db.pool);
    const post = () =>
      fetch(`${app.url}/backend/telegram/${botId}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret },
        body: JSON.stringify({ update_id: 1 }),
      });

    try {
      expect((await post()).status).toBe(200);
      const out = await w.ok('bot', 'remove', '--bot', botId);
      expect(out).toEqual({ botId, removed: true, channelsDeactivated: 1, webhookDeleted: true });
      // Whatever Telegram still sends for it is refused, as for a bot that never existed.
      expect((await post()).status).toBe(401);
    } finally {
      await app.stop();
    }
    expect(w.telegram.webhook(SECOND_BOT.token)).toBeUndefined();
    expect((await w.ok('channel', 'list', '--site', siteId)).channels).toEqual([]);
    expect((await w.db.pool.query('SELECT active FROM channels WHERE id = $1', [channelId])).rows).toEqual([
      { active: false },
    ]);
    expect((await w.ok('bot', 'list', '--account', accountId)).bots).toEqual([]);
    expect(await w.refused('bot', 'remove', '--bot', botId)).toContain('does not exist (or was removed)');
    expect(await w.refused('bot', 'webhook', '--bot', botId)).toContain('does not exist (or was removed)');

    // The same bot can be added again, to this account or (now that nobody uses it) another.
    const again = await w.ok(
      'bot',
      'add',
      '--account',
      accountId,
      '--token',
      SECOND_BOT.token,
      '--no-webhook',
    );
    expect(again.botId).not.toBe(botId);
    expect(
      (await w.ok('bot', 'list', '--account', accountId)).bots.map((b: { botId: string }) => b.botId),
    ).toEqual([again.botId]);
  });

  it("the bot added again (or a new one) takes back the removed bot's chats on the same site, and a default channel", async () => {
    const { accountId } = await w.ok('account', 'create', '--name', 'Readd');
    const { siteId, websiteId } = await w.ok(
      'site',
      'create',
      '--account',
      accountId,
      '--name',
      'RA',
      '--domain',
      'ra.example.com',
    );
    const bot = READD_BOT;
    w.telegram.bots.set(bot.token, bot);
    const { botId } = await w.ok('bot', 'add', '--account', accountId, '--token', bot.token, '--no-webhook');
    const old = await w.ok(
      'channel',
      'add',
      '--site',
      siteId,
      '--bot',
      botId,
      '--telegram-channel-id',
      String(SECOND_CHAT.id),
      '--title',
      'R',
    );
    expect((await w.ok('site', 'list', '--account', accountId)).sites[0].defaultChannelId).toBe(
      old.channelId,
    );
    await w.ok('bot', 'remove', '--bot', botId);
    // The site no longer names a channel that hands out no links.
    expect((await w.ok('site', 'list', '--account', accountId)).sites[0].defaultChannelId).toBeNull();

    const again = await w.ok('bot', 'add', '--account', accountId, '--token', bot.token, '--no-webhook');
    const readded = await w.ok(
      'channel',
      'add',
      '--site',
      siteId,
      '--bot',
      again.botId,
      '--telegram-channel-id',
      String(SECOND_CHAT.id),
      '--title',
      'R again',
    );
    expect(readded.channelId).not.toBe(old.channelId);
    expect(
      (await w.ok('channel', 'list', '--site', siteId)).channels.map(
        (c: { channelId: string }) => c.channelId,
      ),
    ).toEqual([readded.channelId]);
    expect((await w.ok('site', 'list', '--account', accountId)).sites[0]).toMatchObject({
      websiteId,
      defaultChannelId: readded.channelId,
    });
    // The old channel's row (and its history) stays, inactive.
    expect(
      (await w.db.pool.query('SELECT active FROM channels WHERE id = $1', [old.channelId])).rows,
    ).toEqual([{ active: false }]);
    // Still one active channel per chat on a site.
    expect(
      await w.refused(
        'channel',
        'add',
        '--site',
        siteId,
        '--bot',
        again.botId,
        '--telegram-channel-id',
        String(SECOND_CHAT.id),
        '--title',
        'Twice',
      ),
    ).toContain('already');
    await w.ok('bot', 'remove', '--bot', again.botId);
  });

  it('removes the bot even when Telegram cannot be told, and warns', async () => {
    const { accountId } = await w.ok('account', 'create', '--name', 'Revoked');
    const bot = {
      token: '778200:Revoked-bot-token-abcdefghijk',
      id: 778200,
      first_name: 'Revoked',
      username: 'revoked_test_bot',
    };
    w.telegram.bots.set(bot.token, bot);
    const { botId } = await w.ok('bot', 'add', '--account', accountId, '--token', bot.token, '--no-webhook');
    w.telegram.failNext(1, { type: 'invalidToken' });
    const r = await w.run('bot', 'remove', '--bot', botId, '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(r.json()).toMatchObject({ botId, removed: true, webhookDeleted: false });
    expect(r.stderr).toMatch(
      /^warning: Telegram could not be told to stop sending updates \(deleteWebhook\): invalid token; updates it still sends are refused\n$/,
    );
  });
});

describe('human tables', () => {
  it('print control characters in names as escapes: no terminal sequence reaches the screen, one row per line', async () => {
    const name = 'Evil\u001b[2J\u001b]0;owned\u0007\nsecond line\ttab\u0085';
    const { accountId } = await w.ok('account', 'create', '--name', name);
    const human = await w.run('account', 'list');
    expect(human.code).toBe(0);
    expect(human.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    const row = human.stdout.split('\n').find((l) => l.includes(accountId));
    expect(row).toContain('Evil\\x1b[2J\\x1b]0;owned\\x07\\nsecond line\\ttab\\x85');
    // --json keeps the name as stored.
    expect(
      (await w.ok('account', 'list')).accounts.find((a: { accountId: string }) => a.accountId === accountId)
        .name,
    ).toBe(name);
  });
});
