// Update forwarding through the real webhook and worker: every update of a bot with a forward URL
// reaches the operator's backend (a real HTTP server on loopback) after Capigram handled it, the
// same JSON with the operator's secret, at least once, in order per user, retried on non-2xx.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { updateBot } from '../../backend/domain/admin/bot-update.js';
import { purgeTelegramUpdates } from '../../backend/domain/telegram/purge.js';
import { DEFAULT_BOT, type TgUpdate } from '../fakes/index.js';
import { startOperatorBackend, type OperatorBackend } from './operator-backend.js';
import { CHATS, eventually, newUser, startWorld, type World } from './world.js';

let w: World;
let op: OperatorBackend;
const SECRET = 'operator-secret_42';

beforeAll(async () => {
  w = await startWorld();
  op = await startOperatorBackend();
  await updateBot(w.app.deps, { botId: w.botId, forwardUrl: op.url, forwardSecret: SECRET });
});
afterAll(async () => {
  await w.close();
  await op.close();
});

const chatId = CHATS.requests.id;
const receivedFor = (updateId: number) =>
  op.received.filter((r) => (JSON.parse(r.body) as { update_id: number }).update_id === updateId);
const takenIds = () => op.taken().map((u) => u.update_id);
/** No forward job waiting or running (one that lost its key to a newer one while running is dead, and stays). */
const forwardsIdle = () =>
  eventually(
    async () =>
      (await w.count(
        `graphile_worker.jobs WHERE task_identifier = 'telegram_forward_updates' AND attempts < max_attempts`,
      )) === 0,
    10_000,
    'forward jobs to finish',
  );
/** A user's message to the bot (not a type the fake's TgUpdate names: Capigram itself does not act on it). */
const message = (updateId: number, userId: number, text: string): TgUpdate =>
  ({
    update_id: updateId,
    message: {
      message_id: updateId % 100_000,
      from: { id: userId, is_bot: false, first_name: 'U' },
      chat: { id: userId, type: 'private' },
      date: Math.floor(Date.now() / 1000),
      text,
    },
  }) as unknown as TgUpdate;

describe('forwarding', () => {
  it('turning it on asks Telegram for every update type, since the backend answers messages and buttons', () => {
    const allowed = w.fakes.telegram.webhook(DEFAULT_BOT.token)?.allowed_updates ?? [];
    expect(allowed).toEqual(
      expect.arrayContaining([
        'message',
        'callback_query',
        'chat_member',
        'chat_join_request',
        'my_chat_member',
        'pre_checkout_query',
        'subscription',
      ]),
    );
  });

  it('a forward answered 500 first is retried and then taken once, as the same JSON with the secret, after Capigram handled it', async () => {
    const user = newUser();
    let first = true;
    op.answerWith(() => {
      if (!first) return 200;
      first = false;
      return 500;
    });
    const counted = async () => {
      const { values } = await w.app.deps.metrics.telegramForwards.get();
      return Object.fromEntries(
        ['sent', 'refused', 'dropped'].map((o) => [
          o,
          values.find((v) => v.labels.outcome === o)?.value ?? 0,
        ]),
      );
    };
    const before = await counted();
    const update = w.fakes.telegram.chatJoinRequest({ chatId, user });
    expect((await w.deliver(update)).status).toBe(200);
    // Capigram handled it before anything was forwarded: the request is recorded.
    expect(
      await w.count(`memberships WHERE telegram_user_id = $1 AND kind = 'join_request'`, [user.id]),
    ).toBe(1);

    // While it waits for its retry, the update (names, texts) is kept sealed, never in clear.
    await eventually(async () => receivedFor(update.update_id).length === 1, 5000, 'the first attempt');
    const waiting = await w.db.pool.query<{ body_enc: string | null }>(
      'SELECT body_enc FROM telegram_forwards WHERE update_id = $1',
      [update.update_id],
    );
    expect(waiting.rows[0]!.body_enc).toMatch(/^v1\./);
    expect(waiting.rows[0]!.body_enc).not.toContain('first_name');
    await eventually(
      async () => receivedFor(update.update_id).some((r) => r.status === 200),
      10_000,
      'the forward to be taken',
    );
    const got = receivedFor(update.update_id);
    expect(got.map((r) => r.status)).toEqual([500, 200]);
    // The retry waits (Telegram-like backoff), it does not hammer the backend.
    expect(got[1]!.at - got[0]!.at).toBeGreaterThanOrEqual(2000);
    for (const r of got) {
      expect(r.body).toBe(JSON.stringify(w.fakes.telegram.asSeenBy(DEFAULT_BOT, update)));
      expect(r.secret).toBe(SECRET);
      expect(r.contentType).toBe('application/json');
    }
    await forwardsIdle();
    await new Promise((r) => setTimeout(r, 300));
    expect(receivedFor(update.update_id)).toHaveLength(2);
    const { rows } = await w.db.pool.query<{
      attempts: number;
      delivered_at: Date | null;
      last_error: string | null;
      body_enc: string | null;
    }>('SELECT attempts, delivered_at, last_error, body_enc FROM telegram_forwards WHERE update_id = $1', [
      update.update_id,
    ]);
    // Sent: the body is gone, only the record that it was sent stays.
    expect(rows).toEqual([{ attempts: 2, delivered_at: expect.any(Date), last_error: null, body_enc: null }]);
    // capigram_telegram_update_forwards_total: the refused attempt and the sent one.
    expect(await counted()).toEqual({
      sent: before.sent! + 1,
      refused: before.refused! + 1,
      dropped: before.dropped,
    });
  });

  it('an update Telegram sends again (same update_id) is forwarded once', async () => {
    op.answerWith(() => 200);
    const update = w.fakes.telegram.chatJoinRequest({ chatId, user: newUser() });
    await w.deliver(update);
    await w.deliver(update);
    await eventually(async () => receivedFor(update.update_id).length === 1, 5000, 'the forward');
    await forwardsIdle();
    expect(receivedFor(update.update_id)).toHaveLength(1);
  });

  it('updates Capigram does not act on (a message to the bot) are forwarded too', async () => {
    op.answerWith(() => 200);
    const user = newUser();
    const update = message(990_100_001, user.id, 'hello');
    expect((await w.deliver(update)).status).toBe(200);
    await eventually(async () => receivedFor(update.update_id).length === 1, 5000, 'the forward');
    expect(JSON.parse(receivedFor(update.update_id)[0]!.body)).toEqual(update);
    // Sent again by Telegram: still once.
    await w.deliver(update);
    await forwardsIdle();
    expect(receivedFor(update.update_id)).toHaveLength(1);
  });

  it("in order per user: a user's update never overtakes their earlier one, and other users are not held back", async () => {
    const a = newUser();
    const b = newUser();
    const a1 = message(990_200_001, a.id, 'first');
    const a2 = message(990_200_002, a.id, 'second');
    const b1 = message(990_200_003, b.id, 'other user');
    let refused = false;
    // A's first update is refused once; everything else is taken.
    op.answerWith((body) => {
      if (!refused && (JSON.parse(body) as { update_id: number }).update_id === a1.update_id) {
        refused = true;
        return 500;
      }
      return 200;
    });
    for (const u of [a1, a2, b1]) await w.deliver(u);
    await eventually(async () => takenIds().includes(a2.update_id), 15_000, "A's second update to be taken");
    const ids = [a1, a2, b1].map((u) => u.update_id);
    const order = op.received
      .filter((r) => ids.includes((JSON.parse(r.body) as { update_id: number }).update_id))
      .map((r) => [(JSON.parse(r.body) as { update_id: number }).update_id, r.status]);
    // A2 was not even tried before A1 was taken; B1 went while A1 waited for its retry.
    expect(order.filter(([id]) => id !== b1.update_id)).toEqual([
      [a1.update_id, 500],
      [a1.update_id, 200],
      [a2.update_id, 200],
    ]);
    const taken = takenIds();
    expect(taken.indexOf(b1.update_id)).toBeLessThan(taken.indexOf(a1.update_id));
    await forwardsIdle();
  });

  it('forwarding turned off: nothing more is forwarded', async () => {
    await updateBot(w.app.deps, { botId: w.botId, noForward: true });
    // Back to Capigram's own updates: Telegram would not even send a button press now.
    expect(w.fakes.telegram.webhook(DEFAULT_BOT.token)?.allowed_updates).toEqual([
      'message',
      'chat_member',
      'chat_join_request',
      'my_chat_member',
    ]);
    const update = w.fakes.telegram.chatJoinRequest({ chatId, user: newUser() });
    const before = op.received.length;
    await w.deliver(update);
    await new Promise((r) => setTimeout(r, 500));
    expect(op.received.length).toBe(before);
    expect(await w.count('telegram_forwards WHERE update_id = $1', [update.update_id])).toBe(0);
  });

  it('the daily purge deletes the records of forwards sent or dropped a week ago, never one still waiting', async () => {
    const now = new Date();
    const old = new Date(now.getTime() - 8 * 24 * 3600_000);
    await w.db.pool.query(
      `INSERT INTO telegram_forwards (bot_id, order_key, update_id, body_enc, created_at, delivered_at, dropped_at) VALUES
         ($1, 'user:1', 80001, NULL, $2, $2, NULL), ($1, 'user:1', 80002, NULL, $2, NULL, $2),
         ($1, 'user:2', 80003, 'v1.x.y.z', $2, NULL, NULL), ($1, 'user:3', 80004, NULL, $3, $3, NULL)`,
      [w.botId, old, now],
    );
    await purgeTelegramUpdates(w.db.pool, now);
    expect(
      (
        await w.db.pool.query<{ update_id: string }>(
          'SELECT update_id::text FROM telegram_forwards WHERE update_id BETWEEN 80001 AND 80004 ORDER BY 1',
        )
      ).rows.map((r) => r.update_id),
    ).toEqual(['80003', '80004']);
    await w.db.pool.query('DELETE FROM telegram_forwards WHERE update_id = 80003');
  });
});
