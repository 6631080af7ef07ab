// A join click is a visitor's browser navigating to track/invite or /r/…: whatever goes wrong
// there, the visitor must reach the channel (unattributed) or read a sentence, never problem+json.
// tracker.js asks for the link as JSON instead, to fall back to the link's own href.
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { ORIGIN, problem, startWorld, type World } from './world.js';

let w: World;
beforeAll(async () => {
  w = await startWorld({ poolTarget: 2 });
  await refillChannelPool(w.app.deps, w.channels.main);
});
afterAll(async () => {
  await w.close();
});

const NAVIGATION = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8', 'sec-fetch-mode': 'navigate' };

/** A GET as a browser sends it: fetch() would put its own Sec-Fetch-Mode (cors) in place of ours. */
function get(path: string, headers: Record<string, string>): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${w.app.url}${path}`,
      { headers: { 'x-capigram-client-ip': '198.51.100.99', ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const h = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v);
          resolve(
            new Response(res.statusCode === 302 ? null : Buffer.concat(chunks), {
              status: res.statusCode ?? 0,
              headers: h,
            }),
          );
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

function invite(q: { website?: string; channel?: string; format?: string }, headers: Record<string, string>) {
  const params = new URLSearchParams({
    website: q.website ?? w.websiteId,
    tid: randomUUID(),
    sid: randomUUID(),
  });
  if (q.channel !== undefined) params.set('channel', q.channel);
  if (q.format !== undefined) params.set('format', q.format);
  return get(`/backend/track/invite?${params.toString()}`, { referer: `${ORIGIN}/landing`, ...headers });
}

describe('track/invite asked for JSON (tracker.js)', () => {
  it('answers 200 with the visit and its invite link instead of a redirect', async () => {
    const res = await invite({ format: 'json' }, { origin: ORIGIN });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { visitId: string; inviteUrl: string };
    expect(body.inviteUrl).toMatch(/^https:\/\/t\.me\/\+/);
    const { rows } = await w.db.pool.query('SELECT visit_id FROM invitations WHERE invite_link = $1', [
      body.inviteUrl,
    ]);
    expect(rows).toEqual([{ visit_id: body.visitId }]);
    expect(res.headers.get('access-control-allow-origin')).toBe(ORIGIN);
  });

  it('keeps problem+json for its refusals, so the script falls back', async () => {
    const res = await invite({ channel: 'CHANNEL_ID', format: 'json' }, { origin: ORIGIN });
    expect((await problem(res)).status).toBe(404);
    expect(await problem(await invite({ format: 'xml' }, { origin: ORIGIN }))).toMatchObject({
      status: 400,
      code: 'VALIDATION_FAILED',
    });
  });

  it('without format=json a caller that accepts JSON still gets the 302 (the proxy and the recipes read its Location)', async () => {
    const res = await invite({}, { accept: 'application/json', origin: ORIGIN });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toMatch(/^https:\/\/t\.me\/\+/);
  });
});

describe('a browser navigation that Capigram refuses', () => {
  it("goes to the channel's public link when the site and channel are known (a page on a domain the site does not list)", async () => {
    const res = await invite({}, { ...NAVIGATION, referer: 'https://not-the-site.example/landing' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('https://t.me/main_channel_public');
    expect(res.headers.get('cache-control')).toBe('no-store');
  });

  it('reads a short page, with the error status, when no public link is known', async () => {
    for (const [q, status] of [
      [{ website: 'ws_unknownunknown00' }, 404],
      [{ channel: randomUUID() }, 404],
      [{ channel: 'CHANNEL_ID' }, 404],
    ] as const) {
      const res = await invite(q, NAVIGATION);
      expect(res.status, JSON.stringify(q)).toBe(status);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(await res.text()).toContain('This Telegram link cannot be opened right now');
    }
  });

  it('the same refusals stay problem+json for anything that is not a navigation', async () => {
    const res = await invite({}, { referer: 'https://not-the-site.example/landing', accept: '*/*' });
    expect(await problem(res)).toMatchObject({ status: 403, code: 'DOMAIN_NOT_ALLOWED' });
  });

  it('/r/… with an unknown site or channel reads the page; a known site with a channel that is not its own gets its page too', async () => {
    const unknownSite = await get(`/r/ws_unknownunknown00/${w.channels.main}`, NAVIGATION);
    expect(unknownSite.status).toBe(404);
    expect(await unknownSite.text()).toContain('This Telegram link cannot be opened right now');
    const foreign = await get(`/r/${w.websiteId}/${w.channels.other}`, NAVIGATION);
    expect(foreign.status).toBe(404);
    expect(foreign.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await problem(await w.get(`/r/${w.websiteId}/${w.channels.other}`))).toMatchObject({
      status: 404,
    });
  });
});
