import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WIRE_LIMITS } from '../../shared/tracker-wire.js';
import { startTestApp } from '../harness/app.js';
import { initBody, ORIGIN, problem, startWorld, type World } from './world.js';

let w: World;
beforeAll(async () => {
  w = await startWorld();
});
afterAll(async () => {
  await w.close();
});

interface VisitRow {
  id: string;
  site_id: string;
  temp_id: string;
  session_id: string;
  kind: string;
  href: string | null;
  landing_page: string | null;
  referrer: string | null;
  client_ip: string | null;
  user_agent: string | null;
  fbc: string | null;
  fbp: string | null;
  gclid: string | null;
  utm_source: string | null;
  channel_id: string | null;
}

async function visit(id: string): Promise<VisitRow> {
  const { rows } = await w.db.pool.query<VisitRow>('SELECT * FROM visits WHERE id = $1', [id]);
  if (rows[0] === undefined) throw new Error(`no visit ${id}`);
  return rows[0];
}

async function init(body: unknown, headers?: Record<string, string>): Promise<string> {
  const res = await w.post('/backend/track/init', body, headers);
  expect(res.status, await res.clone().text()).toBe(200);
  const json = (await res.json()) as { visitId: string; pageViewEventId: string | null };
  expect(Object.keys(json)).toEqual(['visitId', 'pageViewEventId']);
  // The event id of the Meta PageView queued for the visit (for the browser pixel's eventID), else null.
  const { rows } = await w.db.pool.query<{ event_id: string }>(
    `SELECT s.event_id FROM sends s JOIN pixels p ON p.id = s.pixel_id WHERE s.visit_id = $1 AND p.platform = 'meta'`,
    [json.visitId],
  );
  expect(json.pageViewEventId).toBe(rows[0]?.event_id ?? null);
  return json.visitId;
}

describe('track/init records a visit', () => {
  it('stores the attribution, the forwarded IP and UA, and creates one PageView send', async () => {
    const body = initBody(w, {
      href: `${ORIGIN}/landing?fbclid=IwAR2F4&utm_source=fb`,
      landingPage: '/landing?fbclid=IwAR2F4&utm_source=fb',
      referrer: 'https://l.facebook.com/',
      userAgent: 'Body-UA/1.0',
      fbc: 'fb.1.1763776512345.IwAR2F4',
      gclid: 'Cj0KCQ',
      utmSource: 'fb',
    });
    const id = await init(body, {
      'x-capigram-client-ip': '203.0.113.7',
      'x-capigram-client-user-agent': 'Header-UA/2.0',
    });
    const v = await visit(id);
    expect(v).toMatchObject({
      site_id: w.siteId,
      temp_id: body.tempId,
      session_id: body.sessionId,
      kind: 'pageview',
      href: body.href,
      landing_page: body.landingPage,
      referrer: 'https://l.facebook.com/',
      client_ip: '203.0.113.7',
      user_agent: 'Header-UA/2.0',
      fbc: 'fb.1.1763776512345.IwAR2F4',
      fbp: null,
      gclid: 'Cj0KCQ',
      utm_source: 'fb',
      channel_id: null,
    });
    const { rows } = await w.db.pool.query(
      'SELECT platform, event_id, status FROM sends WHERE visit_id = $1',
      [id],
    );
    expect(rows).toEqual([{ platform: 'meta', event_id: `pv_${id}`, status: 'pending' }]);
    // The visit's commit is followed by one wake-up for the delivery worker (sent beside the answer).
    await expect
      .poll(() =>
        w.count(
          `graphile_worker.jobs WHERE task_identifier = 'deliver_due' AND key = 'deliver_due' AND run_at <= now()`,
        ),
      )
      .toBe(1);
  });

  it("stores Google's iOS click ids (gbraid, wbraid)", async () => {
    const id = await init(initBody(w, { gbraid: '0AAAAAgbraid-1', wbraid: 'CjkKwbraid_2' }));
    const { rows } = await w.db.pool.query('SELECT gclid, gbraid, wbraid FROM visits WHERE id = $1', [id]);
    expect(rows[0]).toEqual({ gclid: null, gbraid: '0AAAAAgbraid-1', wbraid: 'CjkKwbraid_2' });
  });

  it('takes the UA from the body without the forwarding header, else from the request', async () => {
    const fromBody = await init(initBody(w, { userAgent: 'Body-UA/1.0' }), {
      'user-agent': 'Request-UA/3.0',
    });
    expect((await visit(fromBody)).user_agent).toBe('Body-UA/1.0');
    const fromRequest = await init(initBody(w), { 'user-agent': 'Request-UA/3.0' });
    expect((await visit(fromRequest)).user_agent).toBe('Request-UA/3.0');
  });

  it('believes X-Forwarded-For from a trusted hop when no client IP header is sent', async () => {
    const res = await fetch(`${w.app.url}/backend/track/init`, {
      method: 'POST',
      headers: { origin: ORIGIN, 'x-forwarded-for': '192.0.2.55' },
      body: JSON.stringify(initBody(w)),
    });
    expect(res.status).toBe(200);
    expect((await visit(((await res.json()) as { visitId: string }).visitId)).client_ip).toBe('192.0.2.55');
  });

  it('ignores forwarding headers from a hop that is not trusted', async () => {
    const untrusting = await startTestApp(w.db.pool, { env: { ...w.fakes.env, TRUSTED_PROXIES: 'none' } });
    try {
      const res = await fetch(`${untrusting.url}/backend/track/init`, {
        method: 'POST',
        headers: { origin: ORIGIN, 'x-forwarded-for': '192.0.2.55', 'x-capigram-client-ip': '203.0.113.9' },
        body: JSON.stringify(initBody(w)),
      });
      expect(res.status).toBe(200);
      expect((await visit(((await res.json()) as { visitId: string }).visitId)).client_ip).toBe('127.0.0.1');
    } finally {
      await untrusting.stop();
    }
  });

  it('without a visitRequestId every call is a new visit, even within one session', async () => {
    const body = initBody(w);
    const a = await init(body);
    const b = await init(body);
    expect(a).not.toBe(b);
    expect(await w.count('visits WHERE session_id = $1', [body.sessionId])).toBe(2);
    expect(await w.count('sends WHERE visit_id = ANY($1::uuid[])', [[a, b]])).toBe(2);
  });
});

describe('track/init with a visitRequestId is retry-safe', () => {
  it('a retry returns the same visit, fills only missing attribution and creates no second send', async () => {
    const first = initBody(w, { visitRequestId: randomUUID(), fbc: 'fb.1.1.FIRST', utmSource: 'first' });
    const id = await init(first, { 'x-capigram-client-ip': '203.0.113.10' });
    const retry = {
      ...first,
      fbc: 'fb.1.2.SECOND',
      fbp: 'fb.1.3.444',
      gclid: 'G-late',
      utmSource: 'second',
      referrer: 'https://ref.example.net/',
    };
    expect(await init(retry, { 'x-capigram-client-ip': '203.0.113.11' })).toBe(id);
    expect(await visit(id)).toMatchObject({
      fbc: 'fb.1.1.FIRST',
      utm_source: 'first',
      client_ip: '203.0.113.10',
      fbp: 'fb.1.3.444',
      gclid: 'G-late',
      referrer: 'https://ref.example.net/',
    });
    expect(await w.count('sends WHERE visit_id = $1', [id])).toBe(1);
  });

  it('the legacy gatewayRequestId is the same key', async () => {
    const key = randomUUID();
    const body = initBody(w);
    const id = await init({ ...body, gatewayRequestId: key });
    expect(await init({ ...body, visitRequestId: key.toUpperCase() })).toBe(id);
    expect(await init({ ...body, visitRequestId: key, gatewayRequestId: key })).toBe(id);
  });

  it('different visitRequestId and gatewayRequestId → 400 REQUEST_ID_MISMATCH, nothing written', async () => {
    const body = initBody(w, { visitRequestId: randomUUID(), gatewayRequestId: randomUUID() });
    const res = await w.post('/backend/track/init', body);
    expect(res.status).toBe(400);
    expect((await problem(res)).code).toBe('REQUEST_ID_MISMATCH');
    expect(await w.count('visits WHERE temp_id = $1', [body.tempId])).toBe(0);
  });

  it('a retry with a changed tempId, sessionId or websiteId → 409 VISIT_IDENTITY_MISMATCH, visit untouched', async () => {
    const body = initBody(w, { visitRequestId: randomUUID() });
    const id = await init(body);
    for (const changed of [{ tempId: randomUUID() }, { sessionId: randomUUID() }]) {
      const res = await w.post('/backend/track/init', { ...body, ...changed, gclid: 'should-not-land' });
      expect(res.status).toBe(409);
      expect((await problem(res)).code).toBe('VISIT_IDENTITY_MISMATCH');
    }
    const otherSite = await w.post(
      '/backend/track/init',
      { ...body, websiteId: w.otherWebsiteId, href: 'https://other.test/' },
      { origin: 'https://other.test' },
    );
    expect(otherSite.status).toBe(409);
    expect((await problem(otherSite)).code).toBe('VISIT_IDENTITY_MISMATCH');
    expect(await w.count('visits WHERE visit_request_id = $1', [body.visitRequestId])).toBe(1);
    expect((await visit(id)).gclid).toBeNull();
  });

  it('concurrent duplicates of one visitRequestId make one visit and one send', async () => {
    const body = initBody(w, { visitRequestId: randomUUID() });
    const ids = await Promise.all(Array.from({ length: 12 }, () => init(body)));
    expect(new Set(ids).size).toBe(1);
    expect(await w.count('visits WHERE visit_request_id = $1', [body.visitRequestId])).toBe(1);
    expect(await w.count('sends WHERE visit_id = $1', [ids[0]])).toBe(1);
  });
});

describe('track/init refuses what it must', () => {
  it('unknown websiteId → 404 UNKNOWN_WEBSITE', async () => {
    const res = await w.post('/backend/track/init', { ...initBody(w), websiteId: 'ws_does_not_exist' });
    expect(res.status).toBe(404);
    expect((await problem(res)).code).toBe('UNKNOWN_WEBSITE');
  });

  it.each([
    ['a tempId that is not a UUID', { tempId: 'not-a-uuid' }],
    ['a visitRequestId that is not a UUID', { visitRequestId: '1234' }],
    ['an href over the limit', { href: `${ORIGIN}/${'a'.repeat(WIRE_LIMITS.url)}` }],
    ['a utm value over the limit', { utmSource: 'u'.repeat(WIRE_LIMITS.utm + 1) }],
    ['a click id over the limit', { gclid: 'g'.repeat(WIRE_LIMITS.clickId + 1) }],
    ['a number where a string belongs', { fbc: 12 }],
    ['a relative href', { href: '/landing' }],
    ['an href that is not http(s)', { href: 'javascript:alert(1)' }],
  ])('%s → 400 VALIDATION_FAILED', async (_, patch) => {
    const body = { ...initBody(w), ...patch };
    const res = await w.post('/backend/track/init', body);
    expect(res.status).toBe(400);
    expect((await problem(res)).code).toBe('VALIDATION_FAILED');
    expect(await w.count('visits WHERE temp_id::text = $1', [String(body.tempId)])).toBe(0);
  });

  it('malformed JSON, a JSON array and an empty body → 400', async () => {
    for (const raw of ['{"websiteId":', '[]', '']) {
      const res = await w.post('/backend/track/init', raw);
      expect(res.status).toBe(400);
      expect((await problem(res)).code).toBe('VALIDATION_FAILED');
    }
  });

  it('unicode within the limits is stored as sent', async () => {
    const id = await init(
      initBody(w, { utmCampaign: 'Été 🌞 kampanya', referrer: 'https://пример.example.com/' }),
    );
    const { rows } = await w.db.pool.query('SELECT utm_campaign, referrer FROM visits WHERE id = $1', [id]);
    expect(rows[0]).toEqual({ utm_campaign: 'Été 🌞 kampanya', referrer: 'https://пример.example.com/' });
  });
});

describe('track/update-fbp', () => {
  it("patches the browser's latest visit, never overwriting an fbp", async () => {
    const body = initBody(w);
    const older = await init(body);
    const latest = await init(body);
    const patch = (fbp: string) =>
      w.post('/backend/track/update-fbp', { websiteId: w.websiteId, tempId: body.tempId, fbp });
    const res = await patch('fb.1.1763776500000.111');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ updated: true });
    expect((await visit(latest)).fbp).toBe('fb.1.1763776500000.111');
    expect((await visit(older)).fbp).toBeNull();

    const again = await patch('fb.1.1763776599999.222');
    expect(await again.json()).toEqual({ updated: false });
    expect((await visit(latest)).fbp).toBe('fb.1.1763776500000.111');
  });

  it('a visit that came with an fbp keeps it', async () => {
    const body = initBody(w, { fbp: 'fb.1.1.original' });
    const id = await init(body);
    const res = await w.post('/backend/track/update-fbp', {
      websiteId: w.websiteId,
      tempId: body.tempId,
      fbp: 'fb.1.2.other',
    });
    expect(await res.json()).toEqual({ updated: false });
    expect((await visit(id)).fbp).toBe('fb.1.1.original');
  });

  it('a browser without visits → updated false; another site cannot patch it', async () => {
    const body = initBody(w);
    const id = await init(body);
    const unknown = await w.post('/backend/track/update-fbp', {
      websiteId: w.websiteId,
      tempId: randomUUID(),
      fbp: 'fb.1.1.x',
    });
    expect(await unknown.json()).toEqual({ updated: false });
    const cross = await w.post(
      '/backend/track/update-fbp',
      { websiteId: w.otherWebsiteId, tempId: body.tempId, fbp: 'fb.1.1.x' },
      { origin: 'https://other.test' },
    );
    expect(await cross.json()).toEqual({ updated: false });
    expect((await visit(id)).fbp).toBeNull();
  });

  it('validates its body and its origin', async () => {
    const empty = await w.post('/backend/track/update-fbp', {
      websiteId: w.websiteId,
      tempId: randomUUID(),
      fbp: '',
    });
    expect(empty.status).toBe(400);
    const foreign = await w.post(
      '/backend/track/update-fbp',
      { websiteId: w.websiteId, tempId: randomUUID(), fbp: 'fb.1.1.x' },
      { origin: 'https://evil-example.com' },
    );
    expect(foreign.status).toBe(403);
    expect((await problem(foreign)).code).toBe('DOMAIN_NOT_ALLOWED');
  });
});
