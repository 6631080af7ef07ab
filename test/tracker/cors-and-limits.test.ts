import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../backend/config.js';
import { rateLimitSettings } from '../../backend/domain/rate-limits.js';
import { startTestApp, type TestApp } from '../harness/app.js';
import { clientIp, initBody, ORIGIN, problem, startWorld, type World } from './world.js';

let w: World;
let second: TestApp;
beforeAll(async () => {
  w = await startWorld();
  // Another backend process on the same database.
  second = await startTestApp(w.db.pool, { env: { ...w.fakes.env } });
});
afterAll(async () => {
  await second.stop();
  await w.close();
});

describe('CORS', () => {
  const preflight = (origin: string) =>
    fetch(`${w.app.url}/backend/track/init`, {
      method: 'OPTIONS',
      headers: {
        origin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });

  it("answers a preflight from a site's origin, subdomains included", async () => {
    for (const origin of [ORIGIN, 'https://example.com', 'http://a.b.example.com:8080']) {
      const res = await preflight(origin);
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe(origin);
      expect(res.headers.get('access-control-allow-methods')).toContain('POST');
      expect(res.headers.get('access-control-allow-headers')).toMatch(/content-type/i);
      expect(res.headers.get('access-control-allow-credentials')).toBeNull();
      expect(res.headers.get('vary')).toMatch(/Origin/);
    }
  });

  it('gives an unknown or look-alike origin no CORS headers', async () => {
    for (const origin of ['https://evil-example.com', 'https://example.com.evil.net', 'null']) {
      const res = await preflight(origin);
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
      expect(res.headers.get('access-control-allow-methods')).toBeNull();
    }
  });

  it('reflects the allowed Origin on answers, errors after the domain check included', async () => {
    const ok = await w.post('/backend/track/init', initBody(w));
    expect(ok.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(ok.headers.get('vary')).toMatch(/Origin/);
    const body = initBody(w, { visitRequestId: randomUUID() });
    await w.post('/backend/track/init', body);
    const conflict = await w.post('/backend/track/init', { ...body, tempId: randomUUID() });
    expect(conflict.status).toBe(409);
    expect(conflict.headers.get('access-control-allow-origin')).toBe(ORIGIN);
  });

  it("does not answer another site's origin, nor a rejected one", async () => {
    const foreign = await w.post(
      '/backend/track/init',
      { ...initBody(w), href: 'https://other.test/' },
      { origin: 'https://other.test' },
    );
    expect(foreign.status).toBe(403);
    expect(foreign.headers.get('access-control-allow-origin')).toBeNull();
    const evil = await w.post('/backend/track/init', initBody(w), { origin: 'https://evil-example.com' });
    expect((await problem(evil)).code).toBe('DOMAIN_NOT_ALLOWED');
    expect(evil.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('rate limits', () => {
  const settings = rateLimitSettings(loadConfig({}));
  const budget = settings.perMinute.init + settings.burstPerTenMinutes;

  it('hold across two backend processes: per (site, IP), then 429 RATE_LIMITED with Retry-After', async () => {
    const ip = clientIp();
    const send = (app: { url: string }, extra: Record<string, string> = {}) =>
      fetch(`${app.url}/backend/track/init`, {
        method: 'POST',
        headers: { origin: ORIGIN, 'x-capigram-client-ip': ip, ...extra },
        body: JSON.stringify(initBody(w)),
      });
    for (let sent = 0; sent < budget; sent += 10) {
      const batch = await Promise.all(
        Array.from({ length: 10 }, (_, i) => send(i % 2 === 0 ? w.app : second)),
      );
      expect(batch.map((r) => r.status)).toEqual(Array(10).fill(200));
    }
    for (const app of [w.app, second]) {
      const limited = await send(app);
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(limited.headers.get('retry-after'))).toBeLessThanOrEqual(60);
      expect(limited.headers.get('access-control-allow-origin')).toBe(ORIGIN);
      expect((await problem(limited)).code).toBe('RATE_LIMITED');
    }
    // Another address, and the same address on another site, have budgets of their own.
    expect(
      (
        await fetch(`${second.url}/backend/track/init`, {
          method: 'POST',
          headers: { origin: ORIGIN, 'x-capigram-client-ip': clientIp() },
          body: JSON.stringify(initBody(w)),
        })
      ).status,
    ).toBe(200);
    const otherSite = await fetch(`${w.app.url}/backend/track/init`, {
      method: 'POST',
      headers: { origin: 'https://other.test', 'x-capigram-client-ip': ip },
      body: JSON.stringify({ ...initBody(w), websiteId: w.otherWebsiteId, href: 'https://other.test/' }),
    });
    expect(otherSite.status).toBe(200);
    // A rejected request writes nothing.
    expect(await w.count('visits WHERE client_ip = $1 AND site_id = $2', [ip, w.siteId])).toBe(budget);
  });

  it('count an IPv6 client by its /64: fresh addresses of one host share one budget', async () => {
    const prefix = `2001:db8:${Math.floor(Math.random() * 0xffff).toString(16)}:7`;
    const body = initBody(w);
    const click = (n: number) =>
      w.get(
        `/backend/track/invite?website=${w.websiteId}&tid=${body.tempId}&sid=${body.sessionId}&channel=${randomUUID()}`,
        {
          'x-capigram-client-ip': `${prefix}::${(n + 1).toString(16)}`,
        },
      );
    const inviteBudget = settings.perMinute.invite + settings.burstPerTenMinutes;
    for (let i = 0; i < inviteBudget; i++) expect((await click(i)).status).toBe(404);
    expect((await click(inviteBudget)).status).toBe(429);
    // Another /64 has a budget of its own.
    const other = await w.get(
      `/backend/track/invite?website=${w.websiteId}&tid=${body.tempId}&sid=${body.sessionId}&channel=${randomUUID()}`,
      {
        'x-capigram-client-ip': `2001:db8:ffff:8::1`,
      },
    );
    expect(other.status).toBe(404);
  });

  it('invite clicks have their own, smaller budget', async () => {
    const ip = clientIp();
    const body = initBody(w);
    const click = () =>
      w.get(
        `/backend/track/invite?website=${w.websiteId}&tid=${body.tempId}&sid=${body.sessionId}&channel=${randomUUID()}`,
        {
          'x-capigram-client-ip': ip,
        },
      );
    const inviteBudget = settings.perMinute.invite + settings.burstPerTenMinutes;
    const statuses = [];
    for (let i = 0; i < inviteBudget; i++) statuses.push((await click()).status);
    expect(new Set(statuses)).toEqual(new Set([404]));
    expect((await click()).status).toBe(429);
  });
});
