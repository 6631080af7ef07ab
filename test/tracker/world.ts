// A running Capigram (real app on a real database) wired to the fake Telegram and fake ad
// platforms, seeded with one site (domain example.com) that has a Meta pixel, a bot and two
// channels: `main` (the default, member_limit links) and `requests` (join-request links).
import { randomInt, randomUUID } from 'node:crypto';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { addBot } from '../../backend/domain/admin/bots.js';
import { addChannel } from '../../backend/domain/admin/channels.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { DEFAULT_BOT, startFakes, type FakeChat, type Fakes } from '../fakes/index.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

const admins = { [DEFAULT_BOT.id]: { can_invite_users: true } };
export const CHATS = {
  main: { id: -1001000000101, title: 'Main', type: 'channel', username: 'main_channel', admins },
  requests: { id: -1001000000102, title: 'By request', type: 'channel', admins },
  other: { id: -1001000000103, title: 'Other site', type: 'channel', admins },
  /** Not added by startWorld: for a test's own site. */
  spare: { id: -1001000000104, title: 'Spare', type: 'channel', admins },
} satisfies Record<string, FakeChat>;

export const ORIGIN = 'https://shop.example.com';

export interface World {
  db: TestDatabase;
  fakes: Fakes;
  app: TestApp;
  accountId: string;
  siteId: string;
  websiteId: string;
  /** A second site of the account (domain other.test), for tenant checks. */
  otherWebsiteId: string;
  botId: string;
  channels: { main: string; requests: string; other: string };
  /** POSTs JSON to the app from the site's origin and a fresh client IP unless told otherwise. */
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Response>;
  /** GETs without following redirects. */
  get(pathAndQuery: string, headers?: Record<string, string>): Promise<Response>;
  count(sqlFrom: string, params?: unknown[]): Promise<number>;
  close(): Promise<void>;
}

/** A random documentation-range address, so each test has its own rate-limit budget. */
export function clientIp(): string {
  return `198.51.${randomInt(0, 256)}.${randomInt(1, 255)}`;
}

export function initBody<T extends Record<string, unknown> = Record<never, never>>(
  world: Pick<World, 'websiteId'>,
  extra?: T,
) {
  return {
    websiteId: world.websiteId,
    tempId: randomUUID() as string,
    sessionId: randomUUID() as string,
    href: `${ORIGIN}/landing`,
    ...(extra as T),
  };
}

export async function startWorld(
  opts: { env?: Record<string, string>; poolTarget?: number } = {},
): Promise<World> {
  const fakes = await startFakes({ telegram: { chats: Object.values(CHATS) } });
  const db = await createTestDatabase();
  const app = await startTestApp(db.pool, { env: { ...fakes.env, ...opts.env } });
  const deps = app.deps;

  const { accountId } = await createAccount(db.pool, { name: 'Tracker tests' });
  const { siteId, websiteId } = await createSite(db.pool, {
    accountId,
    name: 'Shop',
    domains: ['example.com'],
  });
  const other = await createSite(db.pool, { accountId, name: 'Other', domains: ['other.test'] });
  const { botId } = await addBot(deps, { accountId, token: DEFAULT_BOT.token, webhook: false });
  const channel = async (
    key: keyof typeof CHATS,
    site: string,
    extra: Partial<Parameters<typeof addChannel>[1]> = {},
  ) =>
    (
      await addChannel(deps, {
        siteId: site,
        botId,
        telegramChannelId: String(CHATS[key].id),
        title: CHATS[key].title,
        ...extra,
      })
    ).channelId;
  const channels = {
    main: await channel('main', siteId, {
      isDefault: true,
      username: CHATS.main.username,
      publicInviteUrl: 'https://t.me/main_channel_public',
    }),
    requests: await channel('requests', siteId, { inviteMode: 'join_request' }),
    other: await channel('other', other.siteId),
  };
  if (opts.poolTarget !== undefined)
    await db.pool.query('UPDATE channels SET pool_target = $1', [opts.poolTarget]);
  await addPixel(deps, { platform: 'meta', siteId, pixelId: '1234567890', accessToken: 'meta-test-token' });

  const world: World = {
    db,
    fakes,
    app,
    accountId,
    siteId,
    websiteId,
    otherWebsiteId: other.websiteId,
    botId,
    channels,
    post: (path, body, headers = {}) =>
      fetch(`${app.url}${path}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          origin: ORIGIN,
          'x-capigram-client-ip': clientIp(),
          ...headers,
        },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    get: (pathAndQuery, headers = {}) =>
      fetch(`${app.url}${pathAndQuery}`, {
        redirect: 'manual',
        headers: { 'x-capigram-client-ip': clientIp(), ...headers },
      }),
    async count(sqlFrom, params = []) {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${sqlFrom}`,
        params,
      );
      return rows[0]!.n;
    },
    async close() {
      await app.stop();
      await fakes.closeAll();
      await db.drop();
    },
  };
  return world;
}

export async function problem(res: Response): Promise<{ code: string; status: number; detail?: string }> {
  if (!(res.headers.get('content-type') ?? '').startsWith('application/problem+json')) {
    throw new Error(
      `expected problem+json, got ${res.status} ${res.headers.get('content-type')}: ${await res.text()}`,
    );
  }
  return (await res.json()) as { code: string; status: number; detail?: string };
}
