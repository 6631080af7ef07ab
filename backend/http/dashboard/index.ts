import { Hono, type Context, type MiddlewareHandler } from 'hono';
import type { Deps } from '../../deps.js';
import { retryFailedSends, retrySend } from '../../delivery/admin.js';
import {
  MAX_VALUE,
  MIN_VALUE,
  normalizeCurrency,
  VALUE_DECIMALS,
} from '../../domain/conversions/currencies.js';
import { submitConversionValue } from '../../domain/conversions/submit-value.js';
import { isActiveChannelOf } from '../../domain/admin/channels.js';
import { Uuid } from '../../domain/admin/schemas.js';
import { findSite, type SiteRow } from '../../domain/admin/sites.js';
import { decideJoinRequest, heldRequestsOfSite } from '../../domain/admin/join-requests.js';
import { leadJourney } from '../../domain/dashboard/lead-journey.js';
import { eraseLeadInAccount } from '../../domain/erasure/erase-lead.js';
import { scopeOf, seesSite } from '../../domain/admin/roles.js';
import {
  conversionOwner,
  dashboardOverview,
  dashboardSite,
  sendOfSite,
} from '../../domain/dashboard/read-model.js';
import { ApiError } from '../../errors.js';
import type { DashEnv } from './env.js';
import { registerAuditPage } from './audit-page.js';
import { registerDashboardAuth, viewSession } from './auth.js';
import {
  journeyPage,
  NOTICES,
  notFoundPage,
  overviewPage,
  sitePage,
  STYLE_HASH,
  type NoticeKey,
  type SitePageState,
} from './views.js';
import { registerDashboardReports } from './reports.js';

/**
 * `/dashboard`: the operator's view of every site (what is set up, what fails, what waits for a
 * value) and the actions the CLI also offers: submitting a waiting conversion's value, retrying a
 * failed send, approving or declining a held join request. Signed in as a user (e-mail and
 * password, a role over a scope) or with ADMIN_TOKEN (a cookie session, or `Authorization: Bearer`
 * for scripts): auth.ts is the one gate every signed-in route passes. Server-rendered, no script;
 * forms carry a session-bound token.
 */
const OVERVIEW_HOURS = 24;
const isUuid = (s: string) => Uuid.safeParse(s).success;

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': `default-src 'none'; style-src '${STYLE_HASH}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

export function dashboardRoutes(
  deps: Pick<Deps, 'pool' | 'now' | 'adminToken' | 'config' | 'log' | 'local' | 'box'>,
): Hono<DashEnv> {
  const app = new Hono<DashEnv>();
  const nowMs = () => deps.now().getTime();

  const headers: MiddlewareHandler = async (c, next) => {
    await next();
    // A page that set its own policy keeps it (the Reports page adds its script files).
    for (const [name, value] of Object.entries(SECURITY_HEADERS))
      if (!c.res.headers.has(name)) c.header(name, value);
  };
  app.use('/dashboard', headers);
  app.use('/dashboard/*', headers);

  const { signedIn } = registerDashboardAuth(app, deps);
  registerAuditPage(app, deps, signedIn);

  app.get('/dashboard', signedIn, async (c) => {
    const since = new Date(nowMs() - OVERVIEW_HOURS * 3600_000);
    return c.html(
      overviewPage(
        (await dashboardOverview(deps.pool, since)).filter((s) =>
          seesSite(c.get('actor'), { id: s.siteId, accountId: s.accountId }),
        ),
        OVERVIEW_HOURS,
        viewSession(c),
      ),
    );
  });

  app.get('/dashboard/leads', signedIn, async (c) => {
    const query = (c.req.query('user') ?? '').trim().slice(0, 40);
    const session = viewSession(c);
    const id = /^\d{1,16}$/.test(query) ? Number(query) : Number.NaN;
    if (!(Number.isSafeInteger(id) && id > 0)) {
      return c.html(
        journeyPage(
          query,
          null,
          session,
          'A Telegram user id is a positive whole number, such as 123456789.',
        ),
        400,
      );
    }
    const erased = c.req.query('erased');
    const notice =
      erased !== undefined && isUuid(erased) ? "This person's data on that site was erased." : undefined;
    return c.html(
      journeyPage(
        String(id),
        await leadJourney(deps.pool, id, scopeOf(c.get('actor'))),
        session,
        undefined,
        notice,
      ),
    );
  });

  // Erasure needs the confirmation box ticked: the page has no script to ask, and nothing undoes it.
  app.post('/dashboard/sites/:site/leads/:user/erase', signedIn, async (c) => {
    const site = await siteOf(c);
    if (site instanceof Response) return site;
    const rawUser = c.req.param('user');
    const user = /^\d{1,16}$/.test(rawUser) ? Number(rawUser) : Number.NaN;
    const session = viewSession(c);
    if (!(Number.isSafeInteger(user) && user > 0))
      return c.html(
        journeyPage(
          rawUser.slice(0, 40),
          null,
          session,
          'A Telegram user id is a positive whole number, such as 123456789.',
        ),
        400,
      );
    const form = await c.req.parseBody();
    if (form.confirm !== 'yes') {
      return c.html(
        journeyPage(
          String(user),
          await leadJourney(deps.pool, user, scopeOf(c.get('actor'))),
          session,
          'Tick the box to confirm the erasure: it cannot be undone.',
        ),
        400,
      );
    }
    try {
      await eraseLeadInAccount(
        deps.pool,
        { accountId: site.account_id, telegramUserId: user, site: site.id },
        'dashboard',
      );
    } catch (err) {
      if (err instanceof ApiError && err.code === 'LEAD_NOT_FOUND') {
        return c.html(
          journeyPage(
            String(user),
            await leadJourney(deps.pool, user, scopeOf(c.get('actor'))),
            session,
            'Nothing is known about this user on that site (erased already?).',
          ),
          404,
        );
      }
      throw err;
    }
    deps.log.info({ requestId: c.get('requestId'), siteId: site.id }, 'dashboard: lead erased');
    return c.redirect(`/dashboard/leads?user=${user}&erased=${site.id}`, 303);
  });

  /** The site the URL names, or the not-found page to answer with. */
  async function siteOf(c: Context<DashEnv>): Promise<SiteRow | Response> {
    const siteRef = c.req.param('site') ?? '';
    return (
      (await findSite(deps.pool, siteRef)) ??
      c.html(notFoundPage(`There is no site ${siteRef}.`, viewSession(c)), 404)
    );
  }

  async function renderSite(
    c: Context<DashEnv>,
    siteRef: string,
    state: Omit<SitePageState, 'formToken'>,
    status: 200 | 400 | 404 | 409 = 200,
  ) {
    const detail = await dashboardSite(deps.pool, siteRef);
    if (!detail) return c.html(notFoundPage(`There is no site ${siteRef}.`, viewSession(c)), 404);
    const heldRequests = await heldRequestsOfSite(deps.pool, detail.site.id);
    return c.html(sitePage(detail, { ...state, heldRequests, ...viewSession(c) }), status);
  }

  registerDashboardReports(app, deps, signedIn, siteOf);

  app.get('/dashboard/sites/:site', signedIn, async (c) => {
    const notice = c.req.query('notice');
    return renderSite(c, c.req.param('site'), {
      notice: notice !== undefined && notice in NOTICES ? (notice as NoticeKey) : undefined,
    });
  });

  app.post('/dashboard/sites/:site/conversions/:conversion/value', signedIn, async (c) => {
    const conversionId = c.req.param('conversion');
    const site = await siteOf(c);
    if (site instanceof Response) return site;
    const form = await c.req.parseBody();
    const rawValue = typeof form.value === 'string' ? form.value.trim() : '';
    const rawCurrency = typeof form.currency === 'string' ? form.currency.trim() : '';
    const valueForm = { conversionId, value: rawValue.slice(0, 40), currency: rawCurrency.slice(0, 3) };
    const value = /^\d+(\.\d+)?$/.test(rawValue) ? Number(rawValue) : Number.NaN;
    const currency = normalizeCurrency(rawCurrency);
    const problem = !(value > 0)
      ? 'The value must be a number greater than 0.'
      : value < MIN_VALUE
        ? `The value must be at least ${MIN_VALUE} (values are kept to ${VALUE_DECIMALS} decimal places).`
        : value > MAX_VALUE
          ? `The value must be at most ${MAX_VALUE}.`
          : currency === undefined
            ? 'The currency must be an ISO 4217 code, such as USD or EUR.'
            : null;
    if (problem !== null) return renderSite(c, site.id, { error: problem, valueForm }, 400);
    const owner = isUuid(conversionId) ? await conversionOwner(deps.pool, site.id, conversionId) : null;
    if (!owner) return renderSite(c, site.id, { error: "That conversion is not one of this site's." }, 404);
    try {
      await submitConversionValue(
        deps,
        { keyId: 'dashboard', accountId: owner.accountId, siteId: site.id },
        {
          telegramUserId: owner.telegramUserId,
          conversionId,
          value,
          currency: currency!,
          pii: { email: null, phone: null, firstName: null, lastName: null },
        },
      );
    } catch (err) {
      if (err instanceof ApiError && err.code === 'NOT_AWAITING_VALUE') {
        return renderSite(
          c,
          site.id,
          { error: 'That conversion no longer waits for a value (it was submitted already).' },
          409,
        );
      }
      throw err;
    }
    deps.log.info({ requestId: c.get('requestId'), conversionId }, 'dashboard: conversion value submitted');
    return c.redirect(`/dashboard/sites/${site.id}?notice=value-saved`, 303);
  });

  app.post('/dashboard/sites/:site/sends/retry-failed', signedIn, async (c) => {
    const site = await siteOf(c);
    if (site instanceof Response) return site;
    const { retried, more } = await retryFailedSends(deps.pool, site.id);
    deps.log.info(
      { requestId: c.get('requestId'), siteId: site.id, retried, more },
      'dashboard: failed sends retried',
    );
    return c.redirect(`/dashboard/sites/${site.id}?notice=failed-retried`, 303);
  });

  app.post('/dashboard/sites/:site/sends/:send/retry', signedIn, async (c) => {
    const sendId = c.req.param('send');
    const site = await siteOf(c);
    if (site instanceof Response) return site;
    if (!isUuid(sendId) || !(await sendOfSite(deps.pool, site.id, sendId))) {
      return renderSite(c, site.id, { error: "That send is not one of this site's." }, 404);
    }
    try {
      await retrySend(deps.pool, sendId);
    } catch (err) {
      if (err instanceof ApiError && err.code === 'VALIDATION_FAILED')
        return renderSite(c, site.id, { error: err.message }, 409);
      throw err;
    }
    deps.log.info({ requestId: c.get('requestId'), sendId }, 'dashboard: send retried');
    return c.redirect(`/dashboard/sites/${site.id}?notice=send-retried`, 303);
  });
  app.post(
    '/dashboard/sites/:site/channels/:channel/requests/:user/:decision{approve|decline}',
    signedIn,
    async (c) => {
      const site = await siteOf(c);
      if (site instanceof Response) return site;
      const channelId = c.req.param('channel');
      const decision = c.req.param('decision') as 'approve' | 'decline';
      const user = Number(c.req.param('user'));
      const known = isUuid(channelId) && (await isActiveChannelOf(deps.pool, site.id, channelId));
      if (!known || !(Number.isSafeInteger(user) && user > 0))
        return renderSite(
          c,
          site.id,
          { error: "That join request is not one of this site's channels'." },
          404,
        );
      try {
        await decideJoinRequest(deps, { channelId, telegramUserId: user, decision });
      } catch (err) {
        if (err instanceof ApiError && err.code !== 'INTERNAL')
          return renderSite(c, site.id, { error: err.message }, err.code === 'NOT_FOUND' ? 404 : 409);
        throw err;
      }
      deps.log.info(
        { requestId: c.get('requestId'), channelId, decision },
        'dashboard: join request decided',
      );
      return c.redirect(
        `/dashboard/sites/${site.id}?notice=request-${decision === 'approve' ? 'approved' : 'declined'}`,
        303,
      );
    },
  );
  return app;
}
