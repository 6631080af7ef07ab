// Bots registered before entries asked Telegram only for chat_member, chat_join_request and
// my_chat_member: Telegram would never send them `/start`. A starting worker sets their webhook
// again, at the same URL, with `message` added and a fresh secret that it stores, with no
// operator step; the updates Telegram then sends are accepted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { addBot } from '../../backend/domain/admin/bots.js';
import { createTelegramClient } from '../../backend/telegram/client.js';
import { DEFAULT_BOT, startFakes, type Fakes } from '../fakes/index.js';
import { startTestApp, testDeps, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

const OLD_UPDATES = ['chat_member', 'chat_join_request', 'my_chat_member'];

let fakes: Fakes;
let db: TestDatabase;
let app: TestApp | undefined;
beforeAll(async () => {
  fakes = await startFakes({});
  db = await createTestDatabase();
});
afterAll(async () => {
  await app?.stop();
  await fakes.closeAll();
  await db.drop();
});

describe('webhook upgrade', () => {
  it('a worker start sets message into the allowed_updates of bots registered before, and their updates still get in', async () => {
    const deps = testDeps(db.pool, { ...fakes.env, PUBLIC_URL: 'http://127.0.0.1:9' });
    const { accountId } = await createAccount(db.pool, { name: 'Upgrade' });
    const { botId, webhookUrl } = await addBot(deps, { accountId, token: DEFAULT_BOT.token });
    // As a bot added before this version stands: the old list at Telegram, nothing recorded here.
    const tg = createTelegramClient({ baseUrl: fakes.env.TELEGRAM_API_URL, token: DEFAULT_BOT.token });
    const oldSecret = fakes.telegram.webhook(DEFAULT_BOT.token)!.secret_token!;
    await tg.setWebhook({ url: webhookUrl, secret_token: oldSecret, allowed_updates: OLD_UPDATES });
    await db.pool.query('UPDATE bots SET webhook_allowed_updates = NULL WHERE id = $1', [botId]);

    app = await startTestApp(db.pool, { worker: true, env: { ...fakes.env } });
    await fakes.telegram.waitFor(
      () => fakes.telegram.webhook(DEFAULT_BOT.token)?.allowed_updates?.includes('message') === true,
      10_000,
    );
    const hook = fakes.telegram.webhook(DEFAULT_BOT.token)!;
    expect(hook.url).toBe(webhookUrl); // the same URL, not re-derived from this process's PUBLIC_URL
    expect(hook.secret_token).not.toBe(oldSecret);
    // Telegram took it before the transaction that stores the new secret commits: wait for that.
    const stored = async () =>
      (
        await db.pool.query<{ u: string[] | null }>(
          'SELECT webhook_allowed_updates AS u FROM bots WHERE id = $1',
          [botId],
        )
      ).rows[0]!.u;
    for (let i = 0; i < 100 && (await stored()) === null; i++) await new Promise((r) => setTimeout(r, 50));
    expect(new Set(await stored())).toEqual(new Set(['message', ...OLD_UPDATES]));

    // The stored secret is the one Telegram now sends: a /start reaches the app and is accepted.
    const res = await fakes.telegram.sendUpdate(
      `${app.url}/backend/telegram/${botId}`,
      hook.secret_token,
      fakes.telegram.startCommand({ user: { id: 777_330_001 } }),
    );
    expect(res.status).toBe(200);
    const old = await fakes.telegram.sendUpdate(
      `${app.url}/backend/telegram/${botId}`,
      oldSecret,
      fakes.telegram.startCommand({ user: { id: 777_330_001 } }),
    );
    // The secret before the upgrade still counts for its 10 minutes (updates in flight), then not.
    expect(old.status).toBe(200);
    await app.deps.pool.query(
      `UPDATE bots SET webhook_secret_changed_at = now() - interval '11 minutes' WHERE id = $1`,
      [botId],
    );
    const late = await fakes.telegram.sendUpdate(
      `${app.url}/backend/telegram/${botId}`,
      oldSecret,
      fakes.telegram.startCommand({ user: { id: 777_330_002 } }),
    );
    expect(late.status).toBe(401);
    const calls = fakes.telegram.calls('setWebhook').length;

    // Done once: a second run finds nothing to do.
    const { upgradeWebhooks } = await import('../../backend/domain/telegram/webhook-upgrade.js');
    expect(await upgradeWebhooks(app.deps)).toEqual({ upgraded: 0, failed: 0 });
    expect(fakes.telegram.calls('setWebhook')).toHaveLength(calls);
  });
});
