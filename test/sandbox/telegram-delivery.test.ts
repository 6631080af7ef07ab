// The demo's sandbox Telegram posts updates as Telegram's server does (backend/sandbox/telegram-delivery.ts):
// a refused or timed-out update is sent again until taken, a user's updates keep their order
// while other users' go on, an update a day old is dropped, getWebhookInfo counts what waits and
// tells the last error, a member joins once, and the refusals it is told to give are Telegram's.
// A Telegram second is a millisecond here, and the clock is the test's.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../../backend/sandbox/server.js';
import { SANDBOX_BOT, SANDBOX_CHAT } from '../../backend/sandbox/telegram.js';

interface Hit {
  update: Record<string, unknown> & { update_id: number };
  secret: string | undefined;
  status: number;
}

let sandbox: Sandbox;
let receiver: Server;
let hookUrl = '';
let clock = Date.now();
const hits: Hit[] = [];
/** How the webhook answers each update: a status, or 'hang' to answer only after the sandbox gave up. */
let answer: (update: Hit['update'], seen: number) => number | 'hang' = () => 200;

async function readJson(req: IncomingMessage): Promise<Hit['update']> {
  let raw = '';
  for await (const chunk of req) raw += String(chunk);
  return JSON.parse(raw) as Hit['update'];
}

beforeAll(async () => {
  receiver = createServer((req, res) => {
    void readJson(req).then((update) => {
      const seen = hits.filter((h) => h.update.update_id === update.update_id).length;
      const status = answer(update, seen);
      const secret = req.headers['x-telegram-bot-api-secret-token'] as string | undefined;
      hits.push({ update, secret, status: status === 'hang' ? 0 : status });
      if (status === 'hang') setTimeout(() => res.writeHead(200).end(), 300);
      else res.writeHead(status).end();
    });
  });
  await new Promise<void>((ok) => receiver.listen(0, '127.0.0.1', ok));
  hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/backend/telegram/bot`;
  sandbox = await startSandbox({
    print: () => {},
    telegramDelivery: { secondMs: 1, now: () => clock, timeoutMs: 100 },
  });
  const set = await api('setWebhook', {
    url: hookUrl,
    secret_token: 'sandbox_secret-1',
    allowed_updates: ['message', 'chat_member', 'chat_join_request', 'my_chat_member'],
  });
  expect(set).toEqual([200, { ok: true, result: true, description: 'Webhook was set' }]);
});

afterAll(async () => {
  await sandbox?.close();
  await new Promise((ok) => receiver?.close(ok));
});

async function api(method: string, body: unknown): Promise<[number, Record<string, unknown>]> {
  const res = await fetch(`${sandbox.url}/telegram/bot${SANDBOX_BOT.token}/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return [res.status, (await res.json()) as Record<string, unknown>];
}

async function until(what: () => boolean, label: string): Promise<void> {
  for (let i = 0; i < 400 && !what(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(what(), label).toBe(true);
}

const hitsOf = (userId: number) =>
  hits.filter((h) => {
    const body = Object.values(h.update).find((v) => typeof v === 'object') as { from?: { id?: number } };
    return body?.from?.id === userId;
  });
const textOf = (h: Hit) => (h.update.message as { text?: string } | undefined)?.text;

it('resends an update its webhook refused with 401 until it is taken, and getWebhookInfo tells the error', async () => {
  answer = (_u, seen) => (seen === 0 ? 401 : 200);
  const first = await sandbox.telegram.deliverStart(610_000_001, 'p401');
  expect(first).toBe('HTTP 401 (will be resent)');
  await until(() => hitsOf(610_000_001).some((h) => h.status === 200), 'the update arrived after the 401');
  const tries = hitsOf(610_000_001);
  expect(tries.map((h) => h.status)).toEqual([401, 200]);
  expect(tries[1]!.update).toEqual(tries[0]!.update); // the same update, update_id included
  expect(tries.every((h) => h.secret === 'sandbox_secret-1')).toBe(true);
  const [, info] = await api('getWebhookInfo', {});
  expect(info.result).toMatchObject({
    url: hookUrl,
    pending_update_count: 0,
    last_error_date: Math.floor(clock / 1000),
    last_error_message: 'Wrong response from the webhook: 401 Unauthorized',
  });
});

it('resends after a 5xx and after a timeout', async () => {
  answer = (u, seen) => {
    const text = (u.message as { text?: string } | undefined)?.text;
    if (seen > 0) return 200;
    return text === '/start p503' ? 503 : 'hang';
  };
  expect(await sandbox.telegram.deliverStart(610_000_002, 'p503')).toBe('HTTP 503 (will be resent)');
  expect(await sandbox.telegram.deliverStart(610_000_003, 'slow')).toBe('unreachable (will be resent)');
  await until(
    () => [610_000_002, 610_000_003].every((u) => hitsOf(u).some((h) => h.status === 200)),
    'both were sent again and taken',
  );
  const [, info] = await api('getWebhookInfo', {});
  expect((info.result as { last_error_message: string }).last_error_message).toMatch(
    /^(Read timeout expired|Wrong response from the webhook: 503 Service Unavailable)$/,
  );
});

it("keeps a user's updates in order while another user's go on", async () => {
  const a = 610_000_010;
  const b = 610_000_011;
  // a's first message is refused three times; b is not held up by it, a's second waits for it.
  answer = (u, seen) => (textOf({ update: u } as Hit) === '/start a1' && seen < 3 ? 500 : 200);
  const firstA = sandbox.telegram.deliverStart(a, 'a1');
  const secondA = sandbox.telegram.deliverStart(a, 'a2');
  expect(await secondA).toBe('queued behind 1 earlier update of this user');
  await sandbox.telegram.deliverStart(b, 'b1');
  expect(await firstA).toBe('HTTP 500 (will be resent)');
  await until(() => hitsOf(a).length === 5, "a's updates all arrived");
  expect(hitsOf(a).map((h) => `${textOf(h)} ${h.status}`)).toEqual([
    '/start a1 500',
    '/start a1 500',
    '/start a1 500',
    '/start a1 200',
    '/start a2 200',
  ]);
  const bAt = hits.findIndex((h) => textOf(h) === '/start b1');
  const aTakenAt = hits.findIndex((h) => textOf(h) === '/start a1' && h.status === 200);
  expect(bAt).toBeLessThan(aTakenAt);
});

it('drops an update that could not be delivered within a day, and counts it as pending until then', async () => {
  const c = 610_000_020;
  answer = (u) => (textOf({ update: u } as Hit) === '/start late' ? 500 : 200);
  await sandbox.telegram.deliverStart(c, 'late');
  await until(() => hitsOf(c).length >= 2, 'resent at least once');
  expect(sandbox.telegram.webhookInfo().pending_update_count).toBe(1);
  clock += 86_400_000;
  await until(() => sandbox.telegram.webhookInfo().pending_update_count === 0, 'dropped');
  const dropped = sandbox.log.list({ source: 'telegram' }).filter((e) => e.summary.includes('dropped'));
  expect(dropped).toHaveLength(1);
  const tries = hitsOf(c).length;
  await new Promise((r) => setTimeout(r, 50));
  expect(hitsOf(c)).toHaveLength(tries);
});

it('posts one join per member: opening a link again as a member posts nothing', async () => {
  answer = () => 200;
  const [, made] = await api('createChatInviteLink', { chat_id: SANDBOX_CHAT.id });
  const hash = (made.result as { invite_link: string }).invite_link.split('/').pop()!;
  const first = await fetch(`${sandbox.url}/telegram/join/${hash}`, { method: 'POST' });
  const cookie = first.headers.get('set-cookie')!.split(';')[0]!;
  const user = Number(/leads\?user=(\d+)/.exec(await first.text())![1]);
  await until(() => hitsOf(user).length === 1, 'the join arrived');
  const again = await fetch(`${sandbox.url}/telegram/join/${hash}`, { method: 'POST', headers: { cookie } });
  expect(await again.text()).toContain('already a member');
  await new Promise((r) => setTimeout(r, 30));
  const joins = hitsOf(user).map((h) => h.update.chat_member as Record<string, { status: string }>);
  expect(joins).toHaveLength(1);
  expect([joins[0]!.old_chat_member!.status, joins[0]!.new_chat_member!.status]).toEqual(['left', 'member']);
});

it('refuses as Telegram does when told to: a blocked bot, a user in too many channels, a flood wait', async () => {
  answer = () => 200;
  const user = 610_000_030;
  await sandbox.telegram.deliverStart(user, null);
  expect((await api('sendMessage', { chat_id: user, text: 'hi' }))[0]).toBe(200);
  const blocked = await fetch(`${sandbox.url}/telegram/control/block`, {
    method: 'POST',
    body: JSON.stringify({ user_id: user }),
  });
  expect(blocked.status).toBe(200);
  await until(() => hitsOf(user).some((h) => 'my_chat_member' in h.update), 'my_chat_member posted');
  const mine = hitsOf(user).find((h) => 'my_chat_member' in h.update)!.update.my_chat_member as Record<
    string,
    { status?: string; type?: string }
  >;
  expect([mine.chat!.type, mine.old_chat_member!.status, mine.new_chat_member!.status]).toEqual([
    'private',
    'member',
    'kicked',
  ]);
  expect(await api('sendMessage', { chat_id: user, text: 'hi again' })).toEqual([
    403,
    { ok: false, error_code: 403, description: 'Forbidden: bot was blocked by the user' },
  ]);

  // A join request from a user in too many channels cannot be approved.
  const [, made] = await api('createChatInviteLink', {
    chat_id: SANDBOX_CHAT.id,
    creates_join_request: true,
  });
  const hash = (made.result as { invite_link: string }).invite_link.split('/').pop()!;
  const page = await fetch(`${sandbox.url}/telegram/join/${hash}`, { method: 'POST' });
  const requester = Number(/leads\?user=(\d+)/.exec(await page.text())![1]);
  await fetch(`${sandbox.url}/telegram/control/channels-too-much`, {
    method: 'POST',
    body: JSON.stringify({ user_id: requester }),
  });
  expect(await api('approveChatJoinRequest', { chat_id: SANDBOX_CHAT.id, user_id: requester })).toEqual([
    400,
    { ok: false, error_code: 400, description: 'Bad Request: USER_CHANNELS_TOO_MUCH' },
  ]);

  await fetch(`${sandbox.url}/telegram/control/flood`, {
    method: 'POST',
    body: JSON.stringify({ count: 2, retry_after: 7 }),
  });
  const flood = {
    ok: false,
    error_code: 429,
    description: 'Too Many Requests: retry after 7',
    parameters: { retry_after: 7 },
  };
  expect(await api('getMe', {})).toEqual([429, flood]);
  expect(await api('getChat', { chat_id: SANDBOX_CHAT.id })).toEqual([429, flood]);
  expect((await api('getMe', {}))[0]).toBe(200);
});

it('refuses a webhook Telegram would refuse, and keeps the one it has', async () => {
  expect(await api('setWebhook', { url: 'http://track.example.com/hook' })).toEqual([
    400,
    {
      ok: false,
      error_code: 400,
      description: 'Bad Request: bad webhook: An HTTPS URL must be provided for webhook',
    },
  ]);
  expect((await api('setWebhook', { url: 'https://track.example.com:8080/hook' }))[1].description).toBe(
    'Bad Request: bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443',
  );
  expect((await api('setWebhook', { url: hookUrl, secret_token: 'with space' }))[1].description).toBe(
    'Bad Request: secret token contains unallowed characters',
  );
  const [, info] = await api('getWebhookInfo', {});
  expect((info.result as { url: string }).url).toBe(hookUrl);
});

it('makes paid subscription links as Telegram does, and a paid join says what was paid and until when', async () => {
  answer = () => 200;
  const base = { chat_id: SANDBOX_CHAT.id, subscription_period: 2_592_000, subscription_price: 250 };
  expect(
    (await api('createChatSubscriptionInviteLink', { ...base, subscription_period: 86_400 }))[1],
  ).toEqual({
    ok: false,
    error_code: 400,
    description: 'Bad Request: SUBSCRIPTION_PERIOD_INVALID',
  });
  expect(
    (await api('createChatSubscriptionInviteLink', { ...base, subscription_price: 2501 }))[1].description,
  ).toBe('Bad Request: PRICING_CHAT_INVALID');
  const [status, made] = await api('createChatSubscriptionInviteLink', base);
  expect(status).toBe(200);
  const link = made.result as {
    invite_link: string;
    subscription_price: number;
    subscription_period: number;
  };
  expect(link).toMatchObject({
    subscription_price: 250,
    subscription_period: 2_592_000,
    creates_join_request: false,
  });
  const hash = link.invite_link.split('/').pop()!;
  expect(await (await fetch(`${sandbox.url}/telegram/join/${hash}`)).text()).toContain(
    'Pay 250 Stars and join',
  );
  const page = await fetch(`${sandbox.url}/telegram/join/${hash}`, { method: 'POST' });
  const user = Number(/leads\?user=(\d+)/.exec(await page.text())![1]);
  await until(() => hitsOf(user).length === 1, 'the paid join arrived');
  const join = hitsOf(user)[0]!.update.chat_member as {
    invite_link: { subscription_price: number };
    new_chat_member: { status: string; until_date: number };
  };
  expect(join.invite_link.subscription_price).toBe(250);
  expect(join.new_chat_member).toMatchObject({
    status: 'member',
    until_date: Math.floor(clock / 1000) + 2_592_000,
  });
});
