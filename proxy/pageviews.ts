/**
 * HTML navigations: the browser's ids read or created and written back as first-party cookies,
 * and, once the response head shows a page the visitor sees, `track/init` posted beside the
 * response (never before it: the page does not wait for Capigram).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TrackInitBody } from '../shared/tracker-wire.js';
import { consentlessInitBody } from './consent.js';
import type { ProxyContext } from './proxy-context.js';
import { describeError } from './proxy-context.js';
import { isPageResponse, type RequestView } from './request-view.js';
import { onResponseHead } from './response-head.js';
import type { TrackerCallContext } from './tracker-client.js';
import { attributionOf, initBody, readVisitor, visitorCookies } from './visitor.js';

/** A navigation on its way: the cookies for its answer, and the visit to post if it is a page. */
export interface Pageview {
  cookies: string[];
  body: TrackInitBody;
  view: RequestView;
  /** What goes with the call: nothing of the visitor for a visit without consent. */
  context: TrackerCallContext;
  /** The fbp patch the visit must follow, when one was sent. */
  patched: Promise<unknown> | undefined;
}

/**
 * Where a prepared pageview waits for its response head: the upstream's `proxyRes` when there is
 * an upstream (cheaper than wrapping `writeHead`), else a wrapped `writeHead`.
 */
export type HoldPageview = (res: ServerResponse, pageview: Pageview) => void;

export interface Pageviews {
  prepare(req: IncomingMessage, res: ServerResponse, view: RequestView): void;
  /** The navigation's answer is known: post the visit if it is a page the visitor sees. */
  answered(pageview: Pageview, status: number, contentType: string | undefined): void;
}

export function createPageviews(ctx: ProxyContext, hold: () => HoldPageview | undefined): Pageviews {
  const { settings, tracker, log } = ctx;

  function answered(pageview: Pageview, status: number, contentType: string | undefined): void {
    try {
      if (!isPageResponse(status, contentType)) return;
      const { body, context, patched } = pageview;
      // Without a patch to wait for (nearly always), no promise hop before the call.
      if (patched === undefined) void tracker.init(body, context);
      else void patched.then(() => tracker.init(body, context));
    } catch (error) {
      // Tracking never costs the page.
      log.error({ err: describeError(error) }, 'tracking failed after the answer');
    }
  }

  function wait(res: ServerResponse, pageview: Pageview): void {
    const held = hold();
    if (held !== undefined) held(res, pageview);
    else
      onResponseHead(res, pageview.cookies, (status, contentType) => answered(pageview, status, contentType));
  }

  function prepare(req: IncomingMessage, res: ServerResponse, view: RequestView): void {
    const consent = ctx.consentOf(req);
    if (consent === 'denied') {
      // Counted, nothing more: no cookie written, no cookie read, no fbp patched.
      wait(res, {
        cookies: [],
        body: consentlessInitBody(settings.websiteId, view),
        view,
        context: ctx.anonymousContext(view),
        patched: undefined,
      });
      return;
    }
    const nowMs = ctx.now();
    const visitor = readVisitor(req.headers.cookie, view.search, nowMs);
    // Older visits of this browser get their fbp before the new visit is created, so the
    // tracker's "latest visit" is still the one that lacked it.
    const patched = ctx.patchFbp(visitor, view);
    const body = initBody(settings.websiteId, visitor, attributionOf(view, req.headers.referer, visitor));
    if (consent === 'granted') body.consent = 'granted';
    wait(res, {
      cookies: visitorCookies(visitor, nowMs, ctx.scopeOf(view)),
      body,
      view,
      context: ctx.contextOf(view),
      patched,
    });
  }

  return { prepare, answered };
}
