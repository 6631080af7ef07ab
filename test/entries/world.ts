// A running Capigram (real app, worker and database) with a site whose visitors go to a bot: fake
// Telegram (one bot, a private and a public channel) and fake Meta. Visitors land with click ids
// through `track/init` and click an entry through `track/entry`, over HTTP as a proxy would.
import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { addBot } from '../../backend/domain/admin/bots.js';
import { addChannel } from '../../backend/domain/admin/channels.js';
import { addEntry } from '../../backend/domain/admin/entries.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import {
  DEFAULT_BOT,
  startFakes,
  type FakeChat,
  type Fakes,
  type MetaAcceptedEvent,
} from '../fakes/index.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

const admins = { [DEFAULT_BOT.id]: { can_invite_users: true } };
export const CHATS = {
  club: { id: -1001000000301, title: 'Private club', type: 'channel', admins },
  news: { id: -1001000000302, title: 'Public news', type: 'channel', username: 'public_news_cg', admins },
} satisfies Record<string, FakeChat>;
export const ORIGIN = 'https://shop.example.com';
export const PIXEL = '1234567890';

export interface EntryWorld {
  fakes: Fakes;
  db: TestDatabase;
  app: TestApp;
  accountId: string;
  siteId: string;
  websiteId: string;
  botId: string;
  channels: { club: string; news: string };
  /** Kind start, event Lead, button to the public channel, welcome text; the site's default. */
  entryId: string;
  close(): Promise<void>;
}

export async function startEntryWorld(
  env: Record<string, string> = {},
  logTo?: { write(line: string): void },
): Promise<EntryWorld> {
  const fakes = await startFakes({ telegram: { chats: Object.values(CHATS) } });
  const db = await createTestDatabase();
  const app = await startTestApp(db.pool, {
    worker: true,
    env: { ...fakes.env, ...env },
    ...(logTo ? { logTo } : {}),
  });
  const deps = app.deps;
  const { accountId } = await createAccount(db.pool, { name: 'Entries' });
  const site = await createSite(db.pool, { accountId, name: 'Shop', domains: ['shop.example.com'] });
  const { botId } = await addBot(deps, { accountId, token: DEFAULT_BOT.token });
  const channels = {
    club: (
      await addChannel(deps, {
        siteId: site.siteId,
        botId,
        telegramChannelId: String(CHATS.club.id),
        title: CHATS.club.title,
        isDefault: true,
      })
    ).channelId,
    news: (
      await addChannel(deps, {
        siteId: site.siteId,
        botId,
        telegramChannelId: String(CHATS.news.id),
        title: CHATS.news.title,
        username: CHATS.news.username,
      })
    ).channelId,
  };
  await addPixel(deps, {
    platform: 'meta',
    siteId: site.siteId,
    pixelId: PIXEL,
    accessToken: 'meta-test-token',
  });
  const { entryId } = await addEntry(db.pool, {
    siteId: site.siteId,
    botId,
    channelId: channels.news,
    welcomeText: 'Welcome to the shop bot!',
  });
  return {
    fakes,
    db,
    app,
    accountId,
    siteId: site.siteId,
    websiteId: site.websiteId,
    botId,
    channels,
    entryId,
    async close() {
      await app.stop();
      await fakes.closeAll();
      await db.drop();
    },
  };
}

export interface Visitor {
  tempId: string;
  sessionId: string;
  ip: string;
  userAgent: string;
  href: string;
  fbc: string;
  fbp: string;
}

let n = 10;
export function newVisitor(): Visitor {
  const click = `IwAR${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  n++;
  return {
    tempId: randomUUID(),
    sessionId: randomUUID(),
    ip: `203.0.113.${n}`,
    userAgent: `Mozilla/5.0 (iPhone; CPU iPhone OS 17_${n} like Mac OS X) AppleWebKit/605.1.15`,
    href: `${ORIGIN}/landing?fbclid=${click}&utm_source=facebook`,
    fbc: `fb.1.${Date.now() - 60_000}.${click}`,
    fbp: `fb.1.${Date.now() - 120_000}.${1_000_000_000 + n}`,
  };
}

/** A pageview with the ad's click ids, then a click on the entry link. Returns the visit and the deep link. */
export async function landAndEnter(
  w: EntryWorld,
  v: Visitor,
  entryId?: string,
): Promise<{ visitId: string; location: string }> {
  const forwarded = { 'x-capigram-client-ip': v.ip, 'x-capigram-client-user-agent': v.userAgent };
  const init = await fetch(`${w.app.url}/backend/track/init`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: ORIGIN, ...forwarded },
    body: JSON.stringify({
      websiteId: w.websiteId,
      tempId: v.tempId,
      sessionId: v.sessionId,
      visitRequestId: randomUUID(),
      href: v.href,
      landingPage: new URL(v.href).pathname + new URL(v.href).search,
      fbc: v.fbc,
      fbp: v.fbp,
    }),
  });
  expect(init.status).toBe(200);
  const { visitId } = (await init.json()) as { visitId: string };
  const query = new URLSearchParams({
    website: w.websiteId,
    tid: v.tempId,
    sid: v.sessionId,
    ...(entryId ? { entry: entryId } : {}),
  });
  const res = await fetch(`${w.app.url}/backend/track/entry?${query}`, {
    redirect: 'manual',
    headers: { referer: v.href, ...forwarded },
  });
  expect(res.status).toBe(302);
  return { visitId, location: res.headers.get('location')! };
}

export function payloadOf(location: string): string {
  return new URL(location).searchParams.get('start') ?? new URL(location).searchParams.get('startapp')!;
}

export const metaEvents = (w: EntryWorld, name?: string): MetaAcceptedEvent[] =>
  w.fakes.meta.events(PIXEL).filter((e) => name === undefined || e.event.event_name === name);

/** The worker has nothing left to do: every send delivered, every Telegram action run. */
export async function settled(w: EntryWorld): Promise<void> {
  const end = Date.now() + 10_000;
  for (;;) {
    const { rows } = await w.db.pool.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM graphile_worker.jobs WHERE task_identifier <> 'refill_invites' AND attempts < max_attempts)
            + (SELECT count(*) FROM sends WHERE status = 'pending') AS n`,
    );
    if (Number(rows[0]!.n) === 0) return;
    if (Date.now() > end) throw new Error('the worker did not settle');
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function conversionsOf(w: EntryWorld, userId: number) {
  const { rows } = await w.db.pool.query<{
    id: string;
    event_type: string;
    visit_id: string | null;
    channel_id: string | null;
  }>(
    'SELECT id, event_type, visit_id, channel_id FROM conversions WHERE telegram_user_id = $1 ORDER BY created_at',
    [userId],
  );
  return rows;
}
