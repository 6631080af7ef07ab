// The bot route end to end: an ad click lands (track/init with the click ids), the visitor clicks
// the entry link (track/entry → t.me/<bot>?start=<payload>), opens the bot (Telegram posts
// `/start <payload>` to the webhook), and Meta receives the entry's Lead with the visit's fbc,
// fbp, IP and User-Agent; the bot answers with the welcome text and a button to the channel.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_BOT } from '../fakes/index.js';
import {
  CHATS,
  ORIGIN,
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

/** A GET as a browser's navigation sends it (fetch() would put its own Sec-Fetch-Mode, cors, in place of ours). */
function navigate(
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; location: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${w.app.url}${path}`,
      { headers: { accept: 'text/html', 'sec-fetch-mode': 'navigate', ...headers } },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, location: res.headers.location }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const start = (user: { id: number }, payload?: string) =>
  w.fakes.telegram.deliverUpdate(DEFAULT_BOT.token, w.fakes.telegram.startCommand({ user, payload }));

describe('entry click → /start → Meta', () => {
  it('the webhook asks Telegram for message updates', () => {
    expect(w.fakes.telegram.webhook(DEFAULT_BOT.token)?.allowed_updates).toContain('message');
  });

  it('sends the entry’s Lead with the visit’s click ids, IP and User-Agent, and the bot answers with a button to the channel', async () => {
    const v = newVisitor();
    const { visitId, location } = await landAndEnter(w, v);
    expect(location).toMatch(/^https:\/\/t\.me\/capigram_test_bot\?start=[A-Za-z0-9_-]{1,64}$/);
    const payload = payloadOf(location);
    expect(payload).not.toContain(visitId);
    expect(payload).not.toContain(visitId.replace(/-/g, ''));

    const user = { id: 777_300_001 };
    expect((await start(user, payload)).status).toBe(200);
    await w.fakes.meta.waitFor(() => metaEvents(w, 'Lead').length > 0, 10_000);
    await settled(w);
    const [conversion, ...more] = await conversionsOf(w, user.id);
    expect(more).toEqual([]);
    expect(conversion).toMatchObject({ event_type: 'Lead', visit_id: visitId, channel_id: w.channels.news });
    const leads = metaEvents(w, 'Lead');
    expect(leads).toHaveLength(1);
    expect(leads[0]!.event).toMatchObject({
      event_name: 'Lead',
      event_id: `cnv_${conversion!.id}`,
      event_source_url: v.href,
      user_data: { fbc: v.fbc, fbp: v.fbp, client_ip_address: v.ip, client_user_agent: v.userAgent },
    });
    const lead = await w.db.pool.query('SELECT 1 FROM leads WHERE site_id = $1 AND telegram_user_id = $2', [
      w.siteId,
      user.id,
    ]);
    expect(lead.rowCount).toBe(1);

    await w.fakes.telegram.waitFor(() => w.fakes.telegram.messages.some((m) => m.chatId === user.id), 5000);
    const [welcome] = w.fakes.telegram.messages.filter((m) => m.chatId === user.id);
    expect(welcome).toMatchObject({
      text: 'Welcome to the shop bot!',
      buttons: [[{ text: `Join ${CHATS.news.title}`, url: `https://t.me/${CHATS.news.username}` }]],
    });
  });

  it('the same /start delivered again, or sent again by the same user, sends nothing more', async () => {
    const v = newVisitor();
    const { location } = await landAndEnter(w, v);
    const user = { id: 777_300_002 };
    const update = w.fakes.telegram.startCommand({ user, payload: payloadOf(location) });
    await w.fakes.telegram.deliverUpdate(DEFAULT_BOT.token, update);
    await w.fakes.meta.waitFor(
      () => metaEvents(w, 'Lead').some((e) => e.event.event_source_url === v.href),
      10_000,
    );
    await w.fakes.telegram.deliverUpdate(DEFAULT_BOT.token, update);
    await start(user, payloadOf(location));
    await settled(w);
    expect(metaEvents(w, 'Lead').filter((e) => e.event.event_source_url === v.href)).toHaveLength(1);
    expect(await conversionsOf(w, user.id)).toHaveLength(1);
  });

  it('the same payload from a second user is organic: nothing sent, the bot still answers', async () => {
    const v = newVisitor();
    const { location } = await landAndEnter(w, v);
    const first = { id: 777_300_003 };
    const second = { id: 777_300_004 };
    await start(first, payloadOf(location));
    await w.fakes.meta.waitFor(
      () => metaEvents(w, 'Lead').some((e) => e.event.event_source_url === v.href),
      10_000,
    );
    await start(second, payloadOf(location));
    await w.fakes.telegram.waitFor(() => w.fakes.telegram.messages.some((m) => m.chatId === second.id), 5000);
    await settled(w);
    expect(await conversionsOf(w, second.id)).toEqual([]);
    expect(metaEvents(w, 'Lead').filter((e) => e.event.event_source_url === v.href)).toHaveLength(1);
    const { rows } = await w.db.pool.query('SELECT used_by FROM entry_clicks WHERE payload = $1', [
      payloadOf(location),
    ]);
    expect(rows).toEqual([{ used_by: first.id }]);
  });

  it('an unknown or absent payload is organic', async () => {
    await settled(w);
    const before = metaEvents(w).length;
    const user = { id: 777_300_005 };
    await start(user, 'AAAAAAAAAAAAAAAAAAAAAAAA');
    await start(user);
    await w.fakes.telegram.waitFor(
      () => w.fakes.telegram.messages.filter((m) => m.chatId === user.id).length === 2,
      5000,
    );
    await settled(w);
    expect(metaEvents(w).length).toBe(before);
    expect(await conversionsOf(w, user.id)).toEqual([]);
    // Organic starts are answered with the bot's default entry's welcome.
    expect(w.fakes.telegram.messages.filter((m) => m.chatId === user.id).map((m) => m.text)).toEqual([
      'Welcome to the shop bot!',
      'Welcome to the shop bot!',
    ]);
  });

  it('each click gets its own payload', async () => {
    const v = newVisitor();
    const a = payloadOf((await landAndEnter(w, v)).location);
    const b = payloadOf((await landAndEnter(w, v)).location);
    expect(a).not.toBe(b);
  });

  it('an unknown entry or a site without one is 404, a bad query 400', async () => {
    const v = newVisitor();
    const q = (extra: Record<string, string>) =>
      new URLSearchParams({ website: w.websiteId, tid: v.tempId, sid: v.sessionId, ...extra });
    const headers = { origin: 'https://shop.example.com' };
    expect(
      (
        await fetch(
          `${w.app.url}/backend/track/entry?${q({ entry: '00000000-0000-4000-8000-000000000000' })}`,
          { redirect: 'manual', headers },
        )
      ).status,
    ).toBe(404);
    expect(
      (
        await fetch(`${w.app.url}/backend/track/entry?${q({ entry: 'not-an-id' })}`, {
          redirect: 'manual',
          headers,
        })
      ).status,
    ).toBe(404);
    expect(
      (await fetch(`${w.app.url}/backend/track/entry?${q({ tid: 'x' })}`, { redirect: 'manual', headers }))
        .status,
    ).toBe(400);
    expect(
      (
        await fetch(`${w.app.url}/backend/track/entry?${q({})}`, {
          redirect: 'manual',
          headers: { origin: 'https://evil.example' },
        })
      ).status,
    ).toBe(403);
  });

  it('/r/{websiteId}/entry/{entryId} (an ad without a landing page) records the click’s visit and sends the visitor to the bot', async () => {
    const ua = 'Mozilla/5.0 (Linux; Android 14) AdClick/1.0';
    const res = await fetch(
      `${w.app.url}/r/${w.websiteId}/entry/${w.entryId}?fbclid=IwAR_rentry1&utm_source=fb`,
      {
        redirect: 'manual',
        headers: { 'x-capigram-client-ip': '198.51.100.23', 'x-capigram-client-user-agent': ua },
      },
    );
    expect(res.status).toBe(302);
    const location = res.headers.get('location')!;
    expect(location).toMatch(/^https:\/\/t\.me\/capigram_test_bot\?start=[A-Za-z0-9_-]{1,64}$/);
    expect(res.headers.getSetCookie().some((c) => c.startsWith('capigram_tid='))).toBe(true);
    const { rows } = await w.db.pool.query<{ kind: string; fbc: string; utm_source: string }>(
      'SELECT v.kind, v.fbc, v.utm_source FROM entry_clicks k JOIN visits v ON v.id = k.visit_id WHERE k.payload = $1',
      [payloadOf(location)],
    );
    expect(rows).toEqual([
      { kind: 'redirect', fbc: expect.stringMatching(/^fb\.1\.\d{13}\.IwAR_rentry1$/), utm_source: 'fb' },
    ]);

    const user = { id: 777_300_020 };
    await start(user, payloadOf(location));
    await w.fakes.meta.waitFor(
      () => metaEvents(w, 'Lead').some((e) => e.event.user_data.fbc === rows[0]!.fbc),
      10_000,
    );
    const lead = metaEvents(w, 'Lead').find((e) => e.event.user_data.fbc === rows[0]!.fbc);
    expect(lead!.event.user_data).toMatchObject({
      client_ip_address: '198.51.100.23',
      client_user_agent: ua,
    });

    expect(
      (
        await fetch(`${w.app.url}/r/${w.websiteId}/entry/00000000-0000-4000-8000-000000000000`, {
          redirect: 'manual',
        })
      ).status,
    ).toBe(404);
    expect((await fetch(`${w.app.url}/r/nope/entry/${w.entryId}`, { redirect: 'manual' })).status).toBe(404);
  });

  it('a browser that cannot be handed a payload goes on to the bot itself, unattributed, never to an error page', async () => {
    const v = newVisitor();
    const q = new URLSearchParams({ website: w.websiteId, tid: v.tempId, sid: v.sessionId });
    const refused = { referer: 'https://elsewhere.example.net/page' };
    // A refusal (here the Referer is not the site's) answers a script with the error…
    expect(
      (await fetch(`${w.app.url}/backend/track/entry?${q}`, { redirect: 'manual', headers: refused })).status,
    ).toBe(403);
    // …and sends a browser's navigation to the bot, without a payload.
    const nav = await navigate(`/backend/track/entry?${q}`, refused);
    expect(nav.status).toBe(302);
    expect(nav.location).toBe('https://t.me/capigram_test_bot');
    // No entry to fall back on: the error stays.
    const unknown = new URLSearchParams({
      website: w.websiteId,
      tid: v.tempId,
      sid: v.sessionId,
      entry: '00000000-0000-4000-8000-000000000000',
    });
    expect((await navigate(`/backend/track/entry?${unknown}`, { origin: ORIGIN })).status).toBe(404);
  });
});

describe('an entry click without consent (docs/consent.md)', () => {
  it('still opens the bot, and the /start it leads to sends nothing', async () => {
    const q = new URLSearchParams({
      website: w.websiteId,
      tid: crypto.randomUUID(),
      sid: crypto.randomUUID(),
      consent: 'denied',
    });
    const res = await fetch(`${w.app.url}/backend/track/entry?${q}`, {
      redirect: 'manual',
      headers: { referer: `${ORIGIN}/landing?fbclid=IwAR_denied`, 'x-capigram-client-ip': '203.0.113.250' },
    });
    expect(res.status).toBe(302);
    const location = res.headers.get('location')!;
    const user = { id: 777_300_099 };
    expect((await start(user, payloadOf(location))).status).toBe(200);
    await settled(w);
    expect(await conversionsOf(w, user.id)).toEqual([]);
    const { rows } = await w.db.pool.query<{
      consented: boolean;
      client_ip: string | null;
      href: string | null;
    }>(
      `SELECT v.consented, v.client_ip, v.href FROM entry_clicks k JOIN visits v ON v.id = k.visit_id
       WHERE k.used_by = $1`,
      [user.id],
    );
    expect(rows).toEqual([{ consented: false, client_ip: null, href: `${ORIGIN}/landing` }]);
  });
});
