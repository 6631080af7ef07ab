// A HEAD, or a link-preview fetcher (Telegram's, Meta's ad review, Slack's…), only looks at a click
// link: it gets a small page, and no visit, PageView or single-use invite link is spent on it.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isLinkLookup } from '../../backend/http/tracker/link-preview.js';
import { clientIp, ORIGIN, startWorld, type World } from './world.js';

let w: World;
beforeAll(async () => {
  w = await startWorld();
});
afterAll(async () => {
  await w.close();
});

const IPHONE_FACEBOOK_APP =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/455.0.0.39.109;FBBV/1;FBDV/iPhone14,5;FBMD/iPhone;FBSN/iOS;FBSV/17.4;FBSS/3;FBLC/en_US;FBOP/5]';

async function spent(tempId: string): Promise<{ visits: number; invitations: number; sends: number }> {
  return {
    visits: await w.count('visits WHERE temp_id = $1', [tempId]),
    invitations: await w.count('invitations i JOIN visits v ON v.id = i.visit_id WHERE v.temp_id = $1', [
      tempId,
    ]),
    sends: await w.count('sends s JOIN visits v ON v.id = s.visit_id WHERE v.temp_id = $1', [tempId]),
  };
}

/** A request of any method, not following redirects, from a fresh client IP (its own rate-limit budget). */
function call(method: string, pathAndQuery: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${w.app.url}${pathAndQuery}`, {
    method,
    redirect: 'manual',
    headers: { 'x-capigram-client-ip': clientIp(), ...headers },
  });
}

function browserCookies(tempId: string): string {
  return `capigram_tid=${tempId}; capigram_sid=${randomUUID()}`;
}

describe('looking at a click link', () => {
  it.each([
    ['HEAD', 'Mozilla/5.0 (X11; Linux x86_64) Chrome/126.0'],
    ['GET', 'TelegramBot (like TwitterBot)'],
    ['GET', 'facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)'],
    ['GET', 'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)'],
  ])('%s /r/… as %s → 200, nothing recorded, no link spent', async (method, userAgent) => {
    const tempId = randomUUID();
    const res = await call(method, `/r/${w.websiteId}/${w.channels.main}?utm_source=preview`, {
      'user-agent': userAgent,
      cookie: browserCookies(tempId),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('location')).toBeNull();
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(await spent(tempId)).toEqual({ visits: 0, invitations: 0, sends: 0 });
  });

  it("a person in Facebook's in-app browser is a click: 302 to an invite link, one visit", async () => {
    const tempId = randomUUID();
    const res = await w.get(`/r/${w.websiteId}/${w.channels.main}`, {
      'user-agent': IPHONE_FACEBOOK_APP,
      cookie: browserCookies(tempId),
    });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toMatch(/^https:\/\/t\.me\/\+/);
    expect((await spent(tempId)).visits).toBe(1);
    expect((await spent(tempId)).invitations).toBe(1);
  });

  it('HEAD of track/invite, or a preview fetcher behind the proxy → 200, no link spent; an unknown site is still 404', async () => {
    const tempId = randomUUID();
    const query = `website=${w.websiteId}&tid=${tempId}&sid=${randomUUID()}`;
    const head = await call('HEAD', `/backend/track/invite?${query}`, { referer: `${ORIGIN}/` });
    expect(head.status).toBe(200);
    const proxied = await w.get(`/backend/track/invite?${query}`, {
      referer: `${ORIGIN}/`,
      'x-capigram-client-user-agent': 'WhatsApp/2.23.20.0',
    });
    expect(proxied.status).toBe(200);
    expect(await spent(tempId)).toEqual({ visits: 0, invitations: 0, sends: 0 });
    const unknown = await call('HEAD', `/r/ws_unknown/${w.channels.main}`);
    expect(unknown.status).toBe(404);
  });
});

describe('isLinkLookup', () => {
  it.each([
    ['HEAD', undefined, true],
    ['GET', undefined, false],
    ['GET', 'Mozilla/5.0 (Linux; Android 14) Chrome/126.0 Mobile Safari/537.36', false],
    ['GET', IPHONE_FACEBOOK_APP, false],
    ['GET', 'Mozilla/5.0 (iPhone) Instagram 330.0.0.0', false],
    ['GET', 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)', true],
    ['GET', 'Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)', true],
    ['GET', 'LinkedInBot/1.0 (compatible; Mozilla/5.0)', true],
  ] as const)('%s with %s → %s', (method, userAgent, expected) => {
    expect(isLinkLookup(method, userAgent)).toBe(expected);
  });
});
