// A webhook secret change never turns away updates Telegram already had under the old secret:
// the previous secret is accepted for 10 minutes after `bot webhook`, and a setWebhook whose
// answer was lost (Telegram did take it) keeps both accepted until an update shows the new one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setBotWebhook } from '../../backend/domain/admin/bots.js';
import { DEFAULT_BOT } from '../fakes/index.js';
import { startWorld, type World } from './world.js';

let w: World;
let nextUpdate = 900_000;
beforeAll(async () => {
  w = await startWorld({ worker: false });
});
afterAll(async () => {
  await w.close();
});

/** An update (a private message nobody asked about) posted with `secret`: the status Capigram answers. */
async function post(secret: string): Promise<number> {
  const res = await fetch(w.webhookUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret },
    body: JSON.stringify({
      update_id: nextUpdate++,
      message: {
        message_id: 1,
        date: Math.floor(Date.now() / 1000),
        chat: { id: 5, type: 'private' },
        text: 'hi',
      },
    }),
  });
  await res.body?.cancel();
  return res.status;
}

const liveSecret = () => w.fakes.telegram.webhook(DEFAULT_BOT.token)!.secret_token!;
/** Moves the bot's last secret change `minutes` into the past. */
const age = (minutes: number) =>
  w.db.pool.query(
    `UPDATE bots SET webhook_secret_changed_at = now() - make_interval(mins => $2) WHERE id = $1`,
    [w.botId, minutes],
  );

describe('the previous webhook secret', () => {
  it('is accepted for 10 minutes after `bot webhook` sets a new one, and refused after', async () => {
    const old = liveSecret();
    expect(await post(old)).toBe(200);
    await setBotWebhook(w.app.deps, w.botId);
    const fresh = liveSecret();
    expect(fresh).not.toBe(old);

    expect(await post(fresh)).toBe(200);
    expect(await post(old)).toBe(200); // in flight during the change
    await age(9);
    expect(await post(old)).toBe(200);
    await age(11);
    expect(await post(old)).toBe(401);
    expect(await post(fresh)).toBe(200);
    expect(await post('never-set')).toBe(401);
  });

  it('a secret two changes old is refused at once', async () => {
    const first = liveSecret();
    await setBotWebhook(w.app.deps, w.botId);
    await setBotWebhook(w.app.deps, w.botId);
    expect(await post(first)).toBe(401);
    expect(await post(liveSecret())).toBe(200);
  });
});

describe('a setWebhook whose answer was lost', () => {
  it('Telegram took it: both secrets accepted until an update arrives with the new one, then the window alone', async () => {
    const old = liveSecret();
    w.fakes.telegram.failNext(1, { type: 'lostAnswer' });
    const result = await setBotWebhook(w.app.deps, w.botId);
    expect(result.warning).toContain(
      "Telegram's answer to setWebhook was lost; getWebhookInfo shows the webhook set",
    );
    const fresh = liveSecret();
    expect(fresh).not.toBe(old); // the fake applied it

    await age(60); // long past the window: still accepted, the change is not confirmed
    expect(await post(old)).toBe(200);
    expect(await post(fresh)).toBe(200); // confirms it
    expect(await post(old)).toBe(401);
  });

  it('Telegram did not take it (no answer, webhook elsewhere): the call fails and the old secret stays', async () => {
    const old = liveSecret();
    await w.db.pool.query(
      `UPDATE bots SET webhook_secret_changed_at = now() - interval '1 hour' WHERE id = $1`,
      [w.botId],
    );
    // A request Telegram never answers: the client gives up; getWebhookInfo shows another URL.
    const hook = w.fakes.telegram.webhook(DEFAULT_BOT.token)!;
    const original = hook.url;
    hook.url = 'https://elsewhere.example.com/hook';
    w.fakes.telegram.failNext(1, { type: 'reset' });
    await expect(setBotWebhook(w.app.deps, w.botId)).rejects.toThrow(/Telegram refused the webhook/);
    hook.url = original;
    expect(liveSecret()).toBe(old);
    expect(await post(old)).toBe(200);
  });
});
