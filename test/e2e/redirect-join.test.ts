// An ad click on `/r/…` (no page of the site was seen) and the Telegram join it leads to, through
// the real webhook and worker: every platform gets the site's own URL as the join's page, never
// Capigram's `/r/` URL, which the join's conversion takes from its visit.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { addBot } from '../../backend/domain/admin/bots.js';
import { addChannel } from '../../backend/domain/admin/channels.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { refillAllPools } from '../../backend/domain/invites/refill.js';
import { DEFAULT_BOT, startFakes, type FakeChat, type Fakes } from '../fakes/index.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

const admins = { [DEFAULT_BOT.id]: { can_invite_users: true } };
const CHAT = { id: -1001000000301, title: 'Main channel', type: 'channel', admins } satisfies FakeChat;
const META = '1234567890';
const TIKTOK = 'CTIKTOKPIXEL01';
const SNAP = 'snap-pixel-0001';

let fakes: Fakes;
let db: TestDatabase;
let app: TestApp;
let site: { siteId: string; websiteId: string };
let channelId: string;

beforeAll(async () => {
  fakes = await startFakes({ telegram: { chats: [CHAT] } });
  db = await createTestDatabase();
  app = await startTestApp(db.pool, { worker: true, env: { ...fakes.env } });
  const deps = app.deps;
  const { accountId } = await createAccount(db.pool, { name: 'Redirect join' });
  site = await createSite(db.pool, { accountId, name: 'Shop', domains: ['shop.example.com'] });
  const { botId } = await addBot(deps, { accountId, token: DEFAULT_BOT.token });
  channelId = (
    await addChannel(deps, {
      siteId: site.siteId,
      botId,
      telegramChannelId: String(CHAT.id),
      title: CHAT.title,
      isDefault: true,
    })
  ).channelId;
  await addPixel(deps, {
    platform: 'meta',
    siteId: site.siteId,
    pixelId: META,
    accessToken: 'meta-test-token',
  });
  await addPixel(deps, {
    platform: 'tiktok',
    siteId: site.siteId,
    pixelCode: TIKTOK,
    accessToken: 'tiktok-test-token',
  });
  await addPixel(deps, {
    platform: 'snapchat',
    siteId: site.siteId,
    pixelId: SNAP,
    accessToken: 'snap-test-token',
  });
  await db.pool.query('UPDATE channels SET pool_target = 2');
  await refillAllPools(app.deps);
});
afterAll(async () => {
  await app.stop();
  await fakes.closeAll();
  await db.drop();
});

/** A click on the ad's `/r/` link: the Telegram invite link it was sent on to. */
async function adClick(): Promise<string> {
  const res = await fetch(
    `${app.url}/r/${site.websiteId}/${channelId}?fbclid=IwAR-${randomUUID().slice(0, 8)}`,
    {
      redirect: 'manual',
      headers: {
        'user-agent': 'Mozilla/5.0 (iPhone) RedirectJoin',
        referer: 'https://l.facebook.com/',
        'x-capigram-client-ip': '203.0.113.61',
      },
    },
  );
  expect(res.status, await res.clone().text()).toBe(302);
  return res.headers.get('location')!;
}

async function joinThrough(link: string, userId: number): Promise<string> {
  const res = await fakes.telegram.deliverUpdate(
    DEFAULT_BOT.token,
    fakes.telegram.chatMemberJoined({ chatId: CHAT.id, user: { id: userId }, inviteLink: link }),
  );
  expect(res.status).toBe(200);
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { rows } = await db.pool.query<{ id: string; event_source_url: string | null }>(
      'SELECT id, event_source_url FROM conversions WHERE telegram_user_id = $1',
      [userId],
    );
    if (rows[0]) {
      // The conversion keeps its visit's URL as recorded; the page is decided when it is sent.
      expect(rows[0].event_source_url).toContain('/r/');
      return `cnv_${rows[0].id}`;
    }
    if (Date.now() > deadline) throw new Error('the join was not converted');
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function eventually<T>(what: string, find: () => T | undefined): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const found = find();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`never received: ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function pagesSent(eventId: string) {
  const meta = await eventually('meta', () =>
    fakes.meta.events(META).find((e) => e.event.event_id === eventId),
  );
  const tiktok = await eventually('tiktok', () =>
    fakes.tiktok.events(TIKTOK).find((e) => e.event.event_id === eventId),
  );
  const snap = await eventually('snap', () =>
    fakes.snapchat.events(SNAP).find((e) => e.event.event_id === eventId),
  );
  return {
    meta: meta.event.event_source_url,
    tiktok: tiktok.event.page?.url,
    snap: snap.event.event_source_url,
  };
}

describe('a join through an /r/ ad link', () => {
  it("is sent with the site's first domain's root when the site has no URL", async () => {
    const eventId = await joinThrough(await adClick(), 777_300_001);
    const page = 'https://shop.example.com/';
    expect(await pagesSent(eventId)).toEqual({ meta: page, tiktok: page, snap: page });
  });

  it("is sent with the site's own URL when it has one", async () => {
    await db.pool.query('UPDATE sites SET url = $2 WHERE id = $1', [
      site.siteId,
      'https://www.shop.example.com/start',
    ]);
    const eventId = await joinThrough(await adClick(), 777_300_002);
    const page = 'https://www.shop.example.com/start';
    expect(await pagesSent(eventId)).toEqual({ meta: page, tiktok: page, snap: page });
    const all = [...fakes.meta.events(META), ...fakes.snapchat.events(SNAP)].map(
      (e) => e.event.event_source_url,
    );
    expect(all.some((u) => u?.includes('/r/'))).toBe(false);
  });
});
