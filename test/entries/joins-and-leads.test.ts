// What a bot start is worth afterwards: the user's join of a public channel (which Telegram's apps
// join through the username, without any invite link) is credited to the entry's visit within
// ATTRIBUTION_WINDOW_DAYS and organic after it; a private channel's button is the visit's own
// invite link; the business API treats the user as a warm lead within the window (and not after
// it); a start reported through `POST /entries/start` by a bot whose backend is elsewhere counts as
// a webhook one; and the user's join request without our link is attributed (approve-attributed).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../backend/domain/admin/api-keys.js';
import { addEntry } from '../../backend/domain/admin/entries.js';
import { DEFAULT_BOT } from '../fakes/index.js';
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
let apiKey: string;
beforeAll(async () => {
  w = await startEntryWorld();
  apiKey = (await createApiKey(w.db.pool, { accountId: w.accountId })).apiKey;
});
afterAll(async () => {
  await w.close();
});

const deliver = (update: Parameters<EntryWorld['fakes']['telegram']['deliverUpdate']>[1]) =>
  w.fakes.telegram.deliverUpdate(DEFAULT_BOT.token, update);
const start = (user: { id: number }, payload?: string) =>
  deliver(w.fakes.telegram.startCommand({ user, payload }));
const api = (path: string, body: unknown, key: string | null = apiKey) =>
  fetch(`${w.app.url}/api/v1${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(body),
  });

describe('public channel through the bot', () => {
  it('a join without an invite link by the user who started the bot is sent with the visit’s attribution', async () => {
    const v = newVisitor();
    const { visitId, location } = await landAndEnter(w, v);
    const user = { id: 777_310_001 };
    await start(user, payloadOf(location));
    await w.fakes.meta.waitFor(
      () => metaEvents(w, 'Lead').some((e) => e.event.event_source_url === v.href),
      10_000,
    );

    await deliver(w.fakes.telegram.chatMemberJoined({ chatId: CHATS.news.id, user }));
    await w.fakes.meta.waitFor(
      () => metaEvents(w, 'Subscribe').some((e) => e.event.event_source_url === v.href),
      10_000,
    );
    await settled(w);
    const subscribe = (await conversionsOf(w, user.id)).find((c) => c.event_type === 'Subscribe');
    expect(subscribe).toMatchObject({ visit_id: visitId, channel_id: w.channels.news });
    const sent = metaEvents(w, 'Subscribe').filter((e) => e.event.event_id === `cnv_${subscribe!.id}`);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.event.user_data).toMatchObject({
      fbc: v.fbc,
      fbp: v.fbp,
      client_ip_address: v.ip,
      client_user_agent: v.userAgent,
    });

    // Leaving and joining again converts nothing more.
    await deliver(w.fakes.telegram.chatMemberLeft({ chatId: CHATS.news.id, user }));
    await deliver(w.fakes.telegram.chatMemberJoined({ chatId: CHATS.news.id, user }));
    await settled(w);
    expect((await conversionsOf(w, user.id)).filter((c) => c.event_type === 'Subscribe')).toHaveLength(1);
  });

  it('the same join after the window is organic', async () => {
    const v = newVisitor();
    const { location } = await landAndEnter(w, v);
    const user = { id: 777_310_002 };
    await start(user, payloadOf(location));
    await w.fakes.meta.waitFor(
      () => metaEvents(w, 'Lead').some((e) => e.event.event_source_url === v.href),
      10_000,
    );
    // The start happened eight days ago (the default window is seven).
    await w.db.pool.query(`UPDATE entry_clicks SET used_at = now() - interval '8 days' WHERE payload = $1`, [
      payloadOf(location),
    ]);
    await deliver(w.fakes.telegram.chatMemberJoined({ chatId: CHATS.news.id, user }));
    await settled(w);
    expect((await conversionsOf(w, user.id)).map((c) => c.event_type)).toEqual(['Lead']);
    const { rows } = await w.db.pool.query(
      'SELECT attributed FROM memberships WHERE telegram_user_id = $1 AND kind = $2',
      [user.id, 'join'],
    );
    expect(rows).toEqual([{ attributed: false }]);
  });

  it('a join by someone who never started the bot is organic', async () => {
    const user = { id: 777_310_003 };
    await deliver(w.fakes.telegram.chatMemberJoined({ chatId: CHATS.news.id, user }));
    await settled(w);
    expect(await conversionsOf(w, user.id)).toEqual([]);
  });
});

describe('private channel through the bot', () => {
  it('the welcome button is the visit’s own invite link, and the join through it is attributed once', async () => {
    const { entryId } = await addEntry(w.db.pool, {
      siteId: w.siteId,
      botId: w.botId,
      eventType: 'none',
      channelId: w.channels.club,
    });
    const v = newVisitor();
    const { visitId, location } = await landAndEnter(w, v, entryId);
    const user = { id: 777_310_004 };
    await start(user, payloadOf(location));
    await w.fakes.telegram.waitFor(() => w.fakes.telegram.messages.some((m) => m.chatId === user.id), 5000);
    const [message] = w.fakes.telegram.messages.filter((m) => m.chatId === user.id);
    // No welcome text set: a short default naming the channel, with the button.
    expect(message!.text).toContain(CHATS.club.title);
    const link = message!.buttons[0]![0]!.url;
    expect(link).toMatch(/^https:\/\/t\.me\/\+/);
    const { rows } = await w.db.pool.query('SELECT visit_id FROM invitations WHERE invite_link = $1', [link]);
    expect(rows).toEqual([{ visit_id: visitId }]);

    await deliver(w.fakes.telegram.chatMemberJoined({ chatId: CHATS.club.id, user, inviteLink: link }));
    await w.fakes.meta.waitFor(
      () => metaEvents(w, 'Subscribe').some((e) => e.event.event_source_url === v.href),
      10_000,
    );
    await settled(w);
    // `--event-type none`: the start itself sent nothing; the join sent its Subscribe.
    expect((await conversionsOf(w, user.id)).map((c) => [c.event_type, c.visit_id])).toEqual([
      ['Subscribe', visitId],
    ]);
  });
});

describe('warm leads and starts reported through the API', () => {
  it('a business-API Purchase after a bot start carries the entry visit’s attribution', async () => {
    const { entryId } = await addEntry(w.db.pool, { siteId: w.siteId, botId: w.botId, eventType: 'none' });
    const v = newVisitor();
    const { visitId, location } = await landAndEnter(w, v, entryId);
    const user = { id: 777_310_005 };
    await start(user, payloadOf(location));
    await settled(w);
    expect(await conversionsOf(w, user.id)).toEqual([]);

    const res = await api('/events/conversion', {
      telegramUserId: user.id,
      eventType: 'Purchase',
      value: 49,
      currency: 'EUR',
    });
    expect(res.status).toBe(201);
    const body = (await res.json()) as { conversionId: string; coldLead?: boolean };
    await w.fakes.meta.waitFor(
      () => metaEvents(w, 'Purchase').some((e) => e.event.event_id === `cnv_${body.conversionId}`),
      10_000,
    );
    const [purchase] = await conversionsOf(w, user.id);
    // An entry without a channel lands the lead's events on the site's default channel.
    expect(purchase).toMatchObject({
      event_type: 'Purchase',
      visit_id: visitId,
      channel_id: w.channels.club,
    });
    const sent = metaEvents(w, 'Purchase').find((e) => e.event.event_id === `cnv_${body.conversionId}`);
    expect(sent!.event.user_data).toMatchObject({
      fbc: v.fbc,
      fbp: v.fbp,
      client_ip_address: v.ip,
      client_user_agent: v.userAgent,
    });
  });

  // The start happened eight days ago (the default window is seven).
  const ageTie = (payload: string) =>
    w.db.pool.query(`UPDATE entry_clicks SET used_at = used_at - interval '8 days' WHERE payload = $1`, [
      payload,
    ]);
  const conversionOf = async (res: Response) => {
    const body = (await res.json()) as { conversionId: string; coldLead: boolean };
    const { rows } = await w.db.pool.query(
      'SELECT visit_id, channel_id, cold_lead FROM conversions WHERE id = $1',
      [body.conversionId],
    );
    return { ...body, ...rows[0] };
  };

  it('past ATTRIBUTION_WINDOW_DAYS the tie is no acquisition: the lead is cold again, and needs its site and channel', async () => {
    const v = newVisitor();
    const { location } = await landAndEnter(w, v);
    const user = { id: 777_310_040 };
    await start(user, payloadOf(location));
    await settled(w);
    expect((await conversionsOf(w, user.id)).map((c) => c.event_type)).toEqual(['Lead']);
    await ageTie(payloadOf(location));

    // Neither the tie nor its Lead event names the site any more.
    const noSite = await api('/events/conversion', {
      telegramUserId: user.id,
      eventType: 'Purchase',
      value: 9,
      currency: 'EUR',
    });
    expect(((await noSite.json()) as { code: string }).code).toBe('SITE_REQUIRED');
    const noChannel = await api('/events/conversion', {
      telegramUserId: user.id,
      siteId: w.siteId,
      eventType: 'Purchase',
      value: 9,
      currency: 'EUR',
    });
    expect(((await noChannel.json()) as { code: string }).code).toBe('CHANNEL_REQUIRED');
    const res = await api('/events/conversion', {
      telegramUserId: user.id,
      siteId: w.siteId,
      channelId: w.channels.club,
      eventType: 'Purchase',
      value: 9,
      currency: 'EUR',
    });
    expect(res.status).toBe(201);
    expect(await conversionOf(res)).toMatchObject({
      coldLead: true,
      cold_lead: true,
      visit_id: null,
      channel_id: w.channels.club,
    });
  });

  it('the window is counted to the event’s time: a Purchase reported late but made within it is warm', async () => {
    const { entryId } = await addEntry(w.db.pool, { siteId: w.siteId, botId: w.botId, eventType: 'none' });
    const { visitId, location } = await landAndEnter(w, newVisitor(), entryId);
    const user = { id: 777_310_043 };
    await start(user, payloadOf(location));
    await settled(w);
    await ageTie(payloadOf(location));
    // Made six days after the start (two days ago), reported now.
    const eventTime = Date.now() - 2 * 86_400_000;
    const res = await api('/events/conversion', {
      telegramUserId: user.id,
      eventType: 'Purchase',
      value: 12,
      currency: 'EUR',
      eventTime,
    });
    expect(res.status).toBe(201);
    expect(await conversionOf(res)).toMatchObject({ coldLead: false, visit_id: visitId });
  });

  it('a Purchase within the window is warm; past it, a later event carries the entry visit no more', async () => {
    const { entryId } = await addEntry(w.db.pool, { siteId: w.siteId, botId: w.botId, eventType: 'none' });
    const { visitId, location } = await landAndEnter(w, newVisitor(), entryId);
    const user = { id: 777_310_041 };
    await start(user, payloadOf(location));
    await settled(w);
    const within = await api('/events/conversion', {
      telegramUserId: user.id,
      eventType: 'Purchase',
      value: 10,
      currency: 'EUR',
    });
    expect(await conversionOf(within)).toMatchObject({ coldLead: false, visit_id: visitId });

    await ageTie(payloadOf(location));
    // A known lead (the Purchase), but no longer one the entry's visit acquired.
    const after = await api('/events/conversion', {
      telegramUserId: user.id,
      eventType: 'CompleteRegistration',
    });
    expect(after.status).toBe(201);
    expect(await conversionOf(after)).toMatchObject({
      coldLead: false,
      visit_id: null,
      channel_id: w.channels.club,
    });
  });

  it('a join credited to the entry visit within the window stays the lead’s acquisition after it, as any attributed join', async () => {
    const v = newVisitor();
    const { visitId, location } = await landAndEnter(w, v);
    const user = { id: 777_310_042 };
    await start(user, payloadOf(location));
    await deliver(w.fakes.telegram.chatMemberJoined({ chatId: CHATS.news.id, user }));
    await settled(w);
    expect((await conversionsOf(w, user.id)).map((c) => [c.event_type, c.visit_id])).toEqual([
      ['Lead', visitId],
      ['Subscribe', visitId],
    ]);
    await ageTie(payloadOf(location));

    const res = await api('/events/conversion', {
      telegramUserId: user.id,
      eventType: 'Purchase',
      value: 11,
      currency: 'EUR',
    });
    expect(res.status).toBe(201);
    expect(await conversionOf(res)).toMatchObject({
      coldLead: false,
      visit_id: visitId,
      channel_id: w.channels.news,
    });
  });

  it('POST /entries/start is attributed like a webhook /start, once, and a second user is organic', async () => {
    const v = newVisitor();
    const { visitId, location } = await landAndEnter(w, v);
    const payload = payloadOf(location);
    const user = 777_310_006;
    const first = await api('/entries/start', { payload, telegramUserId: user });
    expect(first.status).toBe(200);
    const answer = (await first.json()) as { attributed: boolean; conversionId: string };
    expect(answer).toEqual({ attributed: true, conversionId: expect.any(String) });
    await w.fakes.meta.waitFor(
      () => metaEvents(w, 'Lead').some((e) => e.event.event_id === `cnv_${answer.conversionId}`),
      10_000,
    );
    const lead = metaEvents(w, 'Lead').find((e) => e.event.event_id === `cnv_${answer.conversionId}`);
    expect(lead!.event).toMatchObject({
      event_source_url: v.href,
      user_data: { fbc: v.fbc, fbp: v.fbp, client_ip_address: v.ip, client_user_agent: v.userAgent },
    });
    expect((await conversionsOf(w, user)).map((c) => c.visit_id)).toEqual([visitId]);

    expect(await (await api('/entries/start', { payload, telegramUserId: user })).json()).toEqual(answer);
    expect(await (await api('/entries/start', { payload, telegramUserId: user + 1 })).json()).toEqual({
      attributed: false,
    });
    expect(
      await (await api('/entries/start', { payload: 'unknown_payload', telegramUserId: user })).json(),
    ).toEqual({ attributed: false });
    await settled(w);
    expect(metaEvents(w, 'Lead').filter((e) => e.event.event_source_url === v.href)).toHaveLength(1);
    // The bot's answer is the operator's own bot's to send.
    expect(w.fakes.telegram.messages.some((m) => m.chatId === user)).toBe(false);
  });

  it('POST /entries/start refuses a bad body, a missing key, and another account’s payload', async () => {
    const { location } = await landAndEnter(w, newVisitor());
    expect((await api('/entries/start', { payload: 'has space', telegramUserId: 1 })).status).toBe(400);
    expect((await api('/entries/start', { payload: 'abc', telegramUserId: -5 })).status).toBe(400);
    expect((await api('/entries/start', { payload: 'abc', telegramUserId: 1 }, null)).status).toBe(401);
    const raw = (headers: Record<string, string>) =>
      fetch(`${w.app.url}/api/v1/entries/start`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, ...headers },
        body: JSON.stringify({ payload: payloadOf(location), telegramUserId: 777_310_098 }),
      });
    expect(await (await raw({ 'content-type': 'text/plain' })).json()).toMatchObject({
      code: 'VALIDATION_FAILED',
      errors: [{ path: 'Content-Type' }],
    });
    expect(
      await (await raw({ 'content-type': 'application/json', 'idempotency-key': 'x'.repeat(129) })).json(),
    ).toMatchObject({ code: 'IDEMPOTENCY_KEY_INVALID' });
    expect(await conversionsOf(w, 777_310_098)).toEqual([]);
    const { createAccount } = await import('../../backend/domain/admin/accounts.js');
    const other = await createAccount(w.db.pool, { name: 'Other' });
    const otherKey = (await createApiKey(w.db.pool, { accountId: other.accountId })).apiKey;
    expect(
      await (
        await api('/entries/start', { payload: payloadOf(location), telegramUserId: 777_310_099 }, otherKey)
      ).json(),
    ).toEqual({ attributed: false });
    expect(await conversionsOf(w, 777_310_099)).toEqual([]);
  });

  it('erasing the lead erases its entry tie: the visit’s identifiers go, and a later event is a cold lead’s', async () => {
    const { entryId } = await addEntry(w.db.pool, { siteId: w.siteId, botId: w.botId, eventType: 'none' });
    const { visitId, location } = await landAndEnter(w, newVisitor(), entryId);
    const user = 777_310_030;
    expect(
      await (await api('/entries/start', { payload: payloadOf(location), telegramUserId: user })).json(),
    ).toEqual({ attributed: true });

    const erased = await fetch(`${w.app.url}/api/v1/leads/${user}?siteId=${w.siteId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(erased.status).toBe(204);
    const { rows } = await w.db.pool.query(
      'SELECT k.payload, k.used_by, v.fbc, v.client_ip FROM entry_clicks k JOIN visits v ON v.id = k.visit_id WHERE k.visit_id = $1',
      [visitId],
    );
    expect(rows).toEqual([{ payload: null, used_by: expect.any(Number), fbc: null, client_ip: null }]);
    expect(rows[0].used_by).toBeLessThan(0);
    // Nothing left makes this user a known lead of the site.
    const later = await api('/events/conversion', {
      telegramUserId: user,
      eventType: 'Purchase',
      value: 5,
      currency: 'EUR',
    });
    expect(later.status).toBe(400);
    expect(((await later.json()) as { code: string }).code).toBe('SITE_REQUIRED');
  });
});

describe('join requests of users an entry tied (approve-attributed)', () => {
  const approvedIn = (userId: number) => w.fakes.telegram.approvals.filter((a) => a.userId === userId);
  // A public channel's requests come without their link, whatever link was opened.
  const request = (user: { id: number }) =>
    deliver(w.fakes.telegram.chatJoinRequest({ chatId: CHATS.news.id, user }));
  const requestRows = (userId: number) =>
    w.db.pool
      .query(
        'SELECT kind, visit_id, attributed, request_status, recorded_by FROM memberships WHERE telegram_user_id = $1 ORDER BY created_at',
        [userId],
      )
      .then((r) => r.rows);

  beforeAll(async () => {
    const { updateChannel } = await import('../../backend/domain/admin/channels.js');
    await updateChannel(w.app.deps, { channelId: w.channels.news, joinRequests: 'approve-attributed' });
  });

  it('a request without our link by a user who started the bot is approved and its join credited to the entry visit, once', async () => {
    const v = newVisitor();
    const { visitId, location } = await landAndEnter(w, v);
    const user = { id: 777_310_050 };
    await start(user, payloadOf(location));
    await request(user);
    await w.fakes.telegram.waitFor(() => approvedIn(user.id).length === 1, 5000);
    await w.fakes.meta.waitFor(
      () => metaEvents(w, 'Subscribe').some((e) => e.event.event_source_url === v.href),
      10_000,
    );
    await settled(w);
    const subscribe = (await conversionsOf(w, user.id)).find((c) => c.event_type === 'Subscribe');
    expect(subscribe).toMatchObject({ visit_id: visitId, channel_id: w.channels.news });
    const sent = metaEvents(w, 'Subscribe').filter((e) => e.event.event_id === `cnv_${subscribe!.id}`);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.event.user_data).toMatchObject({
      fbc: v.fbc,
      client_ip_address: v.ip,
      client_user_agent: v.userAgent,
    });

    // Telegram's chat_member update that follows is the join already recorded: nothing more.
    await deliver(w.fakes.telegram.joinAfterApproval({ chatId: CHATS.news.id, user }));
    await settled(w);
    expect((await conversionsOf(w, user.id)).map((c) => c.event_type)).toEqual(['Lead', 'Subscribe']);
    expect(await requestRows(user.id)).toEqual([
      {
        kind: 'join_request',
        visit_id: visitId,
        attributed: false,
        request_status: 'approved',
        recorded_by: 'update',
      },
      { kind: 'join', visit_id: visitId, attributed: true, request_status: null, recorded_by: 'approval' },
    ]);
  });

  it('a request by a user who never started the bot, or started it before the window, is held, not attributed', async () => {
    const stranger = { id: 777_310_051 };
    const { location } = await landAndEnter(w, newVisitor());
    const late = { id: 777_310_052 };
    await start(late, payloadOf(location));
    await settled(w);
    await w.db.pool.query(
      `UPDATE entry_clicks SET used_at = used_at - interval '8 days' WHERE payload = $1`,
      [payloadOf(location)],
    );
    await request(stranger);
    await request(late);
    await settled(w);
    expect(approvedIn(stranger.id)).toEqual([]);
    expect(approvedIn(late.id)).toEqual([]);
    const { listHeldRequests } = await import('../../backend/domain/admin/join-requests.js');
    const { requests } = await listHeldRequests(w.db.pool, w.channels.news);
    expect(
      requests
        .filter((r) => r.telegramUserId === stranger.id || r.telegramUserId === late.id)
        .map((r) => [r.telegramUserId, r.attributed]),
    ).toEqual([
      [stranger.id, false],
      [late.id, false],
    ]);
    expect((await conversionsOf(w, late.id)).map((c) => c.event_type)).toEqual(['Lead']);
  });

  it('under hold, an entry-tied request waits, is listed as attributed, and its approval credits the entry visit', async () => {
    const { updateChannel } = await import('../../backend/domain/admin/channels.js');
    await updateChannel(w.app.deps, { channelId: w.channels.news, joinRequests: 'hold' });
    const v = newVisitor();
    const { visitId, location } = await landAndEnter(w, v);
    const user = { id: 777_310_053 };
    await start(user, payloadOf(location));
    await request(user);
    await settled(w);
    expect(approvedIn(user.id)).toEqual([]);
    const { decideJoinRequest, listHeldRequests } = await import(
      '../../backend/domain/admin/join-requests.js'
    );
    expect(
      (await listHeldRequests(w.db.pool, w.channels.news)).requests.find((r) => r.telegramUserId === user.id),
    ).toMatchObject({ attributed: true });

    await decideJoinRequest(w.app.deps, {
      channelId: w.channels.news,
      telegramUserId: user.id,
      decision: 'approve',
    });
    await w.fakes.meta.waitFor(
      () => metaEvents(w, 'Subscribe').some((e) => e.event.event_source_url === v.href),
      10_000,
    );
    expect((await conversionsOf(w, user.id)).map((c) => [c.event_type, c.visit_id])).toEqual([
      ['Lead', visitId],
      ['Subscribe', visitId],
    ]);
  });
});
