// Install checks: a site says "waiting for the first visit" until track/init records one, then its
// first and latest visit; requests refused for their page's domain are counted per host. Both are
// kept off the hot path: no write per visit (the latest visit is written at most once a minute per
// process), refused hosts at most 20 per site.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listSites } from '../../backend/domain/admin/sites.js';
import { createInstallSignals } from '../../backend/domain/tracker/install-signals.js';
import { createLogger } from '../../backend/log.js';
import { TEST_ADMIN_TOKEN } from '../harness/app.js';
import { initBody, startWorld, type World } from './world.js';

let w: World;
beforeAll(async () => {
  w = await startWorld();
});
afterAll(async () => {
  await w.close();
});

const dashboardSite = async (siteId: string) =>
  (
    await fetch(`${w.app.url}/dashboard/sites/${siteId}`, {
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    })
  ).text();
const seen = async () =>
  (
    await w.db.pool.query('SELECT first_visit_at, last_visit_at FROM site_visits_seen WHERE site_id = $1', [
      w.siteId,
    ])
  ).rows[0];
const until = async <T>(read: () => Promise<T | undefined>): Promise<T> => {
  for (let i = 0; i < 100; i++) {
    const v = await read();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('never recorded');
};

describe('visits seen', () => {
  it('waits for the first visit, then shows the first and latest; later visits within a minute write nothing', async () => {
    expect(await dashboardSite(w.siteId)).toContain('Waiting for the first visit');
    expect((await listSites(w.db.pool)).sites.find((s) => s.siteId === w.siteId)).toMatchObject({
      firstVisitAt: null,
      lastVisitAt: null,
      refusedHosts: [],
    });

    const at = new Date('2026-11-25T10:00:00Z');
    w.app.deps.clock.set(at);
    expect((await w.post('/backend/track/init', initBody(w))).status).toBe(200);
    const first = await until(seen);
    expect(first).toEqual({ first_visit_at: at, last_visit_at: at });

    // Five more visits, seconds later: the row is not written again (no write per visit).
    w.app.deps.clock.advance(5_000);
    for (let i = 0; i < 5; i++) expect((await w.post('/backend/track/init', initBody(w))).status).toBe(200);
    await new Promise((r) => setTimeout(r, 100));
    expect(await seen()).toEqual({ first_visit_at: at, last_visit_at: at });
    w.app.deps.clock.real();

    const page = await dashboardSite(w.siteId);
    expect(page).not.toContain('Waiting for the first visit');
    expect(page).toContain('Visits arrive</span>: first 2026-11-25 10:00:00');
    expect((await listSites(w.db.pool)).sites.find((s) => s.siteId === w.siteId)).toMatchObject({
      firstVisitAt: at.toISOString(),
      lastVisitAt: at.toISOString(),
    });
  });
});

describe('hosts refused', () => {
  it('a page on a domain the site does not list is refused and its host is recorded for the site', async () => {
    const res = await w.post(
      '/backend/track/init',
      { ...initBody(w), href: 'https://shop.example.com/landing' },
      { origin: 'https://www.acme-typo.net' },
    );
    expect(res.status).toBe(403);
    const row = await until(
      async () =>
        (await w.db.pool.query('SELECT host, refused FROM site_refused_hosts WHERE site_id = $1', [w.siteId]))
          .rows[0],
    );
    expect(row).toEqual({ host: 'www.acme-typo.net', refused: 1 });
    expect((await listSites(w.db.pool)).sites.find((s) => s.siteId === w.siteId)!.refusedHosts).toEqual([
      expect.objectContaining({ host: 'www.acme-typo.net', refused: 1 }),
    ]);
    const page = await dashboardSite(w.siteId);
    expect(page).toContain('Requests from pages on other domains were refused');
    expect(page).toContain('<code>www.acme-typo.net</code>');
    // The overview flags it too.
    const overview = await (
      await fetch(`${w.app.url}/dashboard`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } })
    ).text();
    expect(overview).toContain('refused: www.acme-typo.net');
  });

  it('refusals are counted in memory and written once per interval; at most 20 hosts per site are kept', async () => {
    const { rows } = await w.db.pool.query<{ id: string }>('SELECT id FROM sites WHERE website_id = $1', [
      w.otherWebsiteId,
    ]);
    const siteId = rows[0]!.id;
    const signals = createInstallSignals(w.db.pool, createLogger('silent'), { intervalMs: 60_000 });
    for (let i = 0; i < 3; i++) signals.domainRefused(siteId, 'same.example.org', new Date());
    await signals.flush();
    expect(
      (
        await w.db.pool.query('SELECT refused FROM site_refused_hosts WHERE site_id = $1 AND host = $2', [
          siteId,
          'same.example.org',
        ])
      ).rows[0].refused,
    ).toBe(3);
    for (let i = 0; i < 30; i++)
      signals.domainRefused(siteId, `made-up-${i}-${randomUUID().slice(0, 8)}.example`, new Date());
    await signals.flush();
    expect(
      Number(
        (await w.db.pool.query('SELECT count(*) FROM site_refused_hosts WHERE site_id = $1', [siteId]))
          .rows[0].count,
      ),
    ).toBe(20);
    // A host already kept still counts.
    signals.domainRefused(siteId, 'same.example.org', new Date());
    await signals.flush();
    expect(
      (
        await w.db.pool.query('SELECT refused FROM site_refused_hosts WHERE site_id = $1 AND host = $2', [
          siteId,
          'same.example.org',
        ])
      ).rows[0].refused,
    ).toBe(4);
  });
});
