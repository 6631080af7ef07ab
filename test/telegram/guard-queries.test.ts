// Guard-bot join queries (Bot API 10.1) through the real webhook, worker and database against the
// strict fake: each query is answered within Telegram's 10 seconds, by the channel's rule or after
// Capigram's gate Mini App, in public chats (whose requests carry no link); the gate ties a
// requester to a visit only on proof, and a page never completed leaves the answer to the rule.
import { randomUUID } from 'node:crypto';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { addBot } from '../../backend/domain/admin/bots.js';
import { addChannel } from '../../backend/domain/admin/channels.js';
import { addEntry } from '../../backend/domain/admin/entries.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { answerJoinQuery } from '../../backend/domain/telegram/guard-queries.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { createTelegramClient, TelegramError } from '../../backend/telegram/client.js';
import {
  DEFAULT_BOT,
  JOIN_QUERY_TIMEOUT_MS,
  startFakes,
  type FakeChat,
  type Fakes,
  type JoinQuery,
} from '../fakes/index.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import { eventually, newUser } from './world.js';

const admins = { [DEFAULT_BOT.id]: { can_invite_users: true } };
const chat = (n: number, username: string): FakeChat => ({
  id: -1001000000400 - n,
  title: `Guarded ${username}`,
  type: 'channel',
  username,
  admins,
});
const CHATS = {
  all: chat(1, 'guarded_all'),
  attributed: chat(2, 'guarded_attr'),
  hold: chat(3, 'guarded_hold'),
  gate: chat(4, 'guarded_gate'),
};
const GATE_WAIT_MS = 2000;
const PIXEL = '1234567890';
const ORIGIN = 'https://shop.example.com';

let fakes: Fakes;
let db: TestDatabase;
let app: TestApp;
let siteId: string;
let websiteId: string;
let entryId: string;
const channels = {} as Record<keyof typeof CHATS, string>;

beforeAll(async () => {
  fakes = await startFakes({ telegram: { chats: Object.values(CHATS) } });
  db = await createTestDatabase();
  app = await startTestApp(db.pool, {
    worker: true,
    env: { ...fakes.env, JOIN_GATE_WAIT_MS: String(GATE_WAIT_MS) },
  });
  const { accountId } = await createAccount(db.pool, { name: 'Guard' });
  ({ siteId, websiteId } = await createSite(db.pool, {
    accountId,
    name: 'Shop',
    domains: ['shop.example.com'],
  }));
  const { botId } = await addBot(app.deps, { accountId, token: DEFAULT_BOT.token });
  const add = async (key: keyof typeof CHATS, extra: Partial<Parameters<typeof addChannel>[1]>) => {
    channels[key] = (
      await addChannel(app.deps, {
        siteId,
        botId,
        telegramChannelId: String(CHATS[key].id),
        title: CHATS[key].title,
        username: CHATS[key].username,
        ...extra,
      })
    ).channelId;
  };
  await add('all', { joinRequests: 'approve-all' });
  await add('attributed', { joinRequests: 'approve-attributed' });
  await add('hold', { joinRequests: 'hold' });
  await add('gate', { joinRequests: 'approve-attributed', joinGate: 'webapp' });
  await addPixel(app.deps, { platform: 'meta', siteId, pixelId: PIXEL, accessToken: 'meta-test-token' });
  ({ entryId } = await addEntry(db.pool, { siteId, botId, eventType: 'none' }));
});
afterAll(async () => {
  await app.stop();
  await fakes.closeAll();
  await db.drop();
});

const tg = () => fakes.telegram;
const deliver = (u: Parameters<Fakes['telegram']['deliverUpdate']>[1]) =>
  tg().deliverUpdate(DEFAULT_BOT.token, u);

/** A guard query delivered to the webhook; returns its query id. */
async function request(key: keyof typeof CHATS, user: { id: number }): Promise<string> {
  const update = tg().guardJoinRequest({ chatId: CHATS[key].id, user });
  expect((await deliver(update)).status).toBe(200);
  return update.chat_join_request.query_id;
}

const answered = (queryId: string) =>
  eventually(
    async () => {
      const q = tg().joinQuery(queryId);
      return q?.result !== undefined && q;
    },
    JOIN_QUERY_TIMEOUT_MS,
    'the query to be answered',
  );

function inTime(q: JoinQuery): number {
  const took = q.answeredAtEpochMs! - q.issuedAtEpochMs;
  expect(took).toBeLessThan(JOIN_QUERY_TIMEOUT_MS);
  return took;
}

async function requestStatus(key: keyof typeof CHATS, userId: number) {
  const { rows } = await db.pool.query<{ request_status: string; visit_id: string | null }>(
    `SELECT request_status, visit_id FROM memberships WHERE channel_id = $1 AND telegram_user_id = $2 AND kind = 'join_request'`,
    [channels[key], userId],
  );
  return rows[0];
}

const conversionsOf = async (userId: number) =>
  (
    await db.pool.query<{ id: string; visit_id: string | null; event_type: string }>(
      'SELECT id, visit_id, event_type FROM conversions WHERE telegram_user_id = $1',
      [userId],
    )
  ).rows;

const gatePost = (channelId: string, initData: string, cookie?: string) =>
  fetch(`${app.url}/backend/telegram/gate/${channelId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(cookie ? { cookie } : {}) },
    body: JSON.stringify({ initData }),
  });

/** A visitor lands on the site with an ad's click id; the tracker's browser id is its cookie. */
async function land(): Promise<{ visitId: string; tempId: string; sessionId: string; fbc: string }> {
  const sessionId = randomUUID();
  const tempId = randomUUID();
  const click = `IwAR${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const fbc = `fb.1.${Date.now() - 60_000}.${click}`;
  const href = `${ORIGIN}/landing?fbclid=${click}`;
  const res = await fetch(`${app.url}/backend/track/init`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      origin: ORIGIN,
      'x-capigram-client-ip': '203.0.113.9',
      'x-capigram-client-user-agent': 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X)',
    },
    body: JSON.stringify({
      websiteId,
      tempId,
      sessionId,
      visitRequestId: randomUUID(),
      href,
      landingPage: new URL(href).pathname + new URL(href).search,
      fbc,
    }),
  });
  expect(res.status).toBe(200);
  const { visitId } = (await res.json()) as { visitId: string };
  return { visitId, tempId, sessionId, fbc };
}

/** The visitor opens the bot through the entry and presses START: the entry ties their visit to the user. */
async function startBot(visit: { tempId: string; sessionId: string }, user: { id: number }): Promise<void> {
  const query = new URLSearchParams({
    website: websiteId,
    tid: visit.tempId,
    sid: visit.sessionId,
    entry: entryId,
  });
  const res = await fetch(`${app.url}/backend/track/entry?${query}`, {
    redirect: 'manual',
    headers: { 'x-capigram-client-ip': '203.0.113.9' },
  });
  expect(res.status).toBe(302);
  const payload = new URL(res.headers.get('location')!).searchParams.get('start')!;
  expect((await deliver(tg().startCommand({ user, payload }))).status).toBe(200);
}

describe('a guard query answered by the channel’s rule, in a public chat', () => {
  it.each([
    ['all', 'approve', 'approved'],
    ['attributed', 'queue', 'held'],
    ['hold', 'queue', 'held'],
  ] as const)('%s: answered %s within 10 s', async (key, result, status) => {
    const user = newUser();
    const queryId = await request(key, user);
    const q = await answered(queryId);
    expect(q.result).toBe(result);
    inTime(q);
    await eventually(
      async () => (await requestStatus(key, user.id))?.request_status === status,
      5000,
      `request ${status}`,
    );
    if (result === 'approve') {
      expect(tg().approvals.filter((a) => a.userId === user.id)).toHaveLength(1);
      // The join Telegram reports afterwards is organic: no click of anyone's is sent for it.
      await deliver(tg().joinAfterApproval({ chatId: CHATS[key].id, user }));
      expect(await conversionsOf(user.id)).toEqual([]);
    } else {
      // Queued: an ordinary pending request the operator may still approve.
      const bot = createTelegramClient({ baseUrl: fakes.env.TELEGRAM_API_URL, token: DEFAULT_BOT.token });
      await expect(bot.approveChatJoinRequest({ chat_id: CHATS[key].id, user_id: user.id })).resolves.toBe(
        true,
      );
    }
  });

  it('a second answer to an answered query is refused by Telegram', async () => {
    const user = newUser();
    const queryId = await request('all', user);
    await answered(queryId);
    const bot = createTelegramClient({ baseUrl: fakes.env.TELEGRAM_API_URL, token: DEFAULT_BOT.token });
    const again = bot.answerChatJoinRequestQuery({ chat_join_request_query_id: queryId, result: 'decline' });
    await expect(again).rejects.toBeInstanceOf(TelegramError);
    await expect(again).rejects.toThrow(/query is too old|QUERY_ID_INVALID/);
    expect(tg().joinQuery(queryId)?.result).toBe('approve');
    expect(tg().declines.filter((d) => d.userId === user.id)).toEqual([]);
  });
});

describe('a query that could not be answered in time', () => {
  it('leaves an ordinary pending request, and an approval is made the ordinary way', async () => {
    const user = newUser();
    // Telegram sent the request (pending at the fake) and the query's 10 seconds passed
    // unanswered: Capigram's row says it was decided `approve` and is due before now.
    const update = tg().guardJoinRequest({ chatId: CHATS.all.id, user });
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO join_request_queries (bot_id, channel_id, query_id, telegram_user_id, received_at, answer_by,
         rule_answer, decision, decided_by)
       SELECT bot_id, id, $2, $3, now() - interval '11 seconds', now() - interval '1 second', 'approve', 'approve', 'rule'
       FROM channels WHERE id = $1 RETURNING id`,
      [channels.all, update.chat_join_request.query_id, user.id],
    );
    const outcome = await answerJoinQuery(app.deps, { queryRowId: rows[0]!.id });
    expect(outcome).toMatchObject({ outcome: 'gave_up' });
    // Never sent late to Telegram; approved with approveChatJoinRequest by the job instead.
    expect(tg().joinQuery(update.chat_join_request.query_id)?.result).toBeUndefined();
    await tg().waitFor(() => tg().approvals.some((a) => a.userId === user.id), 5000);
    const { rows: row } = await db.pool.query(
      'SELECT answered_at, answer_error FROM join_request_queries WHERE id = $1',
      [rows[0]!.id],
    );
    expect(row).toEqual([
      { answered_at: null, answer_error: 'the query expired before it could be answered' },
    ]);
  });
});

describe('the gate Mini App (--join-gate webapp)', () => {
  const shown = (queryId: string) =>
    eventually(
      async () => {
        const q = tg().joinQuery(queryId);
        return q?.webAppUrl !== undefined && q;
      },
      5000,
      'the gate to be shown',
    );

  it('ties the requester to the visit their browser made, approves, and the join is sent with its click id', async () => {
    const visit = await land();
    const user = newUser();
    const queryId = await request('gate', user);
    const q = await shown(queryId);
    expect(q.webAppUrl).toBe(`${app.url}/backend/telegram/gate/${channels.gate}`);
    const page = await fetch(q.webAppUrl!);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('https://telegram.org/js/telegram-web-app.js');
    expect(page.headers.get('content-security-policy')).toContain("connect-src 'self'");

    const res = await gatePost(channels.gate, tg().gateInitData(queryId), `capigram_tid=${visit.tempId}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ approved: true, attributed: true, decidedBy: 'gate' });
    const a = await answered(queryId);
    expect(a.result).toBe('approve');
    inTime(a);

    await fakes.meta.waitFor(
      () =>
        fakes.meta
          .events(PIXEL)
          .some((e) => e.event.event_name === 'Subscribe' && e.event.user_data.fbc === visit.fbc),
      10_000,
    );
    const [conversion] = await conversionsOf(user.id);
    expect(conversion).toMatchObject({ visit_id: visit.visitId, event_type: 'Subscribe' });
    expect(await requestStatus('gate', user.id)).toEqual({
      request_status: 'approved',
      visit_id: visit.visitId,
    });
    // Telegram's chat_member update for the approved join adds nothing.
    await deliver(tg().joinAfterApproval({ chatId: CHATS.gate.id, user }));
    expect(await conversionsOf(user.id)).toHaveLength(1);
    // Opening the page again changes nothing.
    const again = await gatePost(channels.gate, tg().gateInitData(queryId), `capigram_tid=${visit.tempId}`);
    expect(await again.json()).toEqual({ approved: true, attributed: true, decidedBy: 'gate' });
  });

  it('ties a requester an entry tied to a visit without any cookie (a public chat through the bot)', async () => {
    const visit = await land();
    const user = newUser();
    await startBot(visit, user);
    const queryId = await request('gate', user);
    await shown(queryId);
    const res = await gatePost(channels.gate, tg().gateInitData(queryId));
    expect(await res.json()).toEqual({ approved: true, attributed: true, decidedBy: 'gate' });
    inTime(await answered(queryId));
    const conversion = await eventually(
      async () => (await conversionsOf(user.id)).find((c) => c.event_type === 'Subscribe'),
      5000,
      'the join conversion',
    );
    expect(conversion.visit_id).toBe(visit.visitId);
    const { rows } = await db.pool.query('SELECT proof FROM join_request_queries WHERE query_id = $1', [
      queryId,
    ]);
    expect(rows).toEqual([{ proof: 'entry' }]);
  });

  it('the page, opened in a browser, posts its initData with the cookie and closes the Mini App', async () => {
    const visit = await land();
    const user = newUser();
    // The browser is ready first: the page must come within JOIN_GATE_WAIT_MS of the request.
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking'],
    });
    try {
      const context = await browser.newContext();
      await context.addCookies([{ name: 'capigram_tid', value: visit.tempId, url: app.url }]);
      const page = await context.newPage();
      const requested: string[] = [];
      page.on('request', (r) => requested.push(r.url()));
      let initData = '';
      // Telegram's WebApp script, as Telegram's app provides it to the page: initData and close().
      await page.route('https://telegram.org/js/telegram-web-app.js', (route) =>
        route.fulfill({
          status: 200,
          contentType: 'application/javascript',
          body: `window.Telegram = { WebApp: { initData: ${JSON.stringify(initData)}, ready: function () {}, close: function () { window.closedByGate = true; } } };`,
        }),
      );
      const queryId = await request('gate', user);
      const q = await shown(queryId);
      initData = tg().gateInitData(queryId);
      await page.goto(q.webAppUrl!);
      await page.waitForFunction(() => (window as { closedByGate?: boolean }).closedByGate === true, null, {
        timeout: 5000,
      });
      expect(await page.textContent('#s')).toBe('Welcome! You are in.');
      expect(requested.every((u) => u.startsWith(app.url) || u.startsWith('https://telegram.org/js/'))).toBe(
        true,
      );
      const a = await answered(queryId);
      expect(a.result).toBe('approve');
      inTime(a);
    } finally {
      await browser.close();
    }
    const conversion = await eventually(
      async () => (await conversionsOf(user.id)).find((c) => c.event_type === 'Subscribe'),
      5000,
      'the join conversion',
    );
    expect(conversion.visit_id).toBe(visit.visitId);
  });

  it('without a provable visit approves the join as organic, sending nothing', async () => {
    await land(); // someone else's visit, at the same moment: no reason to credit it
    const user = newUser();
    const queryId = await request('gate', user);
    await shown(queryId);
    const res = await gatePost(channels.gate, tg().gateInitData(queryId), `capigram_tid=${randomUUID()}`);
    expect(await res.json()).toEqual({ approved: true, attributed: false, decidedBy: 'gate' });
    const a = await answered(queryId);
    expect(a.result).toBe('approve');
    inTime(a);
    await deliver(tg().joinAfterApproval({ chatId: CHATS.gate.id, user }));
    const { rows } = await db.pool.query(
      `SELECT attributed, visit_id FROM memberships WHERE telegram_user_id = $1 AND kind = 'join'`,
      [user.id],
    );
    expect(rows).toEqual([{ attributed: false, visit_id: null }]);
    expect(await conversionsOf(user.id)).toEqual([]);
  });

  it('a page never completed: the rule answers in time, and a late page changes nothing', async () => {
    const user = newUser();
    const queryId = await request('gate', user);
    await shown(queryId);
    const a = await answered(queryId);
    // approve-attributed, and nothing ties this requester: queued for the operator.
    expect(a.result).toBe('queue');
    expect(inTime(a)).toBeGreaterThanOrEqual(GATE_WAIT_MS - 100);
    const late = await gatePost(channels.gate, tg().gateInitData(queryId));
    expect(await late.json()).toEqual({ approved: false, attributed: false, decidedBy: 'rule' });
    expect(await requestStatus('gate', user.id)).toEqual({ request_status: 'held', visit_id: null });
  });

  it('refuses initData that is not signed by the channel’s bot, and unknown channels', async () => {
    const user = newUser();
    const queryId = await request('gate', user);
    const forged = tg()
      .gateInitData(queryId)
      .replace(/hash=[0-9a-f]{64}/, `hash=${'0'.repeat(64)}`);
    const res = await gatePost(channels.gate, forged);
    expect(res.status).toBe(401);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(((await res.json()) as { code: string }).code).toBe('INIT_DATA_INVALID');
    expect((await gatePost(channels.all, tg().gateInitData(queryId))).status).toBe(404);
    expect((await gatePost('not-a-channel', tg().gateInitData(queryId))).status).toBe(404);
    expect((await gatePost(channels.gate, tg().gateInitData(queryId).slice(0, 20))).status).toBe(401);
    // None of them decided the query (the rule still will).
    const { rows } = await db.pool.query<{ decided_by: string | null }>(
      'SELECT decided_by FROM join_request_queries WHERE query_id = $1',
      [queryId],
    );
    expect(rows[0]?.decided_by).not.toBe('gate');
  });
});
