import type { Context, MiddlewareHandler } from 'hono';
import { getCookie } from 'hono/cookie';
import { parseTrustedProxies, resolveForwardedChain } from '../../../shared/client-ip.js';
import type { Deps } from '../../deps.js';
import { Uuid } from '../../domain/admin/schemas.js';
import { findSite, type SiteRow } from '../../domain/admin/sites.js';
import { heldRequestsOfSite } from '../../domain/admin/join-requests.js';
import { sessionOpen } from '../../domain/dashboard/sessions.js';
import { dashboardSite } from '../../domain/dashboard/read-model.js';
import { ApiError } from '../../errors.js';
import { bearerToken, socketAddress } from '../request-info.js';
import type { DashEnv } from './env.js';
import { formToken, formTokenValid, SESSION_COOKIE, sameSecret, sessionValid } from './session.js';
import { createSignInLimit } from './sign-in-limit.js';
import { notFoundPage, sitePage, type SitePageState } from './views.js';

export type DashDeps = Pick<Deps, 'pool' | 'now' | 'adminToken' | 'config' | 'log' | 'local' | 'box'>;

export const isUuid = (s: string) => Uuid.safeParse(s).success;

/**
 * What every dashboard route shares: who is signed in (the `signedIn` middleware and the sign-in
 * budget it shares with the form), the site a URL names, and the site page re-rendered with a
 * notice or an error. Made once per app by `dashboardRoutes`.
 */
export interface DashboardSurface {
  deps: DashDeps;
  /** Session cookies are `Secure` when the dashboard is served over https. */
  secure: boolean;
  nowMs(): number;
  signInLimit: ReturnType<typeof createSignInLimit>;
  clientIp(c: Context): string;
  /** A cookie this ADMIN_TOKEN issued, unexpired, whose session was not signed out. */
  honoured(session: string | undefined): Promise<boolean>;
  /** Signed in by cookie (the session, whose form token POSTs must carry) or by bearer token. */
  signedIn: MiddlewareHandler<DashEnv>;
  /** The site the URL names, or the not-found page to answer with. */
  siteOf(c: Context<DashEnv>): Promise<SiteRow | Response>;
  renderSite(
    c: Context<DashEnv>,
    siteRef: string,
    state: Omit<SitePageState, 'formToken'>,
    status?: 200 | 400 | 404 | 409,
  ): Promise<Response>;
}

export function createDashboardSurface(deps: DashDeps): DashboardSurface {
  const nowMs = () => deps.now().getTime();
  const signInLimit = createSignInLimit(deps.pool);
  const trust = parseTrustedProxies(deps.config.TRUSTED_PROXIES);
  const clientIp = (c: Context): string =>
    resolveForwardedChain(socketAddress(c), c.req.header('x-forwarded-for'), trust).clientIp;

  const honoured = async (session: string | undefined): Promise<boolean> =>
    session !== undefined &&
    sessionValid(deps.adminToken, session, nowMs()) &&
    (await sessionOpen(deps.pool, session, deps.now()));

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
  ): Promise<Response> {
    const detail = await dashboardSite(deps.pool, siteRef);
    if (!detail)
      return c.html(notFoundPage(`There is no site ${siteRef}.`, { formToken: c.get('formToken') }), 404);
    const heldRequests = await heldRequestsOfSite(deps.pool, detail.site.id);
    return c.html(sitePage(detail, { ...state, heldRequests, formToken: c.get('formToken') }), status);
  }

  return {
    deps,
    secure: deps.config.PUBLIC_URL.startsWith('https:'),
    nowMs,
    signInLimit,
    clientIp,
    honoured,
    signedIn,
    siteOf,
    renderSite,
  };
}
