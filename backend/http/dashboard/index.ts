import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { parseTrustedProxies, resolveForwardedChain } from '../../../shared/client-ip.js';
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
import { closeSession, openSession, sessionOpen } from '../../domain/dashboard/sessions.js';
import {
  conversionOwner,
  dashboardOverview,
  dashboardSite,
  sendOfSite,
} from '../../domain/dashboard/read-model.js';
import { ApiError } from '../../errors.js';
import type { DashEnv } from './env.js';
import { bearerToken, socketAddress } from '../request-info.js';
import { createSignInLimit } from './sign-in-limit.js';
import {
  formToken,
  formTokenValid,
  issueSession,
  sameSecret,
  SESSION_COOKIE,
  SESSION_TTL_MS,
  sessionValid,
} from './session.js';
import {
  journeyPage,
  loginPage,
  NOTICES,
  notFoundPage,
  overviewPage,
  sitePage,
  STYLE_HASH,
  type NoticeKey,
  type SitePageState,
} from './views.js';
import { registerDashboardReports } from './reports.js';
import { registerDashboardWebhooks } from './webhooks.js';

/**
 * `/dashboard`: the operator's view of every site (what is set up, what fails, what waits for a
 * value) and the actions the CLI also offers: submitting a waiting conversion's value, retrying a
 * failed send, approving or declining a held join request. Signed in with ADMIN_TOKEN (a cookie session, or `Authorization: Bearer`
 * for scripts). Server-rendered, no script; forms carry a session-bound token.
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
  const secure = deps.config.PUBLIC_URL.startsWith('https:');
  const nowMs = () => deps.now().getTime();

  const headers: MiddlewareHandler = async (c, next) => {
    await next();
    // A page that set its own policy keeps it (the Reports page adds its script files).
    for (const [name, value] of Object.entries(SECURITY_HEADERS))
      if (!c.res.headers.has(name)) c.header(name, value);
  };
  app.use('/dashboard', headers);
  app.use('/dashboard/*', headers);

  const signInLimit = createSignInLimit(deps.pool);
  const trust = parseTrustedProxies(deps.config.TRUSTED_PROXIES);
  const clientIp = (c: Context): string =>
    resolveForwardedChain(socketAddress(c), c.req.header('x-forwarded-for'), trust).clientIp;

  /** A cookie this ADMIN_TOKEN issued, unexpired, whose session was not signed out. */
  const honoured = async (session: string | undefined): Promise<boolean> =>
    session !== undefined &&
    sessionValid(deps.adminToken, session, nowMs()) &&
    (await sessionOpen(deps.pool, session, deps.now()));

  /** Signed in by cookie (the session, whose form token POSTs must carry) or by bearer token. */
  const signedIn: MiddlewareHandler<DashEnv> = async (c, next) => {
    const bearer = bearerToken(c.req.header('authorization'));
    if (bearer !== undefined) {
      // Guessing the token as a bearer counts against the same budget as the sign-in form.
      const ip = clientIp(c);
      const blockedMs = await signInLimit.take(ip);
      if (blockedMs > 0)
        throw new ApiError('RATE_LIMITED', 'too many failed sign-ins from this address', {
          headers: { 'Retry-After': String(Math.ceil(blockedMs / 1000)) },
        });
      if (!sameSecret(bearer, deps.adminToken)) {
        deps.log.warn({ requestId: c.get('requestId') }, 'dashboard bearer token refused');
        throw new ApiError('UNAUTHORIZED', 'the admin token is required', {
          headers: { 'www-authenticate': 'Bearer realm="capigram-admin"' },
        });
      }
      await signInLimit.giveBack(ip);
      c.set('session', null);
      c.set('formToken', '');
      return next();
    }
    const session = getCookie(c, SESSION_COOKIE);
    if (session === undefined || !(await honoured(session))) return c.redirect('/dashboard/login', 303);
    c.set('session', session);
    c.set('formToken', formToken(deps.adminToken, session));
    if (c.req.method === 'POST') {
      const form = await c.req.parseBody();
      if (!formTokenValid(deps.adminToken, session, form._token)) {
        throw new ApiError(
          'FORBIDDEN',
          'the form is stale or was not sent by this dashboard: reload the page and try again',
        );
      }
    }
    return next();
  };

  app.get('/dashboard/login', async (c) => {
    if (await honoured(getCookie(c, SESSION_COOKIE))) return c.redirect('/dashboard', 303);
    return c.html(loginPage());
  });

  app.post('/dashboard/login', async (c) => {
    const ip = clientIp(c);
    const blockedMs = await signInLimit.take(ip);
    if (blockedMs > 0) {
      const minutes = Math.ceil(blockedMs / 60_000);
      c.header('Retry-After', String(Math.ceil(blockedMs / 1000)));
      return c.html(
        loginPage(
          `Too many failed sign-ins from this address: try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`,
        ),
        429,
      );
    }
    const form = await c.req.parseBody();
    if (typeof form.token !== 'string' || !sameSecret(form.token.trim(), deps.adminToken)) {
      deps.log.warn({ requestId: c.get('requestId') }, 'dashboard sign-in refused');
      return c.html(loginPage('That is not the admin token.'), 401);
    }
    await signInLimit.giveBack(ip);
    const session = issueSession(deps.adminToken, nowMs());
    await openSession(deps.pool, session, new Date(nowMs() + SESSION_TTL_MS));
    setCookie(c, SESSION_COOKIE, session, {
      path: '/dashboard',
      httpOnly: true,
      sameSite: 'Strict',
      secure,
      maxAge: SESSION_TTL_MS / 1000,
    });
    return c.redirect('/dashboard', 303);
  });

  app.post('/dashboard/logout', signedIn, async (c) => {
    const session = c.get('session');
    if (session !== null) await closeSession(deps.pool, session);
    deleteCookie(c, SESSION_COOKIE, { path: '/dashboard', secure });
    return c.redirect('/dashboard/login', 303);
  });

  app.get('/dashboard', signedIn, async (c) => {
    const since = new Date(nowMs() - OVERVIEW_HOURS * 3600_000);
    return c.html(
      overviewPage(await dashboardOverview(deps.pool, since), OVERVIEW_HOURS, {
        formToken: c.get('formToken'),
      }),
    );
  });

  app.get('/dashboard/leads', signedIn, async (c) => {
    const query = (c.req.query('user') ?? '').trim().slice(0, 40);
    const session = { formToken: c.get('formToken') };
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
    return c.html(journeyPage(String(id), await leadJourney(deps.pool, id), session, undefined, notice));
  });

  // Erasure needs the confirmation box ticked: the page has no script to ask, and nothing undoes it.
  app.post('/dashboard/sites/:site/leads/:user/erase', signedIn, async (c) => {
    const site = await siteOf(c);
    if (site instanceof Response) return site;
    const rawUser = c.req.param('user');
    const user = /^\d{1,16}$/.test(rawUser) ? Number(rawUser) : Number.NaN;
    const session = { formToken: c.get('formToken') };
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
          await leadJourney(deps.pool, user),
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
            await leadJourney(deps.pool, user),
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
      c.html(notFoundPage(`There is no site ${siteRef}.`, { formToken: c.get('formToken') }), 404)
    );
  }

  async function renderSite(
    c: Context<DashEnv>,
    siteRef: string,
    state: Omit<SitePageState, 'formToken'>,
    status: 200 | 400 | 404 | 409 = 200,
  ) {
    const detail = await dashboardSite(deps.pool, siteRef);
    if (!detail)
      return c.html(notFoundPage(`There is no site ${siteRef}.`, { formToken: c.get('formToken') }), 404);
    const heldRequests = await heldRequestsOfSite(deps.pool, detail.site.id);
    return c.html(sitePage(detail, { ...state, heldRequests, formToken: c.get('formToken') }), status);
  }

  registerDashboardReports(app, deps, signedIn, siteOf);
  registerDashboardWebhooks(app, deps, signedIn, siteOf);

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
