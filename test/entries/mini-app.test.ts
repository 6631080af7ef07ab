// The Mini App route: an entry of kind app hands out t.me/<bot>/<app>?startapp=<payload>; the
// Mini App posts Telegram.WebApp.initData to track/app; Capigram checks Telegram's signature with
// the entry's bot token and the freshness of auth_date, then ties the visit as /start does.
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addEntry } from '../../backend/domain/admin/entries.js';
import { DEFAULT_BOT } from '../fakes/index.js';
import {
  conversionsOf,
  landAndEnter,
  metaEvents,
  newVisitor,
  payloadOf,
  settled,
  startEntryWorld,
  type EntryWorld,
} from './world.js';

const OTHER_TOKEN = '888000:TEST-other-capigram-bot-token';

let w: EntryWorld;
let appEntry: string;
beforeAll(async () => {
  w = await startEntryWorld();
  appEntry = (
    await addEntry(w.db.pool, {
      siteId: w.siteId,
      botId: w.botId,
      kind: 'app',
      app: 'shopapp',
      eventType: 'CompleteRegistration',
    })
  ).entryId;
});
afterAll(async () => {
  await w.close();
});

/** initData as Telegram builds it, written out from Telegram's documentation rather than through Capigram's code. */
function initData(
  fields: Record<string, string>,
  token = DEFAULT_BOT.token,
  tamper?: (p: URLSearchParams) => void,
): string {
  const dataCheckString = Object.entries(fields)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${v}`)
    .join('\n');
  const secretKey = createHmac('sha256', 'WebAppData').update(token).digest();
  const hash = createHmac('sha256', secretKey).update(dataCheckString).digest('hex');
  const params = new URLSearchParams({ ...fields, hash });
  tamper?.(params);
  return params.toString();
}

const opened = (
  userId: number,
  startParam: string | undefined,
  authDate = Math.floor(Date.now() / 1000),
) => ({
  query_id: 'AAHdF6IQAAAAAN0XohDhrOrc',
  user: JSON.stringify({ id: userId, first_name: 'Ann', language_code: 'en', allows_write_to_pm: true }),
  auth_date: String(authDate),
  ...(startParam === undefined ? {} : { start_param: startParam }),
});

const post = (body: unknown) =>
  fetch(`${w.app.url}/backend/track/app`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: 'https://app.example.net' },
    body: JSON.stringify(body),
  });

describe('Mini App open → track/app', () => {
  it('the entry link opens the Mini App with a payload, and a valid initData is attributed with the visit’s click ids, IP and User-Agent', async () => {
    const v = newVisitor();
    const { visitId, location } = await landAndEnter(w, v, appEntry);
    expect(location).toMatch(/^https:\/\/t\.me\/capigram_test_bot\/shopapp\?startapp=[A-Za-z0-9_-]{1,64}$/);
    const user = 777_320_001;
    const res = await post({ initData: initData(opened(user, payloadOf(location))) });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example.net');
    expect(await res.json()).toEqual({ attributed: true });
    await w.fakes.meta.waitFor(() => metaEvents(w, 'CompleteRegistration').length > 0, 10_000);
    await settled(w);
    const [conversion] = await conversionsOf(w, user);
    expect(conversion).toMatchObject({ event_type: 'CompleteRegistration', visit_id: visitId });
    expect(metaEvents(w, 'CompleteRegistration')[0]!.event).toMatchObject({
      event_id: `cnv_${conversion!.id}`,
      user_data: { fbc: v.fbc, fbp: v.fbp, client_ip_address: v.ip, client_user_agent: v.userAgent },
    });
    // Opened again by the same user: already tied, nothing more sent; by someone else: organic.
    expect(await (await post({ initData: initData(opened(user, payloadOf(location))) })).json()).toEqual({
      attributed: true,
    });
    expect(await (await post({ initData: initData(opened(user + 1, payloadOf(location))) })).json()).toEqual({
      attributed: false,
    });
    await settled(w);
    expect(metaEvents(w, 'CompleteRegistration')).toHaveLength(1);
  });

  it('forged, expired and other-bot initData get 401 INIT_DATA_INVALID and tie nothing', async () => {
    const { location } = await landAndEnter(w, newVisitor(), appEntry);
    const payload = payloadOf(location);
    const user = 777_320_010;
    const cases = {
      'another user put in': initData(opened(user, payload), DEFAULT_BOT.token, (p) =>
        p.set('user', JSON.stringify({ id: user + 5 })),
      ),
      'hash made up': initData(opened(user, payload), DEFAULT_BOT.token, (p) =>
        p.set('hash', 'a'.repeat(64)),
      ),
      'hash missing': initData(opened(user, payload), DEFAULT_BOT.token, (p) => p.delete('hash')),
      'older than 24 hours': initData(opened(user, payload, Math.floor(Date.now() / 1000) - 24 * 3600 - 60)),
      "another bot's": initData(opened(user, payload), OTHER_TOKEN),
      'not initData at all': 'hello',
    };
    for (const [what, data] of Object.entries(cases)) {
      const res = await post({ initData: data });
      expect(res.status, what).toBe(401);
      expect(res.headers.get('content-type'), what).toContain('application/problem+json');
      expect(((await res.json()) as { code: string }).code, what).toBe('INIT_DATA_INVALID');
    }
    expect((await post({})).status).toBe(400);
    expect((await post({ initData: '' })).status).toBe(400);
    const { rows } = await w.db.pool.query('SELECT used_by FROM entry_clicks WHERE payload = $1', [payload]);
    expect(rows).toEqual([{ used_by: null }]);
    expect(await conversionsOf(w, user)).toEqual([]);
  });

  it('a Mini App opened without a payload (its menu button) is answered, organic', async () => {
    const res = await post({ initData: initData(opened(777_320_020, undefined)) });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ attributed: false });
  });

  it('any origin may preflight track/app', async () => {
    const res = await fetch(`${w.app.url}/backend/track/app`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example.net', 'access-control-request-method': 'POST' },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example.net');
  });
});
