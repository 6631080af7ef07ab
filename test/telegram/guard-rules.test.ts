// The guard bot's answer by a channel's rule, as a table; and the strict fake's answers to the
// two Bot API 10.1 methods: the query must be the bot's own, unanswered and within its 10 seconds,
// answered once; a web app is shown once, from an https URL (plain http on loopback only).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  JOIN_REQUEST_RULES,
  joinQueryAnswer,
  type JoinRequestRule,
} from '../../backend/domain/telegram/join-request-rules.js';
import { createTelegramClient, TelegramError } from '../../backend/telegram/client.js';
import {
  DEFAULT_BOT,
  JOIN_QUERY_TIMEOUT_MS,
  startTelegram,
  type FakeBot,
  type TelegramFake,
} from '../fakes/index.js';

describe('joinQueryAnswer', () => {
  const table: [JoinRequestRule, boolean, 'approve' | 'queue'][] = [
    ['approve-all', true, 'approve'],
    ['approve-all', false, 'approve'],
    ['approve-attributed', true, 'approve'],
    ['approve-attributed', false, 'queue'],
    ['hold', true, 'queue'],
    ['hold', false, 'queue'],
  ];
  it.each(table)('%s, attributed %s → %s', (rule, attributed, answer) => {
    expect(joinQueryAnswer(rule, attributed)).toBe(answer);
  });
  it('covers every rule, and no rule declines', () => {
    expect(new Set(table.map(([r]) => r))).toEqual(new Set(JOIN_REQUEST_RULES));
    for (const rule of JOIN_REQUEST_RULES)
      for (const attributed of [true, false]) expect(joinQueryAnswer(rule, attributed)).not.toBe('decline');
  });
});

const OTHER: FakeBot = {
  token: '777000:TEST-other-guard-bot',
  id: 777000,
  first_name: 'O',
  username: 'o_bot',
};
const CHAT = { id: -1001000000499, title: 'Public', type: 'channel' as const, username: 'pub_guard' };

describe('the fake’s join-request queries', () => {
  let fake: TelegramFake;
  const client = (token = DEFAULT_BOT.token) => createTelegramClient({ baseUrl: `${fake.url}`, token });
  let user = 555_000_100;
  const query = () => fake.guardJoinRequest({ chatId: CHAT.id, user: { id: user++ } }).chat_join_request;

  beforeAll(async () => {
    fake = await startTelegram({
      bots: [DEFAULT_BOT, OTHER],
      chats: [{ ...CHAT, admins: { [DEFAULT_BOT.id]: { can_invite_users: true } } }],
    });
  });
  afterAll(async () => {
    await fake.close();
  });

  const refusal = async (p: Promise<unknown>) => {
    const err = await p.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TelegramError);
    return (err as TelegramError).message;
  };

  it('a public chat’s request carries the query id and no link', () => {
    const r = fake.guardJoinRequest({
      chatId: CHAT.id,
      user: { id: user++ },
      inviteLink: 'https://t.me/+abc',
    });
    expect(r.chat_join_request.query_id).toMatch(/^[A-Za-z0-9]{20}$/);
    expect(r.chat_join_request.invite_link).toBeUndefined();
  });

  it.each(['approve', 'decline', 'queue'] as const)(
    'answers %s once; a second answer is refused',
    async (result) => {
      const r = query();
      await expect(
        client().answerChatJoinRequestQuery({ chat_join_request_query_id: r.query_id!, result }),
      ).resolves.toBe(true);
      expect(fake.joinQuery(r.query_id!)?.result).toBe(result);
      expect(
        await refusal(
          client().answerChatJoinRequestQuery({ chat_join_request_query_id: r.query_id!, result }),
        ),
      ).toMatch(/query is too old and response timeout expired or query ID is invalid/);
      expect(fake.approvals.some((a) => a.userId === r.from.id)).toBe(result === 'approve');
      expect(fake.declines.some((a) => a.userId === r.from.id)).toBe(result === 'decline');
    },
  );

  it('refuses a query past its 10 seconds, an unknown one, another bot’s, and an unknown result', async () => {
    const old = query();
    fake.ageJoinQuery(old.query_id!, JOIN_QUERY_TIMEOUT_MS + 1);
    expect(
      await refusal(
        client().answerChatJoinRequestQuery({ chat_join_request_query_id: old.query_id!, result: 'approve' }),
      ),
    ).toMatch(/too old/);
    expect(
      await refusal(
        client().answerChatJoinRequestQuery({ chat_join_request_query_id: 'nope', result: 'approve' }),
      ),
    ).toMatch(/QUERY_ID_INVALID/);
    const r = query();
    expect(
      await refusal(
        client(OTHER.token).answerChatJoinRequestQuery({
          chat_join_request_query_id: r.query_id!,
          result: 'approve',
        }),
      ),
    ).toMatch(/QUERY_ID_INVALID/);
    const bad = await fetch(`${fake.url}/bot${DEFAULT_BOT.token}/answerChatJoinRequestQuery`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ chat_join_request_query_id: r.query_id, result: 'maybe' }),
    });
    expect(bad.status).toBe(400);
    expect(fake.joinQuery(r.query_id!)?.result).toBeUndefined();
  });

  it('shows a web app once, from an https or loopback URL, then takes the answer', async () => {
    const r = query();
    const id = r.query_id!;
    expect(
      await refusal(
        client().sendChatJoinRequestWebApp({
          chat_join_request_query_id: id,
          web_app_url: 'http://example.com/gate',
        }),
      ),
    ).toMatch(/WEBAPP_URL_INVALID/);
    await expect(
      client().sendChatJoinRequestWebApp({
        chat_join_request_query_id: id,
        web_app_url: 'https://cg.example.com/g',
      }),
    ).resolves.toBe(true);
    expect(
      await refusal(
        client().sendChatJoinRequestWebApp({
          chat_join_request_query_id: id,
          web_app_url: 'https://cg.example.com/g',
        }),
      ),
    ).toMatch(/QUERY_ID_INVALID/);
    await expect(
      client().answerChatJoinRequestQuery({ chat_join_request_query_id: id, result: 'approve' }),
    ).resolves.toBe(true);
    expect(fake.joinQuery(id)).toMatchObject({ webAppUrl: 'https://cg.example.com/g', result: 'approve' });
    const loop = query();
    await expect(
      client().sendChatJoinRequestWebApp({
        chat_join_request_query_id: loop.query_id!,
        web_app_url: 'http://127.0.0.1:9/gate',
      }),
    ).resolves.toBe(true);
  });
});
