import type { Pool } from '../../db/pool.js';
import type { Logger } from '../../log.js';

/**
 * Install checks, recorded off the tracker's hot path: when a site's visits were first and last
 * seen, and which page hosts its requests were refused for. A visit costs nothing here but a look
 * at a map: the first visit of a site in a process is written at once (so "waiting for the first
 * visit" ends with it) and later ones at most once per `intervalMs`, to a table of their own,
 * never the site row. Refusals are counted in memory and written per (site, host) at most once per
 * `intervalMs`, one at a time; the table keeps at most 20 hosts per site (a few more at worst when
 * several processes add hosts at the same instant). Counts are a lower bound: a process
 * that stops drops what it had not written yet.
 */
export interface InstallSignals {
  visitSeen(siteId: string, at: Date): void;
  domainRefused(siteId: string, host: string, at: Date): void;
  /** Writes what is pending now (tests, shutdown). */
  flush(): Promise<void>;
}

const MAX_TRACKED = 10_000;
const MAX_HOST = 253;

export function createInstallSignals(
  pool: Pool,
  log: Logger,
  opts: { intervalMs?: number } = {},
): InstallSignals {
  const intervalMs = opts.intervalMs ?? 60_000;
  const visitWritten = new Map<string, number>();
  const refusals = new Map<
    string,
    {
      siteId: string;
      host: string;
      count: number;
      firstAt: Date;
      lastAt: Date;
      writtenAt: number;
      timer?: NodeJS.Timeout;
    }
  >();
  const inFlight = new Set<Promise<unknown>>();
  let refusalQueue: Promise<unknown> = Promise.resolve();
  const track = (p: Promise<unknown>) => {
    const q = p
      .catch((err: unknown) => log.warn({ err: String(err) }, 'install check not recorded'))
      .finally(() => inFlight.delete(q));
    inFlight.add(q);
  };

  function writeRefusals(key: string): void {
    const r = refusals.get(key);
    if (!r || r.count === 0) return;
    const { siteId, host, count, firstAt, lastAt } = r;
    r.count = 0;
    r.writtenAt = Date.now();
    clearTimeout(r.timer);
    r.timer = undefined;
    // One refusal write at a time per process: the 20-host bound is checked by each statement, and
    // concurrent ones would each see room for one more.
    refusalQueue = refusalQueue
      .then(() =>
        pool.query(
          `INSERT INTO site_refused_hosts (site_id, host, refused, first_at, last_at)
         SELECT $1, $2, $3, $4, $5
          WHERE EXISTS (SELECT 1 FROM site_refused_hosts WHERE site_id = $1 AND host = $2)
             OR (SELECT count(*) FROM site_refused_hosts WHERE site_id = $1) < 20
         ON CONFLICT (site_id, host) DO UPDATE
           SET refused = site_refused_hosts.refused + EXCLUDED.refused, last_at = greatest(site_refused_hosts.last_at, EXCLUDED.last_at)`,
          [siteId, host, count, firstAt, lastAt],
        ),
      )
      .catch((err: unknown) => log.warn({ err: String(err) }, 'install check not recorded'));
    track(refusalQueue);
  }

  return {
    visitSeen(siteId, at) {
      const now = Date.now();
      const last = visitWritten.get(siteId);
      if (last !== undefined && now - last < intervalMs) return;
      if (visitWritten.size >= MAX_TRACKED) visitWritten.clear();
      visitWritten.set(siteId, now);
      track(
        pool.query(
          `INSERT INTO site_visits_seen (site_id, first_visit_at, last_visit_at) VALUES ($1, $2, $2)
           ON CONFLICT (site_id) DO UPDATE SET last_visit_at = greatest(site_visits_seen.last_visit_at, EXCLUDED.last_visit_at)`,
          [siteId, at],
        ),
      );
    },

    domainRefused(siteId, rawHost, at) {
      const host = rawHost.slice(0, MAX_HOST);
      if (host === '') return;
      const key = `${siteId}\n${host}`;
      let r = refusals.get(key);
      if (!r) {
        // Made-up hosts must not grow the map without end: past the bound, refusals go uncounted.
        if (refusals.size >= MAX_TRACKED) return;
        r = { siteId, host, count: 0, firstAt: at, lastAt: at, writtenAt: 0 };
        refusals.set(key, r);
      }
      if (r.count === 0) r.firstAt = at;
      r.count++;
      r.lastAt = at;
      const wait = r.writtenAt + intervalMs - Date.now();
      if (wait <= 0) writeRefusals(key);
      else if (!r.timer) {
        r.timer = setTimeout(() => writeRefusals(key), wait);
        r.timer.unref();
      }
    },

    async flush() {
      for (const key of refusals.keys()) writeRefusals(key);
      await Promise.all([...inFlight]);
    },
  };
}

export interface SiteInstallState {
  firstVisitAt: string | null;
  lastVisitAt: string | null;
  refusedHosts: { host: string; refused: number; firstAt: string; lastAt: string }[];
}

/** The install checks of some sites, by site id (sites with nothing recorded are absent). */
export async function installStates(
  db: Pick<Pool, 'query'>,
  siteIds: string[],
): Promise<Map<string, SiteInstallState>> {
  const out = new Map<string, SiteInstallState>();
  if (siteIds.length === 0) return out;
  const state = (id: string) =>
    out.get(id) ?? out.set(id, { firstVisitAt: null, lastVisitAt: null, refusedHosts: [] }).get(id)!;
  const [seen, refused] = await Promise.all([
    db.query<{ site_id: string; first_visit_at: Date; last_visit_at: Date }>(
      'SELECT site_id, first_visit_at, last_visit_at FROM site_visits_seen WHERE site_id = ANY($1::uuid[])',
      [siteIds],
    ),
    db.query<{ site_id: string; host: string; refused: string; first_at: Date; last_at: Date }>(
      'SELECT site_id, host, refused::text, first_at, last_at FROM site_refused_hosts WHERE site_id = ANY($1::uuid[]) ORDER BY last_at DESC',
      [siteIds],
    ),
  ]);
  for (const r of seen.rows)
    Object.assign(state(r.site_id), {
      firstVisitAt: r.first_visit_at.toISOString(),
      lastVisitAt: r.last_visit_at.toISOString(),
    });
  for (const r of refused.rows)
    state(r.site_id).refusedHosts.push({
      host: r.host,
      refused: Number(r.refused),
      firstAt: r.first_at.toISOString(),
      lastAt: r.last_at.toISOString(),
    });
  return out;
}
