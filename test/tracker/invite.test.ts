import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { CHATS, initBody, ORIGIN, problem, startWorld, type World } from './world.js';

let w: World;
beforeAll(async () => {
  w = await startWorld({ poolTarget: 3 });
});
afterAll(async () => {
  await w.close();
});
beforeEach(async () => {
  // Each test starts with fresh pools and a Telegram that answers.
  w.fakes.telegram.reset();
  await w.db.pool.query('DELETE FROM invitations');
  await w.db.pool.query('UPDATE bots SET flood_wait_until = NULL');
  await w.db.pool.query('UPDATE channels SET pool_target = 3, bot_can_invite = true, bot_is_admin = true');
});

async function visitOf(body = initBody(w)): Promise<{ visitId: string; tempId: string; sessionId: string }> {
  const res = await w.post('/backend/track/init', body);
  expect(res.status).toBe(200);
  return {
    visitId: ((await res.json()) as { visitId: string }).visitId,
    tempId: body.tempId,
    sessionId: body.sessionId,
  };
}

function click(
  q: { tempId: string; sessionId: string; channel?: string; website?: string },
  headers: Record<string, string> = {},
) {
  const params = new URLSearchParams({ website: q.website ?? w.websiteId, tid: q.tempId, sid: q.sessionId });
  if (q.channel !== undefined) params.set('channel', q.channel);
  return w.get(`/backend/track/invite?${params.toString()}`, { referer: `${ORIGIN}/landing`, ...headers });
}

async function pooledLinks(channelId: string): Promise<string[]> {
  const { rows } = await w.db.pool.query<{ invite_link: string }>(
    'SELECT invite_link FROM invitations WHERE channel_id = $1 AND visit_id IS NULL ORDER BY invite_link',
    [channelId],
  );
  return rows.map((r) => r.invite_link);
}

async function invitationsOf(visitId: string) {
  const { rows } = await w.db.pool.query<{
    invite_link: string;
    channel_id: string;
    unattributed: boolean;
    assigned_at: Date | null;
  }>(
    'SELECT invite_link, channel_id, unattributed, assigned_at FROM invitations WHERE visit_id = $1 ORDER BY created_at',
    [visitId],
  );
  return rows;
}

describe('track/invite hands out a link from the pool', () => {
  it("redirects the session's visit to a pooled link, records the invitation and queues a refill", async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const pool = await pooledLinks(w.channels.main);
    expect(pool).toHaveLength(3);
    const callsBefore = w.fakes.telegram.calls('createChatInviteLink').length;

    const v = await visitOf();
    const res = await click(v);
    expect(res.status).toBe(302);
    const location = res.headers.get('location');
    expect(pool).toContain(location);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(w.fakes.telegram.calls('createChatInviteLink')).toHaveLength(callsBefore);

    const held = await invitationsOf(v.visitId);
    expect(held).toMatchObject([{ invite_link: location, channel_id: w.channels.main, unattributed: false }]);
    expect(held[0]!.assigned_at).toBeInstanceOf(Date);
    expect(await w.count(`graphile_worker.jobs WHERE key = $1`, [`refill_invites:${w.channels.main}`])).toBe(
      1,
    );
  });

  it('the same visit clicking twice gets the same link; another visit gets another', async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const v = await visitOf();
    const first = (await click(v)).headers.get('location');
    const second = (await click(v)).headers.get('location');
    expect(second).toBe(first);
    const other = (await click(await visitOf())).headers.get('location');
    expect(other).not.toBe(first);
    expect(await invitationsOf(v.visitId)).toHaveLength(1);
  });

  it('a used link is not handed out again to the same visit', async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const v = await visitOf();
    const first = (await click(v)).headers.get('location');
    await w.db.pool.query('UPDATE invitations SET used_at = now(), used_by = 42 WHERE invite_link = $1', [
      first,
    ]);
    const second = (await click(v)).headers.get('location');
    expect(second).not.toBe(first);
    expect(second).toMatch(/^https:\/\/t\.me\/\+/);
  });

  it('uses the named channel, with its invite mode', async () => {
    await refillChannelPool(w.app.deps, w.channels.requests);
    const v = await visitOf();
    const res = await click({ ...v, channel: w.channels.requests });
    expect(res.status).toBe(302);
    expect(await invitationsOf(v.visitId)).toMatchObject([
      { channel_id: w.channels.requests, invite_link: res.headers.get('location') },
    ]);
  });

  it("falls back to the browser's latest visit when the session has none", async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const v = await visitOf();
    const res = await click({ tempId: v.tempId, sessionId: randomUUID() });
    expect(res.status).toBe(302);
    expect(await invitationsOf(v.visitId)).toHaveLength(1);
  });

  it('a browser never seen gets a minimal visit (with its PageView) so the click is still attributed', async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const tempId = randomUUID();
    const sessionId = randomUUID();
    const res = await click(
      { tempId, sessionId },
      { 'x-capigram-client-ip': '203.0.113.77', 'x-capigram-client-user-agent': 'UA/1' },
    );
    expect(res.status).toBe(302);
    const { rows } = await w.db.pool.query(
      'SELECT id, kind, href, client_ip, user_agent FROM visits WHERE temp_id = $1',
      [tempId],
    );
    expect(rows).toMatchObject([
      { kind: 'pageview', href: `${ORIGIN}/landing`, client_ip: '203.0.113.77', user_agent: 'UA/1' },
    ]);
    expect(await invitationsOf(rows[0].id)).toMatchObject([{ invite_link: res.headers.get('location') }]);
    expect(await w.count('sends WHERE visit_id = $1', [rows[0].id])).toBe(1);
  });

  it('concurrent clicks of different visits never share a pooled link', async () => {
    await w.db.pool.query('UPDATE channels SET pool_target = 24 WHERE id = $1', [w.channels.main]);
    await refillChannelPool(w.app.deps, w.channels.main);
    const visits = await Promise.all(Array.from({ length: 24 }, () => visitOf()));
    const calls = w.fakes.telegram.calls('createChatInviteLink').length;
    const locations = await Promise.all(visits.map(async (v) => (await click(v)).headers.get('location')));
    expect(new Set(locations).size).toBe(24);
    expect(w.fakes.telegram.calls('createChatInviteLink')).toHaveLength(calls);
    expect(
      await w.count('invitations WHERE channel_id = $1 AND visit_id IS NOT NULL', [w.channels.main]),
    ).toBe(24);
  });

  it('concurrent clicks of one visit get one link', async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const v = await visitOf();
    const locations = await Promise.all(
      Array.from({ length: 8 }, async () => (await click(v)).headers.get('location')),
    );
    expect(new Set(locations).size).toBe(1);
    expect(await invitationsOf(v.visitId)).toHaveLength(1);
  });
});

describe('track/invite when the pool is empty or Telegram fails', () => {
  it('creates a link on the spot, named after it, admitting one member, with an expiry', async () => {
    const v = await visitOf();
    const res = await click(v);
    expect(res.status).toBe(302);
    const calls = w.fakes.telegram.calls('createChatInviteLink');
    expect(calls).toHaveLength(1);
    const p = calls[0]!;
    expect(p.chat_id).toBe(CHATS.main.id);
    expect(p.member_limit).toBe(1);
    expect(p.creates_join_request).toBeUndefined();
    expect(String(p.name).length).toBeLessThanOrEqual(32);
    expect(Number(p.expire_date)).toBeGreaterThan(Date.now() / 1000 + 3600);
    const created = w.fakes.telegram.links(CHATS.main.id);
    expect(res.headers.get('location')).toBe(created[0]!.invite_link);
    const { rows } = await w.db.pool.query(
      'SELECT name, expires_at, visit_id FROM invitations WHERE invite_link = $1',
      [created[0]!.invite_link],
    );
    expect(rows).toMatchObject([{ name: p.name, visit_id: v.visitId }]);
  });

  it('a join-request channel gets creates_join_request links, never with member_limit', async () => {
    const v = await visitOf();
    expect((await click({ ...v, channel: w.channels.requests })).status).toBe(302);
    const p = w.fakes.telegram.calls('createChatInviteLink')[0]!;
    expect(p.creates_join_request).toBe(true);
    expect(p.member_limit).toBeUndefined();
  });

  it('Telegram down → 302 to the public link, recorded as an unattributed invitation, every click', async () => {
    w.fakes.telegram.down = true;
    const v = await visitOf();
    for (let i = 0; i < 2; i++) {
      const res = await click(v);
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('https://t.me/main_channel_public');
    }
    expect(await invitationsOf(v.visitId)).toMatchObject([
      { invite_link: 'https://t.me/main_channel_public', unattributed: true },
      { invite_link: 'https://t.me/main_channel_public', unattributed: true },
    ]);
  });

  it('flood control → public link at once, and the bot is left alone until retry_after has passed', async () => {
    w.fakes.telegram.floodNext(1, 40);
    const res = await click(await visitOf());
    expect(res.headers.get('location')).toBe('https://t.me/main_channel_public');
    const { rows } = await w.db.pool.query<{ wait: number }>(
      'SELECT extract(epoch FROM flood_wait_until - now())::float AS wait FROM bots',
    );
    expect(rows[0]!.wait).toBeGreaterThan(35);
    expect(rows[0]!.wait).toBeLessThanOrEqual(40);
    const again = await click(await visitOf());
    expect(again.headers.get('location')).toBe('https://t.me/main_channel_public');
    expect(w.fakes.telegram.calls('createChatInviteLink')).toHaveLength(1);
  });

  it('without a public link the username is used; with neither, 503 UNAVAILABLE with Retry-After', async () => {
    await w.db.pool.query('UPDATE channels SET public_invite_url = NULL WHERE id = $1', [w.channels.main]);
    try {
      w.fakes.telegram.down = true;
      expect((await click(await visitOf())).headers.get('location')).toBe(
        `https://t.me/${CHATS.main.username}`,
      );
      const res = await click({ ...(await visitOf()), channel: w.channels.requests });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect((await problem(res)).code).toBe('UNAVAILABLE');
    } finally {
      await w.db.pool.query('UPDATE channels SET public_invite_url = $2 WHERE id = $1', [
        w.channels.main,
        'https://t.me/main_channel_public',
      ]);
    }
  });

  it('a bot known not to be admin is not asked; the click falls back', async () => {
    await w.db.pool.query('UPDATE channels SET bot_is_admin = false WHERE id = $1', [w.channels.main]);
    expect((await click(await visitOf())).headers.get('location')).toBe('https://t.me/main_channel_public');
    expect(w.fakes.telegram.calls('createChatInviteLink')).toHaveLength(0);
  });
});

describe('track/invite refuses what it must', () => {
  it('unknown website → 404; unknown, foreign or malformed channel → 404 NOT_FOUND', async () => {
    const v = await visitOf();
    const unknownSite = await click({ ...v, website: 'ws_nope' });
    expect((await problem(unknownSite)).code).toBe('UNKNOWN_WEBSITE');
    for (const channel of [randomUUID(), w.channels.other, 'not-a-uuid']) {
      const res = await click({ ...v, channel });
      expect(res.status).toBe(404);
      expect((await problem(res)).code).toBe('NOT_FOUND');
    }
    expect(await invitationsOf(v.visitId)).toHaveLength(0);
  });

  it('bad and repeated query parameters → 400', async () => {
    const v = await visitOf();
    const bad = await w.get(`/backend/track/invite?website=${w.websiteId}&tid=nope&sid=${v.sessionId}`);
    expect((await problem(bad)).code).toBe('VALIDATION_FAILED');
    const repeated = await w.get(
      `/backend/track/invite?website=${w.websiteId}&tid=${v.tempId}&tid=${v.tempId}&sid=${v.sessionId}`,
    );
    expect(repeated.status).toBe(400);
    expect((await problem(repeated)).code).toBe('VALIDATION_FAILED');
    const missing = await w.get(`/backend/track/invite?website=${w.websiteId}&tid=${v.tempId}`);
    expect(missing.status).toBe(400);
  });

  it('a click from a page on another domain → 403', async () => {
    const res = await click(await visitOf(), { referer: 'https://evil-example.com/landing' });
    expect(res.status).toBe(403);
    expect((await problem(res)).code).toBe('DOMAIN_NOT_ALLOWED');
  });
});
