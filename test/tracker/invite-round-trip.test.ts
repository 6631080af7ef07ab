import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../backend/config.js';
import { createPool } from '../../backend/db/pool.js';
import { runStatementsInline } from '../../backend/db/prepared-batch.js';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { createRateLimiter, rateLimitSettings } from '../../backend/domain/rate-limits.js';
import { clickRoundTrip, inviteClickCall } from '../../backend/domain/tracker/click-handout.js';
import { clientIp, initBody, ORIGIN, problem, startWorld, type World } from './world.js';

/**
 * An invite click on its common path (the visit holds a link, or the pool has one) is one round
 * trip to PostgreSQL and one commit; the rate limit is counted by that same transaction, and a
 * dry pool still gets the visitor a link the slower way.
 */

// A small budget, so that a test can spend it; each test clicks from an address of its own.
const PER_MINUTE = 4;
let w: World;
beforeAll(async () => {
  w = await startWorld({
    poolTarget: 3,
    env: { TRACKER_RATE_LIMIT_INVITE: String(PER_MINUTE), TRACKER_RATE_LIMIT_BURST: '0' },
  });
});
afterAll(async () => {
  await w.close();
});
beforeEach(async () => {
  w.fakes.telegram.reset();
  await w.db.pool.query('DELETE FROM invitations');
});

/**
 * The site's first track/init notes, after its answer, that the site has visits (once per
 * interval, `install-signals.ts`): waited for, so that the round trips counted are the click's.
 */
async function siteSeen(): Promise<void> {
  const started = Date.now();
  while ((await w.count('site_visits_seen WHERE site_id = $1', [w.siteId])) === 0) {
    if (Date.now() - started > 5000) throw new Error('the site was never noted as seen');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * The query strings the process's PostgreSQL clients send while `fn` runs (one round trip each),
 * without the `PREPARE`s a connection makes once for each statement it has not run before.
 */
async function roundTrips(fn: () => Promise<void>): Promise<string[]> {
  const sent: string[] = [];
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    const config = args[0] as string | { text?: string };
    sent.push(typeof config === 'string' ? config : (config.text ?? ''));
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    proto.query = original;
  }
  return sent.filter((text) => !text.startsWith('PREPARE ') && !REFILL.test(text));
}

// A click that took a pooled link asks for a refill of the pool, at most once per channel every
// two seconds per process (`handout.ts`): not part of the click's own cost, left out of the count.
const REFILL = /graphile_worker\.add_job/;

const commitsOf = (texts: string[]) => texts.filter((t) => /^BEGIN;.*COMMIT$/s.test(t)).length;

async function visitOf(ip: string): Promise<{ visitId: string; tempId: string; sessionId: string }> {
  const body = initBody(w);
  const res = await w.post('/backend/track/init', body, { 'x-capigram-client-ip': ip });
  expect(res.status).toBe(200);
  return { visitId: ((await res.json()) as { visitId: string }).visitId, ...body };
}

function click(q: { tempId: string; sessionId: string }, ip: string): Promise<Response> {
  const params = new URLSearchParams({ website: w.websiteId, tid: q.tempId, sid: q.sessionId });
  return w.get(`/backend/track/invite?${params.toString()}`, {
    referer: `${ORIGIN}/landing`,
    'x-capigram-client-ip': ip,
  });
}

describe('an invite click on the common path', () => {
  it('is one round trip and one commit, for a pooled link and for the link the visit holds', async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const ip = clientIp();
    expect((await click(await visitOf(ip), ip)).status).toBe(302);
    const v = await visitOf(clientIp());
    await siteSeen();

    let location: string | null = null;
    const pooled = await roundTrips(async () => {
      const res = await click(v, ip);
      expect(res.status).toBe(302);
      location = res.headers.get('location');
    });
    expect(pooled, pooled.join('\n----\n')).toHaveLength(1);
    expect(commitsOf(pooled)).toBe(1);

    const held = await roundTrips(async () => {
      const res = await click(v, clientIp());
      expect(res.headers.get('location')).toBe(location);
    });
    expect(held).toHaveLength(1);
    expect(commitsOf(held)).toBe(1);
  });

  it("a browser never seen gets its minimal visit and a link in the same round trip (the worker's wake-up aside)", async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const ip = clientIp();
    const browser = { tempId: randomUUID(), sessionId: randomUUID() };
    let location: string | null = null;
    const sent = await roundTrips(async () => {
      const res = await click(browser, ip);
      expect(res.status).toBe(302);
      location = res.headers.get('location');
    });
    const { rows } = await w.db.pool.query<{ id: string }>('SELECT id FROM visits WHERE temp_id = $1', [
      browser.tempId,
    ]);
    expect(rows).toHaveLength(1);
    expect(
      await w.count('invitations WHERE visit_id = $1 AND invite_link = $2', [rows[0]!.id, location]),
    ).toBe(1);
    expect(await w.count('sends WHERE visit_id = $1', [rows[0]!.id])).toBe(1);
    // The click's transaction, and the delivery worker's wake-up for the visit's PageView, which
    // the click does not wait for.
    expect(commitsOf(sent)).toBe(1);
    expect(sent.filter((t) => /^BEGIN;/.test(t))).toHaveLength(1);
    expect(sent.length).toBeLessThanOrEqual(2);
  });
});

describe('an ad click to a channel (/r/…) on the common path', () => {
  const redirect = (ip: string, fbclid: string, cookie?: string) =>
    w.get(`/r/${w.websiteId}/${w.channels.main}?fbclid=${fbclid}`, {
      accept: 'text/html',
      'user-agent': 'Mozilla/5.0 (iPhone) Test/1.0',
      'x-capigram-client-ip': ip,
      ...(cookie === undefined ? {} : { cookie }),
    });

  it('is one round trip and one commit; the same click again gets the same link, also in one', async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const ip = clientIp();
    expect((await redirect(ip, 'IwAR-warm')).status).toBe(302);
    let first: Response | undefined;
    const sent = await roundTrips(async () => {
      first = await redirect(ip, 'IwAR-one');
      expect(first.status).toBe(302);
    });
    // The click's transaction, and the delivery worker's wake-up for its visit's PageView.
    expect(commitsOf(sent)).toBe(1);
    expect(sent.filter((t) => /^BEGIN;/.test(t))).toHaveLength(1);
    expect(sent.length).toBeLessThanOrEqual(2);

    // The cookies the redirect set make a reload the same visit.
    const cookie = first!.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
    const again = await roundTrips(async () => {
      const res = await redirect(clientIp(), 'IwAR-one', cookie);
      expect(res.headers.get('location')).toBe(first!.headers.get('location'));
    });
    expect(again).toHaveLength(1);
    expect(commitsOf(again)).toBe(1);
    expect(
      await w.count('invitations WHERE invite_link = $1 AND visit_id IS NOT NULL', [
        first!.headers.get('location'),
      ]),
    ).toBe(1);
  });

  it('a refused redirect records no visit and takes no link', async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const ip = clientIp();
    for (let i = 0; i < PER_MINUTE; i++) expect((await redirect(ip, `IwAR-${i}`)).status).toBe(302);
    const visits = await w.count('visits WHERE client_ip = $1', [ip]);
    const pooled = await w.count('invitations WHERE visit_id IS NULL');
    const refused = await w.get(`/r/${w.websiteId}/${w.channels.main}?fbclid=IwAR-over`, {
      'x-capigram-client-ip': ip,
    });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await w.count('visits WHERE client_ip = $1', [ip])).toBe(visits);
    expect(await w.count('invitations WHERE visit_id IS NULL')).toBe(pooled);
  });
});

describe('behind a transaction-mode pooler', () => {
  it('the click runs with its statements written out in full, and still hands one link per visit', async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const pool = createPool(w.db.url, 2);
    runStatementsInline(pool);
    try {
      const v = await visitOf(clientIp());
      const limiter = createRateLimiter(pool, rateLimitSettings(loadConfig({})));
      const call = () =>
        inviteClickCall({
          siteId: w.siteId,
          tempId: v.tempId,
          sessionId: v.sessionId,
          click: { consented: true },
          admission: limiter.visitAdmission('invite', w.siteId, clientIp()),
        });
      const deps = { pool, now: () => new Date() };
      const [a, b] = await Promise.all([
        clickRoundTrip(deps, call(), 'usable'),
        clickRoundTrip(deps, call(), 'usable'),
      ]);
      expect(a).toMatchObject({ allowed: true, visitId: v.visitId, channel: { id: w.channels.main } });
      expect(a.link?.inviteLink).toMatch(/^https:\/\/t\.me\/\+/);
      expect(b.link?.inviteLink).toBe(a.link?.inviteLink);
      expect([a.link?.held, b.link?.held].sort()).toEqual([false, true]);
      expect(await w.count('invitations WHERE visit_id = $1', [v.visitId])).toBe(1);
      // Nothing of a click outlives its transaction on the connection.
      const { rows } = await pool.query<{ v: string | null }>(
        "SELECT nullif(current_setting('capigram.click_visit', true), '') AS v",
      );
      expect(rows).toEqual([{ v: null }]);
    } finally {
      await pool.end();
    }
  });
});

describe('the rate limit counted by the click', () => {
  it('a refused click answers 429 with Retry-After and writes nothing but its count', async () => {
    await refillChannelPool(w.app.deps, w.channels.main);
    const ip = clientIp();
    for (let i = 0; i < PER_MINUTE; i++) {
      expect((await click({ tempId: randomUUID(), sessionId: randomUUID() }, ip)).status).toBe(302);
    }
    const pooled = await w.count('invitations WHERE visit_id IS NULL');
    const browser = { tempId: randomUUID(), sessionId: randomUUID() };
    const refused = await click(browser, ip);
    expect(refused.status).toBe(429);
    expect((await problem(refused)).code).toBe('RATE_LIMITED');
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(await w.count('visits WHERE temp_id = $1', [browser.tempId])).toBe(0);
    expect(await w.count('invitations WHERE visit_id IS NULL')).toBe(pooled);
    expect(await w.count('invitations WHERE visit_id IS NULL AND assigned_at IS NOT NULL')).toBe(0);
    const { rows } = await w.db.pool.query<{ points: number }>(
      'SELECT points FROM capigram_rate_limits WHERE key = $1',
      [`kl_invite:${w.siteId}:${ip}`],
    );
    expect(rows).toEqual([{ points: PER_MINUTE + 1 }]);

    // A known visit is refused alike: it is given no link.
    const v = await visitOf(clientIp());
    expect((await click(v, ip)).status).toBe(429);
    expect(await w.count('invitations WHERE visit_id = $1', [v.visitId])).toBe(0);
  });

  it('a click of no channel is counted, and writes no visit', async () => {
    const ip = clientIp();
    const browser = { tempId: randomUUID(), sessionId: randomUUID() };
    const params = new URLSearchParams({
      website: w.websiteId,
      tid: browser.tempId,
      sid: browser.sessionId,
      channel: randomUUID(),
    });
    const res = await w.get(`/backend/track/invite?${params.toString()}`, {
      referer: `${ORIGIN}/landing`,
      'x-capigram-client-ip': ip,
    });
    expect((await problem(res)).code).toBe('NOT_FOUND');
    expect(await w.count('visits WHERE temp_id = $1', [browser.tempId])).toBe(0);
    expect(await w.count('capigram_rate_limits WHERE key = $1', [`kl_invite:${w.siteId}:${ip}`])).toBe(1);
  });
});

describe('a dry pool', () => {
  it('a browser never seen gets a link created at Telegram, held by its one visit', async () => {
    const ip = clientIp();
    const browser = { tempId: randomUUID(), sessionId: randomUUID() };
    const res = await click(browser, ip);
    expect(res.status).toBe(302);
    expect(w.fakes.telegram.calls('createChatInviteLink')).toHaveLength(1);
    const { rows } = await w.db.pool.query<{ id: string }>('SELECT id FROM visits WHERE temp_id = $1', [
      browser.tempId,
    ]);
    expect(rows).toHaveLength(1);
    expect(
      await w.count('invitations WHERE visit_id = $1 AND invite_link = $2', [
        rows[0]!.id,
        res.headers.get('location'),
      ]),
    ).toBe(1);
    // A second click of the browser is served in one round trip from the link it holds.
    const again = await roundTrips(async () => {
      expect((await click(browser, clientIp())).headers.get('location')).toBe(res.headers.get('location'));
    });
    expect(again).toHaveLength(1);
  });

  it('two concurrent clicks of one visit get one link; a second link created meanwhile goes to the pool', async () => {
    const v = await visitOf(clientIp());
    const [a, b] = await Promise.all([click(v, clientIp()), click(v, clientIp())]);
    expect(a.status).toBe(302);
    expect(a.headers.get('location')).toBe(b.headers.get('location'));
    expect(await w.count('invitations WHERE visit_id = $1', [v.visitId])).toBe(1);
    const created = w.fakes.telegram.calls('createChatInviteLink').length;
    expect(await w.count('invitations WHERE visit_id IS NULL AND channel_id = $1', [w.channels.main])).toBe(
      created - 1,
    );
  });
});
