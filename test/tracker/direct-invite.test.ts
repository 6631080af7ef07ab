import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refillChannelPool } from '../../backend/domain/invites/refill.js';
import { initBody, problem, startWorld, type World } from './world.js';

let w: World;
beforeAll(async () => {
  w = await startWorld({ poolTarget: 10 });
  await refillChannelPool(w.app.deps, w.channels.main);
  await refillChannelPool(w.app.deps, w.channels.requests);
});
afterAll(async () => {
  await w.close();
});

function directBody(extra: Record<string, unknown> = {}) {
  return { ...initBody(w), visitRequestId: randomUUID(), ...extra };
}

async function direct(
  body: unknown,
  headers?: Record<string, string>,
): Promise<{ visitId: string; inviteUrl: string }> {
  const res = await w.post('/backend/track/direct-invite', body, headers);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as { visitId: string; inviteUrl: string };
}

describe('track/direct-invite', () => {
  it('repeated calls with one UUID: one visit, one PageView send, one invitation; later calls only enrich', async () => {
    const body = directBody({ fbc: 'fb.1.1.FIRST' });
    const first = await direct(body);
    expect(first.inviteUrl).toMatch(/^https:\/\/t\.me\/\+/);
    const again = await direct({
      ...body,
      fbc: 'fb.1.2.SECOND',
      gclid: 'G-late',
      utmCampaign: 'late',
      channelId: w.channels.requests,
    });
    expect(again).toEqual(first);
    expect(await w.count('visits WHERE visit_request_id = $1', [body.visitRequestId])).toBe(1);
    expect(await w.count('sends WHERE visit_id = $1', [first.visitId])).toBe(1);
    expect(await w.count('invitations WHERE visit_id = $1', [first.visitId])).toBe(1);
    const { rows } = await w.db.pool.query(
      'SELECT kind, fbc, gclid, utm_campaign, channel_id FROM visits WHERE id = $1',
      [first.visitId],
    );
    // Routing (the channel) stays as the first call fixed it.
    expect(rows[0]).toEqual({
      kind: 'direct_invite',
      fbc: 'fb.1.1.FIRST',
      gclid: 'G-late',
      utm_campaign: 'late',
      channel_id: w.channels.main,
    });
  });

  it('concurrent duplicates still make one visit and one invitation', async () => {
    const body = directBody();
    const results = await Promise.all(Array.from({ length: 6 }, () => direct(body)));
    expect(new Set(results.map((r) => `${r.visitId} ${r.inviteUrl}`)).size).toBe(1);
    expect(await w.count('invitations WHERE visit_id = $1', [results[0]!.visitId])).toBe(1);
    expect(await w.count('sends WHERE visit_id = $1', [results[0]!.visitId])).toBe(1);
  });

  it('a new UUID is a new click: another visit and another link', async () => {
    const body = directBody();
    const a = await direct(body);
    const b = await direct({ ...body, visitRequestId: randomUUID() });
    expect(b.visitId).not.toBe(a.visitId);
    expect(b.inviteUrl).not.toBe(a.inviteUrl);
  });

  it('channelId picks the channel', async () => {
    const r = await direct(directBody({ channelId: w.channels.requests }));
    const { rows } = await w.db.pool.query('SELECT channel_id FROM invitations WHERE visit_id = $1', [
      r.visitId,
    ]);
    expect(rows).toEqual([{ channel_id: w.channels.requests }]);
  });

  it('changed identity → 409; differing alias → 400; missing visitRequestId → 400', async () => {
    const body = directBody();
    await direct(body);
    const changed = await w.post('/backend/track/direct-invite', { ...body, sessionId: randomUUID() });
    expect(changed.status).toBe(409);
    expect((await problem(changed)).code).toBe('VISIT_IDENTITY_MISMATCH');
    const alias = await w.post('/backend/track/direct-invite', { ...body, gatewayRequestId: randomUUID() });
    expect((await problem(alias)).code).toBe('REQUEST_ID_MISMATCH');
    const { visitRequestId: _, ...without } = body;
    const missing = await w.post('/backend/track/direct-invite', without);
    expect((await problem(missing)).code).toBe('VALIDATION_FAILED');
  });

  it('another site’s channel → 404, nothing recorded', async () => {
    const body = directBody({ channelId: w.channels.other });
    const res = await w.post('/backend/track/direct-invite', body);
    expect(res.status).toBe(404);
    expect(await w.count('visits WHERE visit_request_id = $1', [body.visitRequestId])).toBe(0);
  });
});

describe('GET /r/{siteId}/{channelId}', () => {
  function cookiesOf(res: Response): Record<string, string> {
    const out: Record<string, string> = {};
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const [name, value] = pair!.split('=');
      out[name!] = line;
      out[`${name!}=`] = value!;
    }
    return out;
  }

  it("records Google's iOS click ids from an ad click's /r/ URL", async () => {
    const res = await w.get(`/r/${w.websiteId}/${w.channels.main}?gbraid=0AAAAA-gb&wbraid=CjkK-wb`, {
      'x-capigram-client-ip': '203.0.113.51',
    });
    expect(res.status).toBe(302);
    const { rows } = await w.db.pool.query(
      'SELECT v.gclid, v.gbraid, v.wbraid FROM invitations i JOIN visits v ON v.id = i.visit_id WHERE i.invite_link = $1',
      [res.headers.get('location')],
    );
    expect(rows[0]).toEqual({ gclid: null, gbraid: '0AAAAA-gb', wbraid: 'CjkK-wb' });
  });

  it('redirects straight to a link, records the click ids and sets the browser cookies', async () => {
    const before = Date.now();
    const res = await w.get(
      `/r/${w.websiteId}/${w.channels.main}?fbclid=IwAR2F4-Ab_c&utm_source=fb&utm_campaign=Spring%20sale&gclid=G1`,
      {
        referer: 'https://l.facebook.com/',
        origin: 'https://not-the-site.example',
        'x-capigram-client-ip': '203.0.113.50',
        'x-capigram-client-user-agent': 'Mobile UA',
      },
    );
    expect(res.status).toBe(302);
    const location = res.headers.get('location')!;
    expect(location).toMatch(/^https:\/\/t\.me\/\+/);
    const cookies = cookiesOf(res);
    expect(cookies.capigram_tid).toMatch(/Max-Age=31536000; Path=\/; Expires=.*SameSite=Lax/);
    expect(cookies.capigram_sid).toMatch(/Max-Age=1800;/);
    const { rows } = await w.db.pool.query(
      `SELECT v.kind, v.fbc, v.gclid, v.utm_source, v.utm_campaign, v.referrer, v.client_ip, v.user_agent, v.temp_id, v.session_id, v.href, v.channel_id
       FROM invitations i JOIN visits v ON v.id = i.visit_id WHERE i.invite_link = $1`,
      [location],
    );
    const v = rows[0];
    expect(v).toMatchObject({
      kind: 'redirect',
      gclid: 'G1',
      utm_source: 'fb',
      utm_campaign: 'Spring sale',
      referrer: 'https://l.facebook.com/',
      client_ip: '203.0.113.50',
      user_agent: 'Mobile UA',
      temp_id: cookies['capigram_tid='],
      session_id: cookies['capigram_sid='],
      channel_id: w.channels.main,
    });
    expect(v.href).toContain('/r/');
    const [, , ms, fbclid] = /^fb\.(\d)\.(\d+)\.(.+)$/.exec(v.fbc)!;
    expect(fbclid).toBe('IwAR2F4-Ab_c');
    expect(Number(ms)).toBeGreaterThanOrEqual(before);
    expect(
      await w.count('sends WHERE visit_id = (SELECT visit_id FROM invitations WHERE invite_link = $1)', [
        location,
      ]),
    ).toBe(1);
  });

  it('accepts the internal site id too', async () => {
    const res = await w.get(`/r/${w.siteId}/${w.channels.requests}`);
    expect(res.status).toBe(302);
  });

  it('the same ad click reopened in the same session is the same visit and link; a new click is new', async () => {
    const first = await w.get(`/r/${w.websiteId}/${w.channels.main}?fbclid=SameClick`);
    const c = cookiesOf(first);
    const cookie = `capigram_tid=${c['capigram_tid=']}; capigram_sid=${c['capigram_sid=']}`;
    const again = await w.get(`/r/${w.websiteId}/${w.channels.main}?fbclid=SameClick`, { cookie });
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(cookiesOf(again)['capigram_tid=']).toBe(c['capigram_tid=']);
    const other = await w.get(`/r/${w.websiteId}/${w.channels.main}?fbclid=OtherClick`, { cookie });
    expect(other.headers.get('location')).not.toBe(first.headers.get('location'));
    expect(await w.count('visits WHERE temp_id = $1', [c['capigram_tid=']])).toBe(2);
  });

  it('unknown site → 404 UNKNOWN_WEBSITE; unknown channel → 404 NOT_FOUND', async () => {
    const site = await w.get(`/r/ws_nope/${w.channels.main}`);
    expect((await problem(site)).code).toBe('UNKNOWN_WEBSITE');
    const channel = await w.get(`/r/${w.websiteId}/${randomUUID()}`);
    expect((await problem(channel)).code).toBe('NOT_FOUND');
    const foreign = await w.get(`/r/${w.websiteId}/${w.channels.other}`);
    expect((await problem(foreign)).code).toBe('NOT_FOUND');
  });
});
