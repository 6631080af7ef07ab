// Consent on the keyless surface (docs/consent.md): a site's mode (implied / required), track/init's
// `consent`, and every path that records a visit (init, direct-invite, invite clicks, /r/ ad links,
// update-fbp), checked in the database; the join a visit without consent leads to is organic, and
// the visit still counts in the funnel.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../backend/domain/admin/accounts.js';
import { addBot } from '../../backend/domain/admin/bots.js';
import { addChannel } from '../../backend/domain/admin/channels.js';
import { addPixel } from '../../backend/domain/admin/pixels.js';
import { createSite, updateSite } from '../../backend/domain/admin/sites.js';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { funnelReport } from '../../backend/domain/reports/funnel.js';
import { DEFAULT_BOT, startFakes, type FakeChat, type Fakes } from '../fakes/index.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { createTestDatabase, type TestDatabase } from '../harness/db.js';

const ORIGIN = 'https://shop.example.com';
const CHAT: FakeChat = {
  id: -1001000000901,
  title: 'Consent',
  type: 'channel',
  admins: { [DEFAULT_BOT.id]: { can_invite_users: true } },
};
const LANDING = `${ORIGIN}/landing?fbclid=IwAR2F4&utm_source=fb&utm_campaign=spring#top`;
const IDENTIFYING = {
  href: LANDING,
  landingPage: '/landing?fbclid=IwAR2F4&utm_source=fb&utm_campaign=spring',
  referrer: 'https://l.facebook.com/l.php?u=x&h=secret',
  userAgent: 'Mozilla/5.0 Consent test',
  fbc: 'fb.1.1763776512345.IwAR2F4',
  fbp: 'fb.1.1763776500000.1116446470',
  gclid: 'Cj0KCQ',
  ttclid: 'E.C.P.tt',
  sccid: 'sc-click',
  ttp: 'ttp-cookie',
  scid: 'scid-cookie',
  utmSource: 'fb',
  utmMedium: 'cpc',
  utmCampaign: 'spring',
  utmContent: 'a',
  utmTerm: 'b',
};

let fakes: Fakes;
let db: TestDatabase;
let app: TestApp;
let siteId: string;
let websiteId: string;
let channelId: string;

beforeAll(async () => {
  fakes = await startFakes({ telegram: { chats: [CHAT] } });
  db = await createTestDatabase();
  app = await startTestApp(db.pool, { env: { ...fakes.env } });
  const { accountId } = await createAccount(db.pool, { name: 'Consent' });
  ({ siteId, websiteId } = await createSite(db.pool, {
    accountId,
    name: 'Shop',
    domains: ['shop.example.com'],
    consentMode: 'required',
  }));
  const { botId } = await addBot(app.deps, { accountId, token: DEFAULT_BOT.token });
  ({ channelId } = await addChannel(app.deps, {
    siteId,
    botId,
    telegramChannelId: String(CHAT.id),
    title: CHAT.title,
    isDefault: true,
  }));
  await addPixel(app.deps, { platform: 'meta', siteId, pixelId: '1234567890', accessToken: 'meta-token' });
});
afterAll(async () => {
  await app?.stop();
  await fakes?.closeAll();
  await db?.drop();
});

function post(path: string, body: unknown) {
  return fetch(`${app.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: ORIGIN, 'x-capigram-client-ip': '203.0.113.9' },
    body: JSON.stringify(body),
  });
}

function get(pathAndQuery: string, headers: Record<string, string> = {}) {
  return fetch(`${app.url}${pathAndQuery}`, {
    redirect: 'manual',
    headers: { 'x-capigram-client-ip': '203.0.113.9', 'user-agent': 'Mozilla/5.0 Consent test', ...headers },
  });
}

interface VisitRow {
  temp_id: string;
  session_id: string;
  consented: boolean;
  href: string | null;
  landing_page: string | null;
  referrer: string | null;
  [column: string]: unknown;
}

async function visit(id: string): Promise<VisitRow> {
  const { rows } = await db.pool.query<VisitRow>('SELECT * FROM visits WHERE id = $1', [id]);
  return rows[0]!;
}

async function pageViews(visitId: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM sends WHERE visit_id = $1',
    [visitId],
  );
  return rows[0]!.n;
}

/** Every column that could identify the visitor or the ad click is empty. */
function expectNothingIdentifying(v: VisitRow, sent: { tempId: string; sessionId: string }): void {
  for (const column of [
    'client_ip',
    'user_agent',
    'fbc',
    'fbp',
    'gclid',
    'gbraid',
    'wbraid',
    'ttclid',
    'sccid',
    'ttp',
    'scid',
    'utm_source',
    'utm_medium',
    'utm_campaign',
    'utm_content',
    'utm_term',
  ]) {
    expect(v[column], column).toBeNull();
  }
  expect(v.consented).toBe(false);
  // The browser's cookie values are not kept either.
  expect(v.temp_id).not.toBe(sent.tempId);
  expect(v.session_id).not.toBe(sent.sessionId);
  for (const url of [v.href, v.landing_page, v.referrer]) {
    if (url !== null) expect(url).not.toMatch(/[?#]/);
  }
}

async function withMode<T>(mode: 'implied' | 'required', run: () => Promise<T>): Promise<T> {
  await updateSite(db.pool, { siteId, consentMode: mode });
  // The tracker caches sites for a few seconds.
  await new Promise((r) => setTimeout(r, 5_100));
  return run();
}

async function init(extra: Record<string, unknown>) {
  const body = {
    websiteId,
    tempId: randomUUID(),
    sessionId: randomUUID(),
    visitRequestId: randomUUID(),
    ...extra,
  };
  const res = await post('/backend/track/init', body);
  expect(res.status).toBe(200);
  const answer = (await res.json()) as {
    visitId: string;
    pageViewEventId: string | null;
    consent: string;
    consentMode: string;
  };
  return { body, answer };
}

describe('a site whose consent is required', () => {
  it('stores a visit without consent with its page path alone, sends no PageView, and still counts it', async () => {
    const { body, answer } = await init(IDENTIFYING);
    expect(answer.pageViewEventId).toBeNull();
    const v = await visit(answer.visitId);
    expectNothingIdentifying(v, body);
    expect(v.href).toBe(`${ORIGIN}/landing`);
    expect(v.landing_page).toBe('/landing');
    expect(await pageViews(answer.visitId)).toBe(0);

    // A retry of the same pageview is the same visit.
    const again = await post('/backend/track/init', body);
    expect(((await again.json()) as { visitId: string }).visitId).toBe(answer.visitId);

    // update-fbp finds nothing to patch: the visit kept no browser id, and takes no fbp.
    const patch = await post('/backend/track/update-fbp', {
      websiteId,
      tempId: body.tempId,
      fbp: IDENTIFYING.fbp,
    });
    expect(await patch.json()).toEqual({ updated: false });
    expect((await visit(answer.visitId)).fbp).toBeNull();

    const day = new Date().toISOString().slice(0, 10);
    const funnel = await funnelReport(db.pool, { siteId, from: day, to: day, groupBy: 'day' });
    expect(funnel.totals.visits).toBeGreaterThanOrEqual(1);
  });

  it('treats an explicit denied like silence, and an explicit grant as consent (with its PageView)', async () => {
    const denied = await init({ ...IDENTIFYING, consent: 'denied' });
    expectNothingIdentifying(await visit(denied.answer.visitId), denied.body);

    const granted = await init({ ...IDENTIFYING, consent: 'granted' });
    const v = await visit(granted.answer.visitId);
    expect(v).toMatchObject({
      consented: true,
      temp_id: granted.body.tempId,
      client_ip: '203.0.113.9',
      user_agent: IDENTIFYING.userAgent,
      fbc: IDENTIFYING.fbc,
      utm_campaign: 'spring',
      href: LANDING,
    });
    expect(await pageViews(granted.answer.visitId)).toBe(1);
    expect(granted.answer.pageViewEventId).toBe(`pv_${granted.answer.visitId}`);
    const patch = await post('/backend/track/update-fbp', {
      websiteId,
      tempId: granted.body.tempId,
      fbp: 'fb.1.1.2',
    });
    expect(await patch.json()).toEqual({ updated: false });
  });

  it('keeps a direct invite without consent anonymous, and its join organic: recorded, nothing sent', async () => {
    await refillChannelPool(app.deps, channelId);
    const body = {
      websiteId,
      tempId: randomUUID(),
      sessionId: randomUUID(),
      visitRequestId: randomUUID(),
      ...IDENTIFYING,
    };
    const res = await post('/backend/track/direct-invite', body);
    expect(res.status).toBe(200);
    const { visitId, inviteUrl } = (await res.json()) as { visitId: string; inviteUrl: string };
    expectNothingIdentifying(await visit(visitId), body);
    expect(await pageViews(visitId)).toBe(0);

    const user = { id: 777_009_001, first_name: 'Ann' };
    const update = fakes.telegram.chatMemberJoined({ chatId: CHAT.id, user, inviteLink: inviteUrl });
    expect((await fakes.telegram.deliverUpdate(DEFAULT_BOT.token, update)).status).toBe(200);
    const { rows: joins } = await db.pool.query<{
      attributed: boolean;
      visit_id: string | null;
      conversion_id: string | null;
    }>(
      `SELECT attributed, visit_id, conversion_id FROM memberships WHERE telegram_user_id = $1 AND kind = 'join'`,
      [user.id],
    );
    expect(joins).toEqual([{ attributed: false, visit_id: null, conversion_id: null }]);
    const { rows: conversions } = await db.pool.query(
      'SELECT 1 FROM conversions WHERE telegram_user_id = $1',
      [user.id],
    );
    expect(conversions).toHaveLength(0);
  });

  it('answers an /r/ ad link without setting or reading a cookie, its visit anonymous', async () => {
    await refillChannelPool(app.deps, channelId);
    const tempId = randomUUID();
    const res = await get(`/r/${websiteId}/${channelId}?fbclid=IwAR2F4&gclid=G1&utm_source=fb`, {
      cookie: `capigram_tid=${tempId}; capigram_sid=${randomUUID()}; _fbc=fb.1.1.x`,
    });
    expect(res.status).toBe(302);
    expect(res.headers.getSetCookie()).toEqual([]);
    const { rows } = await db.pool.query<{ id: string }>(
      `SELECT id FROM visits WHERE site_id = $1 AND kind = 'redirect' ORDER BY created_at DESC LIMIT 1`,
      [siteId],
    );
    const v = await visit(rows[0]!.id);
    expectNothingIdentifying(v, { tempId, sessionId: '' });
    expect(v.href).toBe(`${app.deps.config.PUBLIC_URL}/r/${websiteId}/${channelId}`);
    expect(await pageViews(rows[0]!.id)).toBe(0);
  });

  it('gives an invite click that says denied a visit of its own, anonymous, even for a known browser', async () => {
    await refillChannelPool(app.deps, channelId);
    const granted = await init({ ...IDENTIFYING, consent: 'granted' });
    const q = new URLSearchParams({
      website: websiteId,
      tid: granted.body.tempId,
      sid: granted.body.sessionId,
      consent: 'denied',
      format: 'json',
    });
    const res = await get(`/backend/track/invite?${q}`, { origin: ORIGIN, referer: LANDING });
    expect(res.status).toBe(200);
    const { visitId } = (await res.json()) as { visitId: string };
    expect(visitId).not.toBe(granted.answer.visitId);
    expectNothingIdentifying(await visit(visitId), granted.body);
  });

  it('records a click of an unknown browser that says nothing as a visit without consent', async () => {
    await refillChannelPool(app.deps, channelId);
    const sent = { tempId: randomUUID(), sessionId: randomUUID() };
    const q = new URLSearchParams({
      website: websiteId,
      tid: sent.tempId,
      sid: sent.sessionId,
      format: 'json',
    });
    const res = await get(`/backend/track/invite?${q}`, { origin: ORIGIN, referer: LANDING });
    expect(res.status).toBe(200);
    const { visitId } = (await res.json()) as { visitId: string };
    expectNothingIdentifying(await visit(visitId), sent);
  });

  it('answers its mode to a server-side client', async () => {
    const res = await get(`/backend/track/consent?website=${websiteId}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ consentMode: 'required' });
  });
});

describe('a site whose consent is implied', () => {
  it('records a visit that says nothing as consented, and one that says denied without identifiers', async () => {
    await withMode('implied', async () => {
      const silent = await init(IDENTIFYING);
      expect(silent.answer.pageViewEventId).toBe(`pv_${silent.answer.visitId}`);
      expect(await visit(silent.answer.visitId)).toMatchObject({
        consented: true,
        client_ip: '203.0.113.9',
        gclid: IDENTIFYING.gclid,
      });
      expect(await pageViews(silent.answer.visitId)).toBe(1);

      const denied = await init({ ...IDENTIFYING, consent: 'denied' });
      expectNothingIdentifying(await visit(denied.answer.visitId), denied.body);
      expect(await pageViews(denied.answer.visitId)).toBe(0);

      const res = await get(`/r/${websiteId}/${channelId}?fbclid=IwAR2F4`);
      expect(res.headers.getSetCookie().some((c) => c.startsWith('capigram_tid='))).toBe(true);
    });
  });
});
