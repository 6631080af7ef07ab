// Who may post to the webhook, and what any body an authenticated caller sends does: 200 and
// nothing for everything Capigram does not act on, never a 500.
import { parseCrontab } from 'graphile-worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { purgeTelegramUpdates } from '../../backend/domain/telegram/purge.js';
import { TELEGRAM_CRONTAB } from '../../backend/worker/tasks/telegram-actions.js';
import { CHATS, newUser, startWorld, type World } from './world.js';

let w: World;

beforeAll(async () => {
  w = await startWorld({ worker: false });
});
afterAll(async () => {
  await w.close();
});

function post(url: string, body: string, secret?: string, headers: Record<string, string> = {}) {
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(secret === undefined ? {} : { 'x-telegram-bot-api-secret-token': secret }),
      ...headers,
    },
    body,
  });
}

async function expectUnauthorized(res: Response) {
  expect(res.status).toBe(401);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(((await res.json()) as { code: string }).code).toBe('UNAUTHORIZED');
}

/** Everything the webhook can write: nothing of it may change for a refused or ignored body. */
async function footprint() {
  return {
    updates: await w.count('telegram_updates'),
    memberships: await w.count('memberships'),
    conversions: await w.count('conversions'),
    leads: await w.count('leads'),
    jobs: await w.count('graphile_worker.jobs'),
  };
}

const joinUpdate = () => w.fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user: newUser() });

describe('webhook authentication', () => {
  it('refuses a missing secret, a wrong secret and another bot’s secret with 401, and changes nothing', async () => {
    const before = await footprint();
    const body = JSON.stringify(joinUpdate());
    await expectUnauthorized(await post(w.webhookUrl, body));
    await expectUnauthorized(await post(w.webhookUrl, body, 'wrong-secret'));
    await expectUnauthorized(await post(w.webhookUrl, body, ''));
    await expectUnauthorized(await post(w.webhookUrl, body, w.otherSecret));
    await expectUnauthorized(await post(w.webhookUrl, body, `${w.secret}x`));
    await expectUnauthorized(await post(w.webhookUrl, body, 'é'.repeat(300)));
    expect(await footprint()).toEqual(before);
    // The right secret on the same body is accepted: the refusals above were about the secret.
    expect((await post(w.webhookUrl, body, w.secret)).status).toBe(200);
    expect((await footprint()).memberships).toBe(before.memberships + 1);
  });

  it('answers an unknown bot exactly like a bad secret, so bot ids cannot be probed', async () => {
    const body = JSON.stringify(joinUpdate());
    await expectUnauthorized(
      await post(`${w.app.url}/backend/telegram/00000000-0000-4000-8000-000000000000`, body, w.secret),
    );
    await expectUnauthorized(await post(`${w.app.url}/backend/telegram/not-a-uuid`, body, w.secret));
    await expectUnauthorized(await post(`${w.app.url}/backend/telegram/${'9'.repeat(500)}`, body, w.secret));
  });

  it('each bot’s own secret opens only its own webhook', async () => {
    const other = `${w.app.url}/backend/telegram/${w.otherBotId}`;
    const res = await post(other, JSON.stringify({ update_id: 1, my_chat_member: null }), w.otherSecret);
    expect(res.status).toBe(200);
    await expectUnauthorized(await post(other, '{}', w.secret));
  });
});

describe('bodies the webhook does not act on', () => {
  const bodies: [string, string][] = [
    ['not JSON', '{"update_id": 1,'],
    ['empty', ''],
    ['a JSON string', '"hello"'],
    ['null', 'null'],
    ['an array', '[{"update_id": 5}]'],
    ['no update_id', '{"chat_member": {}}'],
    ['a negative update_id', '{"update_id": -4, "chat_member": {}}'],
    ['a fractional update_id', '{"update_id": 1.5}'],
    ['an update_id beyond 2^53', '{"update_id": 123456789012345678901234567890}'],
    ['a string update_id', '{"update_id": "7"}'],
    ['an unknown update type', '{"update_id": 9001, "message": {"text": "hi"}}'],
    ['only update_id', '{"update_id": 9002}'],
    ['a chat_member that is not an object', '{"update_id": 9003, "chat_member": [1,2]}'],
    [
      'a chat_member without members',
      '{"update_id": 9004, "chat_member": {"chat": {"id": -1001000000001}, "from": {"id": 5}, "date": 1}}',
    ],
    [
      'a date out of range',
      `{"update_id": 9005, "chat_member": ${JSON.stringify({ ...joinBody(), date: 1e20 })}}`,
    ],
    [
      'a huge user id',
      `{"update_id": 9006, "chat_member": ${JSON.stringify({ ...joinBody(), new_chat_member: { status: 'member', user: { id: 2 ** 60 } } })}}`,
    ],
    [
      'an invite link of the wrong type',
      `{"update_id": 9007, "chat_member": ${JSON.stringify({ ...joinBody(), invite_link: { invite_link: 42 } })}}`,
    ],
    [
      'a join request without from',
      '{"update_id": 9008, "chat_join_request": {"chat": {"id": -1001000000001}, "date": 1}}',
    ],
    ['deep nesting', `{"update_id": 9009, "message": ${'['.repeat(5000)}${']'.repeat(5000)}}`],
    ['lone surrogates and NUL', '{"update_id": 9010, "message": "\\ud800\\u0000"}'],
    // PostgreSQL cannot store a NUL: in a field the database gets, it makes the update malformed.
    [
      'a NUL in the invite link',
      `{"update_id": 9012, "chat_member": ${JSON.stringify({ ...joinBody(), invite_link: { invite_link: 'https://t.me/+ab\u0000cd' } })}}`,
    ],
    [
      'a NUL in a member status',
      `{"update_id": 9013, "chat_member": ${JSON.stringify({ ...joinBody(), new_chat_member: { status: 'mem\u0000ber', user: { id: 7 } } })}}`,
    ],
    [
      'a NUL in a join request link',
      `{"update_id": 9014, "chat_join_request": ${JSON.stringify({ chat: { id: -1001000000001 }, from: { id: 8 }, date: 1, invite_link: { invite_link: '\u0000' } })}}`,
    ],
    [
      '__proto__ keys',
      '{"update_id": 9011, "__proto__": {"chat_member": 1}, "constructor": {"prototype": {}}}',
    ],
  ];

  it.each(bodies)('%s → 200, nothing recorded', async (_what, body) => {
    const before = await footprint();
    const res = await post(w.webhookUrl, body, w.secret);
    expect(res.status).toBe(200);
    expect(await footprint()).toEqual(before);
  });

  it('a join of a chat no channel of this bot is in is acknowledged and only de-duplicated', async () => {
    const before = await footprint();
    const update = {
      update_id: 9100,
      chat_member: { ...joinBody(), chat: { id: -1009999999999, type: 'channel' } },
    };
    expect((await post(w.webhookUrl, JSON.stringify(update), w.secret)).status).toBe(200);
    expect(await footprint()).toEqual({ ...before, updates: before.updates + 1 });
  });

  it('unknown fields anywhere are tolerated', async () => {
    const before = await footprint();
    const body = {
      ...joinBody(),
      brand_new_field: { x: [1] },
      new_chat_member: {
        status: 'member',
        user: { id: newUser().id, is_bot: false, future: true },
        until_date: 0,
      },
    };
    const res = await post(
      w.webhookUrl,
      JSON.stringify({ update_id: 9200, chat_member: body, another_new_thing: 1 }),
      w.secret,
    );
    expect(res.status).toBe(200);
    expect((await footprint()).memberships).toBe(before.memberships + 1);
  });

  it('a body over 1 MiB with a wrong secret is 401: the secret is checked before the size', async () => {
    await expectUnauthorized(
      await post(
        w.webhookUrl,
        JSON.stringify({ update_id: 9302, message: { text: 'x'.repeat(1_100_000) } }),
        'wrong-secret',
      ),
    );
  });

  it('a body over 1 MiB is refused with 413 PAYLOAD_TOO_LARGE', async () => {
    const res = await post(
      w.webhookUrl,
      JSON.stringify({ update_id: 9300, message: { text: 'x'.repeat(1_100_000) } }),
      w.secret,
    );
    expect(res.status).toBe(413);
    expect(((await res.json()) as { code: string }).code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('a chunked body (no Content-Length) over 1 MiB is counted as it arrives and refused with 413', async () => {
    const res = await fetch(w.webhookUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': w.secret },
      body: new ReadableStream<Uint8Array>({
        start(controller) {
          for (let sent = 0; sent < 1_200_000; sent += 65_536)
            controller.enqueue(new Uint8Array(65_536).fill(0x20));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(((await res.json()) as { code: string }).code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('a large update under the limit is fine', async () => {
    const res = await post(
      w.webhookUrl,
      JSON.stringify({ update_id: 9301, message: { text: 'x'.repeat(500_000) } }),
      w.secret,
    );
    expect(res.status).toBe(200);
  });
});

describe('de-duplication records', () => {
  it('are kept a week, then purged by a daily cron task', async () => {
    const now = new Date();
    const day = 24 * 60 * 60 * 1000;
    await w.db.pool.query(
      `INSERT INTO telegram_updates (bot_id, update_id, kind, received_at) VALUES ($1, 70001, 'chat_member', $2), ($1, 70002, 'chat_member', $3)`,
      [w.botId, new Date(now.getTime() - 8 * day), new Date(now.getTime() - 6 * day)],
    );
    expect(await purgeTelegramUpdates(w.db.pool, now)).toBe(1);
    expect(await w.count('telegram_updates WHERE update_id IN (70001, 70002)')).toBe(1);
    expect(await w.count('telegram_updates WHERE update_id = 70002')).toBe(1);
    expect(parseCrontab(TELEGRAM_CRONTAB)).toEqual([
      expect.objectContaining({ task: 'purge_telegram_updates' }),
      expect.objectContaining({ task: 'telegram_check_rights' }),
    ]);
  });
});

function joinBody() {
  const user = { id: 777_999_001, is_bot: false, first_name: 'A' };
  return {
    chat: { id: CHATS.main.id, title: 'Main', type: 'channel' },
    from: user,
    date: 1_763_776_800,
    old_chat_member: { status: 'left', user },
    new_chat_member: { status: 'member', user },
  };
}
