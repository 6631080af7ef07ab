// A join that reaches Capigram before its /start (Telegram hands out `message` and `chat_member`
// from different queues): the /start credits the join to the payload's visit within the window,
// once, and never takes over a join that is already attributed or too old.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOIN_BEFORE_START_WINDOW_MS } from '../../backend/domain/telegram/join-before-start.js';
import { DEFAULT_BOT, nowSec, type TgUpdate } from '../fakes/index.js';
import {
  CHATS,
  conversionsOf,
  landAndEnter,
  metaEvents,
  newVisitor,
  payloadOf,
  settled,
  startEntryWorld,
  type EntryWorld,
} from './world.js';

let w: EntryWorld;
beforeAll(async () => {
  w = await startEntryWorld();
});
afterAll(async () => {
  await w.close();
});

const deliver = (update: TgUpdate) => w.fakes.telegram.deliverUpdate(DEFAULT_BOT.token, update);
const startUpdate = (user: { id: number }, payload: string) =>
  w.fakes.telegram.startCommand({ user, payload });
const joinNews = (user: { id: number }, date?: number) =>
  deliver(w.fakes.telegram.chatMemberJoined({ chatId: CHATS.news.id, user, date }));

async function joinsOf(userId: number) {
  const { rows } = await w.db.pool.query<{
    visit_id: string | null;
    attributed: boolean;
    conversion_id: string | null;
  }>(
    `SELECT visit_id, attributed, conversion_id FROM memberships
     WHERE telegram_user_id = $1 AND kind = 'join' ORDER BY created_at`,
    [userId],
  );
  return rows;
}

const subscribes = async (userId: number) =>
  (await conversionsOf(w, userId)).filter((c) => c.event_type === 'Subscribe');

describe('a join that arrives before its /start', () => {
  it('is credited to the visit when the /start comes, once, whatever is resent', async () => {
    const v = newVisitor();
    const { visitId, location } = await landAndEnter(w, v);
    const user = { id: 777_320_001 };
    expect((await joinNews(user)).status).toBe(200);
    await settled(w);
    expect(await subscribes(user.id)).toEqual([]);
    expect(await joinsOf(user.id)).toEqual([{ visit_id: null, attributed: false, conversion_id: null }]);

    const start = startUpdate(user, payloadOf(location));
    expect((await deliver(start)).status).toBe(200);
    await w.fakes.meta.waitFor(
      () => metaEvents(w, 'Subscribe').some((e) => e.event.event_source_url === v.href),
      10_000,
    );
    await settled(w);
    const [subscribe] = await subscribes(user.id);
    expect(subscribe).toMatchObject({ visit_id: visitId, channel_id: w.channels.news });
    expect(await joinsOf(user.id)).toEqual([
      { visit_id: visitId, attributed: true, conversion_id: subscribe!.id },
    ]);
    const sent = metaEvents(w, 'Subscribe').filter((e) => e.event.event_id === `cnv_${subscribe!.id}`);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.event.user_data).toMatchObject({ fbc: v.fbc, client_ip_address: v.ip });

    // Telegram resends the same update, and the user presses START again: nothing more.
    expect((await deliver(start)).status).toBe(200);
    expect((await deliver(startUpdate(user, payloadOf(location)))).status).toBe(200);
    await settled(w);
    expect(await subscribes(user.id)).toHaveLength(1);
    expect(metaEvents(w, 'Subscribe').filter((e) => e.event.event_source_url === v.href)).toHaveLength(1);
  });

  it('a join older than the window stays organic', async () => {
    const v = newVisitor();
    const { location } = await landAndEnter(w, v);
    const user = { id: 777_320_002 };
    await joinNews(user, nowSec() - JOIN_BEFORE_START_WINDOW_MS / 1000 - 60);
    await deliver(startUpdate(user, payloadOf(location)));
    await settled(w);
    expect(await subscribes(user.id)).toEqual([]);
    expect(await joinsOf(user.id)).toEqual([{ visit_id: null, attributed: false, conversion_id: null }]);
  });

  it('a join already credited to a visit is not credited again by a later start of another click', async () => {
    const first = await landAndEnter(w, newVisitor());
    const user = { id: 777_320_003 };
    await deliver(startUpdate(user, payloadOf(first.location)));
    await joinNews(user);
    await settled(w);
    const [subscribe] = await subscribes(user.id);
    expect(subscribe).toMatchObject({ visit_id: first.visitId });

    const second = await landAndEnter(w, newVisitor());
    await deliver(startUpdate(user, payloadOf(second.location)));
    await settled(w);
    expect((await subscribes(user.id)).map((c) => c.visit_id)).toEqual([first.visitId]);
    expect(await joinsOf(user.id)).toEqual([
      { visit_id: first.visitId, attributed: true, conversion_id: subscribe!.id },
    ]);
  });

  it('a join the user left again before the /start is not credited', async () => {
    const { location } = await landAndEnter(w, newVisitor());
    const user = { id: 777_320_004 };
    await joinNews(user);
    await deliver(w.fakes.telegram.chatMemberLeft({ chatId: CHATS.news.id, user }));
    await deliver(startUpdate(user, payloadOf(location)));
    await settled(w);
    expect(await subscribes(user.id)).toEqual([]);
  });
});
