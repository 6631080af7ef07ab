/**
 * The clicks a visitor waits on: `GET <invitePath>` answered with a 302 to the invite link
 * `track/invite` hands out, `GET <entryPath>` to the bot deep link `track/entry` hands out; else
 * to the fallback URL, else a plain page. Never an error page.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendInviteLater, sendRedirect } from './pages.js';
import type { ProxyContext } from './proxy-context.js';
import type { RequestView } from './request-view.js';
import { onResponseHead } from './response-head.js';
import type { TrackerCallContext, Urgent } from './tracker-client.js';
import { attributionOf, initBody, readVisitor, visitorCookies, type Visitor } from './visitor.js';

type ClickConsent = 'granted' | 'denied' | undefined;

/** Asks the tracker for the click's link, for these ids and context, within `urgent`. */
type AskForLink = (
  visitor: Pick<Visitor, 'tempId' | 'sessionId'>,
  context: TrackerCallContext,
  urgent: Urgent,
  consent: ClickConsent,
) => Promise<string | undefined>;

export type ClickHandler = (req: IncomingMessage, res: ServerResponse, view: RequestView) => Promise<void>;

export interface Clicks {
  invite: ClickHandler;
  entry: ClickHandler;
  /** What a click whose handling failed still gets: the fallback, or the plain page. */
  fallback(res: ServerResponse): void;
}

export function createClicks(ctx: ProxyContext): Clicks {
  const { settings, tracker } = ctx;

  function fallback(res: ServerResponse): void {
    if (settings.fallbackUrl !== undefined) sendRedirect(res, settings.fallbackUrl);
    else sendInviteLater(res);
  }

  function answer(res: ServerResponse, location: string | undefined): void {
    if (res.destroyed) return;
    if (location !== undefined) sendRedirect(res, location);
    else fallback(res);
  }

  /** The browser's ids as cookies, a visit recorded first when the session has none, then `ask`. */
  async function handle(req: IncomingMessage, res: ServerResponse, view: RequestView, ask: AskForLink) {
    // One budget for everything the visitor waits on, whatever it takes.
    const urgent = { deadline: performance.now() + settings.inviteTimeoutMs };
    const consent = ctx.consentOf(req);
    if (consent === 'denied') {
      // The click still leads to the channel, through a link of a visit of its own that keeps
      // nothing of the visitor (its join is organic): no cookie, no id of the browser, no IP.
      const ids = { tempId: randomUUID(), sessionId: randomUUID() };
      answer(res, await ask(ids, ctx.anonymousContext(view), urgent, 'denied'));
      return;
    }
    const nowMs = ctx.now();
    const visitor = readVisitor(req.headers.cookie, view.search, nowMs);
    const referrer = req.headers.referer;
    const context = { ...ctx.contextOf(view), referrer };
    onResponseHead(res, visitorCookies(visitor, nowMs, ctx.scopeOf(view)), undefined);
    if (visitor.tempIdIsNew || visitor.sessionIdIsNew) {
      // No visit for this session yet (a shared link, or 30 idle minutes on the page): record one
      // first, so the click has a visit to belong to. The only tracker call a visitor waits for.
      const body = initBody(settings.websiteId, visitor, attributionOf(view, referrer, visitor));
      if (consent === 'granted') body.consent = 'granted';
      await tracker.init(body, context, urgent);
    } else {
      void ctx.patchFbp(visitor, view);
    }
    answer(res, await ask(visitor, context, urgent, consent === 'granted' ? 'granted' : undefined));
  }

  /** `GET <entryPath>[?entry=ID]`: to the bot (or its Mini App) with a fresh payload. */
  const entry: ClickHandler = (req, res, view) => {
    const requested = new URLSearchParams(view.search).get('entry');
    return handle(req, res, view, (visitor, context, urgent, consent) =>
      tracker.entry(
        {
          website: settings.websiteId,
          tid: visitor.tempId,
          sid: visitor.sessionId,
          ...(requested ? { entry: requested } : {}),
          ...(consent === undefined ? {} : { consent }),
        },
        context,
        urgent,
      ),
    );
  };

  const invite: ClickHandler = (req, res, view) => {
    // A channel the link names is asked for as it is, even one the tracker will refuse (then the
    // visitor gets the fallback): silently swapping in the default would send them elsewhere.
    const requested = new URLSearchParams(view.search).get('channel');
    const channel = requested !== null && requested !== '' ? requested : settings.channel;
    return handle(req, res, view, (visitor, context, urgent, consent) =>
      tracker.invite(
        {
          website: settings.websiteId,
          tid: visitor.tempId,
          sid: visitor.sessionId,
          ...(channel === undefined ? {} : { channel }),
          ...(consent === undefined ? {} : { consent }),
        },
        context,
        urgent,
      ),
    );
  };

  return { invite, entry, fallback };
}
