import type { Context, Hono } from 'hono';
import type { z } from 'zod';
import { WIRE_LIMITS, type Consent } from '../../../shared/tracker-wire.js';
import type { Deps } from '../../deps.js';
import { isConsented } from '../../domain/tracker/consent.js';
import type { VisitAdmission, VisitAttribution } from '../../domain/tracker/visits.js';
import { readQuery } from '../json.js';
import { userAgentOf } from './browser-context.js';
import type { KeylessEnv } from './env.js';
import { isLinkLookup } from './link-preview.js';
import { linkLookupAnswer, redirect } from './responses.js';
import type { TrackerSurface } from './surface.js';

/** The query every click (invite or entry) carries. */
export interface ClickQuery {
  website: string;
  tid: string;
  sid: string;
  consent?: Consent | undefined;
  format?: 'json' | undefined;
}

/** What a click is recorded with: its site, its browser's ids and what it tells of its visitor. */
export interface ClickInput {
  siteId: string;
  tempId: string;
  sessionId: string;
  click: VisitAttribution;
  /** The click's rate-limit count, for a kind that makes it in its own statement (`countsOwnLimit`). */
  admission: VisitAdmission;
}

/** What sets one click (`track/invite`, `track/entry`) apart from the other. */
export interface ClickKind<S extends z.ZodType<ClickQuery>> {
  path: string;
  query: S;
  /**
   * True: `record` counts the rate limit itself, through `input.admission`, in the statement that
   * records the click (a refused click throws RATE_LIMITED and writes nothing but its count);
   * otherwise the limit is counted before `record` is called.
   */
  countsOwnLimit?: boolean;
  /** Records the click; the visit and where the visitor goes. */
  record(deps: Deps, input: ClickInput, query: z.infer<S>): Promise<{ visitId: string; url: string }>;
  /** The 200 answer to `format=json` (tracker.js). */
  json(outcome: { visitId: string; url: string }): Record<string, string>;
  /** What a failed click answers: a browser navigation is sent on; anything else rethrows `err`. */
  fallback(c: Context<KeylessEnv>, err: unknown, siteId: string | undefined): Promise<Response>;
}

/**
 * A click on a join link the tracker rewrote (`track/invite`, `track/entry`): the site and its
 * domains checked, a link lookup answered without spending anything, the rate limit (counted
 * before, or by the click's own statement), then the click recorded and the visitor sent on (302, or JSON for tracker.js so that it can send the
 * visitor to the link's own href instead whenever Capigram answers anything else, or not in time).
 */
export function registerClick<S extends z.ZodType<ClickQuery>>(
  keyless: Hono<KeylessEnv>,
  s: TrackerSurface,
  kind: ClickKind<S>,
): void {
  keyless.get(kind.path, async (c) => {
    let siteId: string | undefined;
    try {
      const query = readQuery(c, kind.query);
      const site = await s.siteFor(query.website);
      siteId = site.id;
      s.admit(c, site);
      const browser = c.get('browser');
      if (isLinkLookup(c.req.method, userAgentOf(browser, undefined))) return linkLookupAnswer(c);
      if (kind.countsOwnLimit !== true) await s.limiter.consume('invite', site.id, browser.ip);
      const outcome = await kind.record(
        s.deps,
        {
          siteId: site.id,
          admission: s.limiter.visitAdmission('invite', site.id, browser.ip),
          ...clickIds(query.tid, query.sid, query.consent),
          click: clickAttribution(
            c.req.header('referer'),
            browser,
            isConsented(query.consent, site.consentMode),
          ),
        },
        query,
      );
      if (query.format === 'json') return c.json(kind.json(outcome));
      return redirect(c, outcome.url);
    } catch (err) {
      return kind.fallback(c, err, siteId);
    }
  });
}

/**
 * The ids a click is looked up by: its browser's and session's, or, for a click that says it has
 * no consent, fresh ones (the cookies' values are not used), so it gets a visit of its own.
 */
function clickIds(
  tid: string,
  sid: string,
  consent: Consent | undefined,
): { tempId: string; sessionId: string } {
  return consent === 'denied'
    ? { tempId: crypto.randomUUID(), sessionId: crypto.randomUUID() }
    : { tempId: tid, sessionId: sid };
}

/**
 * What a click tells of its visitor: the page it came from, its IP and User-Agent. Its consent
 * is that of the visit it records when no visit of its browser is found (what the click says,
 * else the site's mode); a visit that is found keeps the consent it was recorded with.
 */
function clickAttribution(
  referer: string | undefined,
  browser: KeylessEnv['Variables']['browser'],
  consented: boolean,
): VisitAttribution {
  return {
    consented,
    href: referer === undefined || referer.length > WIRE_LIMITS.url ? undefined : referer,
    clientIp: browser.ip,
    userAgent: userAgentOf(browser, undefined),
  };
}
