// entry add and entry list: every flag reaches the row; refusals name what is wrong.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_BOT, DEFAULT_CHAT, cliWorld, seed, type CliWorld } from './harness.js';

let w: CliWorld;
let s: Awaited<ReturnType<typeof seed>>;
let channelId: string;
beforeAll(async () => {
  w = await cliWorld({ bots: [DEFAULT_BOT], chats: [DEFAULT_CHAT] });
  s = await seed(w);
  ({ channelId } = await w.ok(
    'channel',
    'add',
    '--site',
    s.siteId,
    '--bot',
    s.botId,
    '--telegram-channel-id',
    String(DEFAULT_CHAT.id),
    '--title',
    'Main',
  ));
});
afterAll(async () => {
  await w.close();
});

const entryRow = async (id: string) =>
  (await w.db.pool.query('SELECT * FROM entries WHERE id = $1', [id])).rows[0];

describe('entry add', () => {
  it('prints {"entryId","kind"}: a start entry by default, sending Lead, the site’s default as its first', async () => {
    const out = await w.ok(
      'entry',
      'add',
      '--site',
      s.websiteId,
      '--bot',
      s.botId,
      '--channel',
      channelId,
      '--welcome-text',
      'Hi there',
    );
    expect(out).toEqual({ entryId: expect.any(String), kind: 'start' });
    expect(await entryRow(out.entryId)).toMatchObject({
      site_id: s.siteId,
      bot_id: s.botId,
      kind: 'start',
      app_short_name: null,
      event_type: 'Lead',
      channel_id: channelId,
      welcome_text: 'Hi there',
      is_default: true,
    });
  });

  it('takes an app entry with its Mini App, an event type of none, a value, and --default', async () => {
    const app = await w.ok(
      'entry',
      'add',
      '--site',
      s.siteId,
      '--bot',
      s.botId,
      '--kind',
      'app',
      '--app',
      'shop_app',
      '--event-type',
      'none',
      '--default',
    );
    expect(app.kind).toBe('app');
    expect(await entryRow(app.entryId)).toMatchObject({
      kind: 'app',
      app_short_name: 'shop_app',
      event_type: null,
      is_default: true,
    });
    const priced = await w.ok(
      'entry',
      'add',
      '--site',
      s.siteId,
      '--bot',
      s.botId,
      '--event-type',
      'Purchase',
      '--value',
      '9.5',
      '--currency',
      'usd',
    );
    expect(await entryRow(priced.entryId)).toMatchObject({
      event_type: 'Purchase',
      fixed_value: 9.5,
      fixed_currency: 'USD',
      is_default: false,
    });

    const { entries } = await w.ok<{ entries: Record<string, unknown>[] }>(
      'entry',
      'list',
      '--site',
      s.siteId,
    );
    expect(entries.map((e) => Object.keys(e).sort())[0]).toEqual([
      'app',
      'botId',
      'botUsername',
      'channelId',
      'entryId',
      'eventType',
      'isDefault',
      'kind',
    ]);
    expect(entries.find((e) => e.entryId === app.entryId)).toEqual({
      entryId: app.entryId,
      kind: 'app',
      botId: s.botId,
      botUsername: DEFAULT_BOT.username,
      app: 'shop_app',
      eventType: 'none',
      channelId: null,
      isDefault: true,
    });
    // One default per site: the new default took it over.
    expect(entries.filter((e) => e.isDefault)).toHaveLength(1);
  });

  it.each([
    [['--kind', 'app'], /--app/],
    [['--app', 'shop_app'], /--kind app/],
    [['--kind', 'door'], /kind/],
    [['--event-type', 'Purchase'], /value/],
    [['--value', '3'], /--currency/],
    [['--event-type', 'Custom'], /custom event name/],
    [['--channel', '00000000-0000-4000-8000-000000000000'], /channel/],
    [['--welcome-text', 'x'.repeat(4097)], /welcomeText|welcome/],
  ])('refuses %j', async (flags, reason) => {
    expect(await w.refused('entry', 'add', '--site', s.siteId, '--bot', s.botId, ...flags)).toMatch(reason);
  });

  it('refuses an unknown site or bot', async () => {
    expect(await w.refused('entry', 'add', '--site', 'nope', '--bot', s.botId)).toMatch(/site/);
    expect(
      await w.refused('entry', 'add', '--site', s.siteId, '--bot', '00000000-0000-4000-8000-000000000000'),
    ).toMatch(/bot/);
  });
});
