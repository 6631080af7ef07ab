// A running Capigram (real app, real worker, real database) wired to the fake Telegram and the
// fake ad platforms, with one site, one bot and channels of each kind. Invitations are inserted
// with SQL (test data): a visit and the pooled link handed to it, the link created at the fake
// Telegram so that revoking it works as in production.
import { randomUUID } from 'node:crypto';
import { addBot } from '../../backend/domain/admin/bots.js';
import { addChannel } from '../../backend/domain/admin/channels.js';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { createTelegramClient } from '../../backend/telegram/client.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';
import {
  DEFAULT_BOT,
  startFakes,
  type FakeBot,
  type FakeChat,
  type Fakes,
  type TgUpdate,
  type WebhookResponse,
} from '../fakes/index.js';

export const OTHER_BOT: FakeBot = {
  token: '888000:TEST-other-capigram-bot-token',
  id: 888000,
  first_name: 'Other',
  username: 'other_test_bot',
};

const admin = { [DEFAULT_BOT.id]: { can_invite_users: true }, [OTHER_BOT.id]: { can_invite_users: true } };
export const CHATS = {
  main: { id: -1001000000001, title: 'Main', type: 'channel', admins: admin },
  priced: { id: -1001000000002, title: 'Paid club', type: 'channel', admins: admin },
  manual: { id: -1001000000003, title: 'Manual club', type: 'channel', admins: admin },
  requests: { id: -1001000000004, title: 'By request', type: 'channel', admins: admin },
  custom: { id: -1001000000005, title: 'Custom', type: 'channel', admins: admin },
  secondSite: { id: -1001000000006, title: 'Second site', type: 'channel', admins: admin },
} satisfies Record<string, FakeChat>;
export type ChannelKey = keyof typeof CHATS;

export const VISIT = {
  href: 'https://shop.example.com/landing?fbclid=IwAR2F4',
  clientIp: '203.0.113.7',
  userAgent: 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)',
  fbc: 'fb.1.1763776512345.IwAR2F4',
  fbp: 'fb.1.1763776500000.1116446470',
};

export interface World {
  db: TestDatabase;
  fakes: Fakes;
  app: TestApp;
  siteId: string;
  secondSiteId: string;
  botId: string;
  otherBotId: string;
  channels: Record<ChannelKey, string>;
  webhookUrl: string;
  secret: string;
  otherSecret: string;
  /** Delivers an update as Telegram would (registered webhook, its secret). */
  deliver(update: TgUpdate): Promise<WebhookResponse>;
  /** A visit and one of our links handed to it; `visit: false` leaves the link in the pool. */
  invitation(channel: ChannelKey, opts?: { joinRequest?: boolean; visit?: boolean }): Promise<Invitation>;
  count(sql: string, params?: unknown[]): Promise<number>;
  close(): Promise<void>;
}

export interface Invitation {
  invitationId: string;
  visitId: string | null;
  inviteLink: string;
}

export async function startWorld(opts: { worker?: boolean } = {}): Promise<World> {
  const fakes = await startFakes({
    telegram: { bots: [DEFAULT_BOT, OTHER_BOT], chats: Object.values(CHATS) },
  });
  const db = await createTestDatabase();
  const app = await startTestApp(db.pool, { worker: opts.worker ?? true, env: { ...fakes.env } });
  const deps = app.deps;

  const { accountId } = await createAccount(db.pool, { name: 'Telegram tests' });
  const { siteId } = await createSite(db.pool, { accountId, name: 'Shop', domains: ['shop.example.com'] });
  const { siteId: secondSiteId } = await createSite(db.pool, {
    accountId,
    name: 'Second',
    domains: ['second.example.com'],
  });
  const { botId, webhookUrl } = await addBot(deps, { accountId, token: DEFAULT_BOT.token });
  const { botId: otherBotId } = await addBot(deps, { accountId, token: OTHER_BOT.token });
  const channel = async (key: ChannelKey, extra: Partial<Parameters<typeof addChannel>[1]> = {}) =>
    (
      await addChannel(deps, {
        siteId,
        botId,
        telegramChannelId: String(CHATS[key].id),
        title: CHATS[key].title,
        ...extra,
      })
    ).channelId;
  const channels: Record<ChannelKey, string> = {
    main: await channel('main', { isDefault: true }),
    priced: await channel('priced', { eventType: 'Purchase', value: 19.9, currency: 'eur' }),
    manual: await channel('manual', { eventType: 'Purchase', manualValue: true }),
    requests: await channel('requests', {
      eventType: 'Lead',
      inviteMode: 'join_request',
      joinRequests: 'approve-attributed',
    }),
    custom: await channel('custom', { eventType: 'Custom', customEventName: 'JoinedVip' }),
    secondSite: await channel('secondSite', { siteId: secondSiteId }),
  };
  await addPixel(deps, { platform: 'meta', siteId, pixelId: '1234567890', accessToken: 'meta-test-token' });

  const secret = fakes.telegram.webhook(DEFAULT_BOT.token)?.secret_token;
  const otherSecret = fakes.telegram.webhook(OTHER_BOT.token)?.secret_token;
  if (!secret || !otherSecret) throw new Error('addBot did not set the webhooks');
  const tg = createTelegramClient({ baseUrl: fakes.env.TELEGRAM_API_URL, token: DEFAULT_BOT.token });

  return {
    db,
    fakes,
    app,
    siteId,
    secondSiteId,
    botId,
    otherBotId,
    channels,
    webhookUrl,
    secret,
    otherSecret,
    deliver: (update) => fakes.telegram.deliverUpdate(DEFAULT_BOT.token, update),
    async invitation(key, o = {}) {
      const link = await tg.createChatInviteLink({
        chat_id: CHATS[key].id,
        name: `cg-${randomUUID().slice(0, 8)}`,
        expire_date: Math.floor(Date.now() / 1000) + 86_400,
        ...(o.joinRequest ? { creates_join_request: true } : { member_limit: 1 }),
      });
      const channelSite = key === 'secondSite' ? secondSiteId : siteId;
      let visitId: string | null = null;
      if (o.visit !== false) {
        const { rows } = await db.pool.query<{ id: string }>(
          `INSERT INTO visits (site_id, temp_id, session_id, href, landing_page, client_ip, user_agent, fbc, fbp, channel_id)
           VALUES ($1, $2, $3, $4, '/landing?fbclid=IwAR2F4', $5, $6, $7, $8, $9) RETURNING id`,
          [
            channelSite,
            randomUUID(),
            randomUUID(),
            VISIT.href,
            VISIT.clientIp,
            VISIT.userAgent,
            VISIT.fbc,
            VISIT.fbp,
            channels[key],
          ],
        );
        visitId = rows[0]!.id;
      }
      const { rows } = await db.pool.query<{ id: string }>(
        `INSERT INTO invitations (channel_id, invite_link, name, creates_join_request, expires_at, visit_id, assigned_at)
         VALUES ($1, $2, $3, $4, now() + interval '1 day', $5, CASE WHEN $5::uuid IS NULL THEN NULL ELSE now() END) RETURNING id`,
        [channels[key], link.invite_link, link.name, o.joinRequest === true, visitId],
      );
      return { invitationId: rows[0]!.id, visitId, inviteLink: link.invite_link };
    },
    async count(sql, params = []) {
      const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, params);
      return rows[0]!.n;
    },
    async close() {
      await app.stop();
      await fakes.closeAll();
      await db.drop();
    },
  };
}

let nextUser = 777_000_100;
/** A Telegram user id no other test of the file uses. */
export function newUser(): { id: number } {
  return { id: nextUser++ };
}

/** Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined | false>,
  timeoutMs = 5000,
  what = 'condition',
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
