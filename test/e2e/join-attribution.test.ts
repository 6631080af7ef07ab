// The story Capigram exists for, over HTTP end to end: a visitor lands from an ad (track/init),
// clicks "join" (track/invite → a pooled Telegram link), joins the channel (Telegram posts the
// chat_member update to the webhook), and Meta receives one Subscribe carrying that visit's click
// ids, IP, User-Agent and page. Real app, worker and database; fake Telegram and fake Meta.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { addBot } from '../../backend/domain/admin/bots.js';
import { addChannel } from '../../backend/domain/admin/channels.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { createSite } from '../../backend/domain/admin/sites.js';
import { refillAllPools } from '../../backend/domain/invites/refill.js';
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
const CHATS = {
  main: { id: -1001000000201, title: 'Main channel', type: 'channel', admins },
  requests: { id: -1001000000202, title: 'Members by request', type: 'channel', admins },
} satisfies Record<string, FakeChat>;
const ORIGIN = 'https://shop.example.com';
const PIXEL = '1234567890';

let fakes: Fakes;
let db: TestDatabase;
let app: TestApp;
let websiteId: string;
let channels: { main: string; requests: string };

beforeAll(async () => {
  fakes = await startFakes({ telegram: { chats: Object.values(CHATS) } });
  db = await createTestDatabase();
  app = await startTestApp(db.pool, { worker: true, env: { ...fakes.env } });
  const deps = app.deps;
  const { accountId } = await createAccount(db.pool, { name: 'E2E' });
  const site = await createSite(db.pool, { accountId, name: 'Shop', domains: ['shop.example.com'] });
  websiteId = site.websiteId;
  const { botId } = await addBot(deps, { accountId, token: DEFAULT_BOT.token });
  channels = {
    main: (
      await addChannel(deps, {
        siteId: site.siteId,
        botId,
        telegramChannelId: String(CHATS.main.id),
        title: CHATS.main.title,
        isDefault: true,
      })
    ).channelId,
    requests: (
      await addChannel(deps, {
        siteId: site.siteId,
        botId,
        telegramChannelId: String(CHATS.requests.id),
        title: CHATS.requests.title,
        inviteMode: 'join_request',
      })
    ).channelId,
  };
  await addPixel(deps, {
    platform: 'meta',
    siteId: site.siteId,
    pixelId: PIXEL,
    accessToken: 'meta-test-token',
  });
  // Small pools, filled before any click, so clicks are answered from the database.
  await db.pool.query('UPDATE channels SET pool_target = 2');
  await refillAllPools(app.deps);
});
afterAll(async () => {
  await app.stop();
  await fakes.closeAll();
  await db.drop();
});

interface Visitor {
  tempId: string;
  sessionId: string;
  ip: string;
  userAgent: string;
  href: string;
  fbc: string;
  fbp: string;
}

let ipSuffix = 10;
function newVisitor(): Visitor {
  const click = `IwAR${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  return {
    tempId: randomUUID(),
    sessionId: randomUUID(),
    ip: `203.0.113.${ipSuffix++}`,
    userAgent: `Mozilla/5.0 (iPhone; CPU iPhone OS 17_${ipSuffix} like Mac OS X) AppleWebKit/605.1.15`,
    href: `${ORIGIN}/landing?fbclid=${click}&utm_source=facebook`,
    fbc: `fb.1.${Date.now() - 60_000}.${click}`,
    fbp: `fb.1.${Date.now() - 120_000}.${1_000_000_000 + ipSuffix}`,
  };
}

/** What a reverse proxy does for a pageview and then a click on "join". Returns the invite link. */
async function landAndClick(v: Visitor, channelId?: string): Promise<string> {
  const forwarded = { 'x-capigram-client-ip': v.ip, 'x-capigram-client-user-agent': v.userAgent };
  const init = await fetch(`${app.url}/backend/track/init`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: ORIGIN, ...forwarded },
    body: JSON.stringify({
      websiteId,
      tempId: v.tempId,
      sessionId: v.sessionId,
      visitRequestId: randomUUID(),
      href: v.href,
      landingPage: new URL(v.href).pathname + new URL(v.href).search,
      referrer: 'https://l.facebook.com/',
      fbc: v.fbc,
      fbp: v.fbp,
    }),
  });
  expect(init.status).toBe(200);
  const query = new URLSearchParams({
    website: websiteId,
    tid: v.tempId,
    sid: v.sessionId,
    ...(channelId ? { channel: channelId } : {}),
  });
  const invite = await fetch(`${app.url}/backend/track/invite?${query}`, {
    redirect: 'manual',
    headers: { referer: v.href, ...forwarded },
  });
  expect(invite.status).toBe(302);
  const location = invite.headers.get('location');
  expect(location).toMatch(/^https:\/\/t\.me\/\+/);
  return location!;
}

const events = (name?: string): MetaAcceptedEvent[] =>
  fakes.meta.events(PIXEL).filter((e) => name === undefined || e.event.event_name === name);

/** The worker has nothing left to do: every send delivered, every Telegram action run. */
async function settled(): Promise<void> {
  const end = Date.now() + 10_000;
  for (;;) {
    const { rows } = await db.pool.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM graphile_worker.jobs WHERE task_identifier <> 'refill_invites')
            + (SELECT count(*) FROM sends WHERE status = 'pending') AS n`,
    );
    if (Number(rows[0]!.n) === 0) return;
    if (Date.now() > end) throw new Error('the worker did not settle');
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function conversionsOf(userId: number) {
  const { rows } = await db.pool.query<{ id: string; capi_status: string }>(
    'SELECT id, capi_status FROM conversions WHERE telegram_user_id = $1',
    [userId],
  );
  return rows;
}

describe('ad click → channel join → Meta', () => {
  it('an attributed join sends exactly one Subscribe with the visit’s click ids, IP, User-Agent and page', async () => {
    const pooled = new Set(fakes.telegram.links(CHATS.main.id).map((l) => l.invite_link));
    const v = newVisitor();
    const link = await landAndClick(v);
    expect(pooled.has(link)).toBe(true); // handed out from the pool, not created on the click

    const user = { id: 777_100_001 };
    const res = await fakes.telegram.deliverUpdate(
      DEFAULT_BOT.token,
      fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user, inviteLink: link }),
    );
    expect(res.status).toBe(200);

    await fakes.meta.waitFor(() => events('Subscribe').length > 0, 10_000);
    await settled();
    const subscribes = events('Subscribe');
    expect(subscribes).toHaveLength(1);
    const [conversion] = await conversionsOf(user.id);
    expect(subscribes[0]!.event).toMatchObject({
      event_name: 'Subscribe',
      event_id: `cnv_${conversion!.id}`,
      action_source: 'website',
      event_source_url: v.href,
      user_data: { fbc: v.fbc, fbp: v.fbp, client_ip_address: v.ip, client_user_agent: v.userAgent },
    });
    expect(conversion!.capi_status).toBe('sent');
    // The used link is revoked at Telegram.
    expect(fakes.telegram.revoked.map((l) => l.invite_link)).toContain(link);
  });

  it('the same update delivered again changes nothing and sends nothing', async () => {
    const v = newVisitor();
    const link = await landAndClick(v);
    const user = { id: 777_100_002 };
    const update = fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user, inviteLink: link });
    await fakes.telegram.deliverUpdate(DEFAULT_BOT.token, update);
    await fakes.meta.waitFor(
      () => events('Subscribe').some((e) => e.event.event_source_url === v.href),
      10_000,
    );
    await settled();
    const before = { meta: events().length, conversions: await conversionsOf(user.id) };

    expect((await fakes.telegram.deliverUpdate(DEFAULT_BOT.token, update)).status).toBe(200);
    await settled();
    expect(events().length).toBe(before.meta);
    expect(await conversionsOf(user.id)).toEqual(before.conversions);
    expect(before.conversions).toHaveLength(1);
  });

  it('an organic join (no invite link) sends nothing', async () => {
    await settled();
    const before = events().length;
    const user = { id: 777_100_003 };
    expect(
      (
        await fakes.telegram.deliverUpdate(
          DEFAULT_BOT.token,
          fakes.telegram.chatMemberJoined({ chatId: CHATS.main.id, user }),
        )
      ).status,
    ).toBe(200);
    await settled();
    expect(events().length).toBe(before);
    expect(await conversionsOf(user.id)).toEqual([]);
  });

  it('a join request through our link is approved, and the approval is the attributed join, sent once', async () => {
    const v = newVisitor();
    const link = await landAndClick(v, channels.requests);
    expect(
      fakes.telegram.links(CHATS.requests.id).find((l) => l.invite_link === link)?.creates_join_request,
    ).toBe(true);
    const user = { id: 777_100_004 };

    await fakes.telegram.deliverUpdate(
      DEFAULT_BOT.token,
      fakes.telegram.chatJoinRequest({ chatId: CHATS.requests.id, user, inviteLink: link }),
    );
    await fakes.telegram.waitFor(
      () => fakes.telegram.approvals.some((a) => a.userId === user.id && a.chatId === CHATS.requests.id),
      5000,
    );
    // The approval is the join: converted without waiting for chat_member; the update that follows
    // (carrying the link the request came through, as Telegram sends it) adds nothing.
    await fakes.meta.waitFor(
      () => events('Subscribe').some((e) => e.event.event_source_url === v.href),
      10_000,
    );
    await fakes.telegram.deliverUpdate(
      DEFAULT_BOT.token,
      fakes.telegram.joinAfterApproval({ chatId: CHATS.requests.id, user }),
    );
    await settled();
    const [conversion, ...more] = await conversionsOf(user.id);
    expect(more).toEqual([]);
    const sent = events('Subscribe').filter((e) => e.event.event_id === `cnv_${conversion!.id}`);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.event.user_data).toMatchObject({
      fbc: v.fbc,
      fbp: v.fbp,
      client_ip_address: v.ip,
      client_user_agent: v.userAgent,
    });
  });
});
