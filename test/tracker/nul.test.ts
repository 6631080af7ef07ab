// PostgreSQL's text cannot hold U+0000. A NUL in any keyless input is refused at the edge with a
// 400 (or, where a visitor is on their way to Telegram, dropped from the visit), never a 500, and
// never half written.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initBody, ORIGIN, problem, startWorld, type World } from './world.js';

let w: World;
beforeAll(async () => {
  w = await startWorld();
});
afterAll(async () => {
  await w.close();
});

const NUL = '\u0000';

describe('a NUL in keyless input', () => {
  it.each([
    ['utmSource', { utmSource: `a${NUL}b` }],
    ['userAgent', { userAgent: `UA${NUL}` }],
    ['href', { href: `${ORIGIN}/x${NUL}` }],
    ['fbc', { fbc: `fb.1.1.${NUL}` }],
  ])('track/init with one in %s → 400 VALIDATION_FAILED naming the field, no visit', async (field, extra) => {
    const body = initBody(w, { visitRequestId: randomUUID(), ...extra });
    const res = await w.post('/backend/track/init', body);
    expect(res.status).toBe(400);
    const p = (await problem(res)) as { code: string; errors?: Array<{ path: string; message: string }> };
    expect(p.code).toBe('VALIDATION_FAILED');
    expect(p.errors?.map((e) => e.path)).toContain(field);
    expect(await w.count('visits WHERE temp_id = $1', [body.tempId])).toBe(0);
  });

  it('in the websiteId of track/init, update-fbp and direct-invite → 400, nothing written', async () => {
    const tempId = randomUUID();
    const sessionId = randomUUID();
    const websiteId = `${w.websiteId}${NUL}`;
    for (const [path, body] of [
      ['/backend/track/init', { websiteId, tempId, sessionId }],
      ['/backend/track/update-fbp', { websiteId, tempId, fbp: 'fb.1.1.1' }],
      ['/backend/track/direct-invite', { websiteId, tempId, sessionId, visitRequestId: randomUUID() }],
    ] as const) {
      const res = await w.post(path, body);
      expect(res.status, path).toBe(400);
      expect((await problem(res)).code).toBe('VALIDATION_FAILED');
    }
    expect(await w.count('visits WHERE temp_id = $1', [tempId])).toBe(0);
  });

  it('in the fbp of update-fbp, or a field of direct-invite → 400, no visit and no invitation', async () => {
    const fbp = await w.post('/backend/track/update-fbp', {
      websiteId: w.websiteId,
      tempId: randomUUID(),
      fbp: `fb.1.${NUL}`,
    });
    expect(fbp.status).toBe(400);
    const body = initBody(w, { visitRequestId: randomUUID(), utmTerm: NUL });
    const invite = await w.post('/backend/track/direct-invite', body);
    expect(invite.status).toBe(400);
    expect((await problem(invite)).code).toBe('VALIDATION_FAILED');
    expect(await w.count('visits WHERE temp_id = $1', [body.tempId])).toBe(0);
    expect(
      await w.count('invitations i JOIN visits v ON v.id = i.visit_id WHERE v.temp_id = $1', [body.tempId]),
    ).toBe(0);
  });

  it('in the track/invite query (%00) → 400 VALIDATION_FAILED', async () => {
    const q = `tid=${randomUUID()}&sid=${randomUUID()}`;
    for (const query of [
      `website=${encodeURIComponent(w.websiteId)}%00&${q}`,
      `website=${w.websiteId}&${q}&channel=x%00`,
    ]) {
      const res = await w.get(`/backend/track/invite?${query}`, { referer: `${ORIGIN}/` });
      expect(res.status, query).toBe(400);
      expect((await problem(res)).code).toBe('VALIDATION_FAILED');
    }
  });

  it('in the site of /r/ → 404 UNKNOWN_WEBSITE', async () => {
    const res = await w.get(`/r/${w.websiteId}%00/${w.channels.main}`);
    expect(res.status).toBe(404);
    expect((await problem(res)).code).toBe('UNKNOWN_WEBSITE');
  });

  it('in a UTM parameter of /r/ → the visitor still gets the link; the field is dropped, the rest kept', async () => {
    const tempId = randomUUID();
    const res = await w.get(
      `/r/${w.websiteId}/${w.channels.main}?utm_source=ad%00s&utm_medium=cpc&gclid=g%00`,
      {
        cookie: `capigram_tid=${tempId}; capigram_sid=${randomUUID()}`,
      },
    );
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toMatch(/^https:\/\/t\.me\//);
    const rows = await w.db.pool.query<{
      utm_source: string | null;
      utm_medium: string | null;
      gclid: string | null;
    }>('SELECT utm_source, utm_medium, gclid FROM visits WHERE temp_id = $1', [tempId]);
    expect(rows.rows).toEqual([{ utm_source: null, utm_medium: 'cpc', gclid: null }]);
  });
});
