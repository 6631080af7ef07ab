import type { Context, Hono, MiddlewareHandler } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { parseTrustedProxies, resolveForwardedChain } from '../../../shared/client-ip.js';
import { passwordMatches, PASSWORD_MAX, PASSWORD_MIN } from '../../crypto/passwords.js';
import type { Deps } from '../../deps.js';
import { recordAudit } from '../../domain/admin/audit.js';
import { actorName, mayChange, seesSite, type Actor } from '../../domain/admin/roles.js';
import { findSite } from '../../domain/admin/sites.js';
import { acceptInvitation, invitationFor, userByEmail } from '../../domain/admin/users.js';
import { closeSession, openSession, sessionHolder } from '../../domain/dashboard/sessions.js';
import { ApiError } from '../../errors.js';
import { bearerToken, socketAddress } from '../request-info.js';
import type { DashEnv } from './env.js';
import {
  formToken,
  formTokenValid,
  issueSession,
  sameSecret,
  SESSION_COOKIE,
  SESSION_TTL_MS,
  sessionValid,
} from './session.js';
import { createSignInLimit } from './sign-in-limit.js';
import { forbiddenPage, invitePage, signInPage } from './team-views.js';
import { notFoundPage } from './views.js';

/**
 * Who is signed in to the dashboard, and what they may do there. A browser signs in with a user's
 * e-mail and password (or the admin token, for the first set-up), a script sends the admin token as
 * a bearer token. Every signed-in request then passes one gate, `signedIn`, which:
 * - refuses a site outside the user's scope as if it did not exist (404), for every route with a
 *   `:site` in its path;
 * - refuses every POST but signing out to a viewer (403);
 * - records each change that succeeded (a 303 answer to a POST) in the audit log, by route.
 * Routes registered later pass the same gate; test/dashboard/roles.test.ts refuses routes it has
 * not classified.
 */
const DUMMY_HASH = 'scrypt$15$8$3$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';

/** Audit names of the dashboard's changes, by route; other POST routes are recorded by their path. */
const ACTIONS: Record<string, (p: Record<string, string>) => { action: string; target: string }> = {
  '/dashboard/sites/:site/conversions/:conversion/value': (p) => ({
    action: 'conversion.value',
    target: `conversion ${p.conversion}`,
  }),
  '/dashboard/sites/:site/sends/retry-failed': () => ({
    action: 'sends.retry-failed',
    target: 'failed sends',
  }),
  '/dashboard/sites/:site/sends/:send/retry': (p) => ({ action: 'send.retry', target: `send ${p.send}` }),
  // Never a Telegram user id: an erased lead's id must not outlive it here.
  '/dashboard/sites/:site/leads/:user/erase': () => ({ action: 'lead.erase', target: 'a lead' }),
  '/dashboard/sites/:site/channels/:channel/requests/:user/:decision{approve|decline}': (p) => ({
    action: `join-request.${p.decision}`,
    target: `a join request in channel ${p.channel}`,
  }),
};
/** Form fields kept in an audit entry's detail (the rest, such as the form token, are not). */
const AUDITED_FIELDS = ['value', 'currency'];

export interface DashboardAuth {
  signedIn: MiddlewareHandler<DashEnv>;
}

export function registerDashboardAuth(
  app: Hono<DashEnv>,
  deps: Pick<Deps, 'pool' | 'now' | 'adminToken' | 'config' | 'log'>,
): DashboardAuth {
  const secure = deps.config.PUBLIC_URL.startsWith('https:');
  const nowMs = () => deps.now().getTime();
  const signInLimit = createSignInLimit(deps.pool);
  const trust = parseTrustedProxies(deps.config.TRUSTED_PROXIES);
  const clientIp = (c: Context): string =>
    resolveForwardedChain(socketAddress(c), c.req.header('x-forwarded-for'), trust).clientIp;

  /** The holder of a cookie this ADMIN_TOKEN issued, unexpired and still open; undefined if none. */
  const holder = async (session: string | undefined): Promise<Actor | undefined> => {
    if (session === undefined || !sessionValid(deps.adminToken, session, nowMs())) return undefined;
    const held = await sessionHolder(deps.pool, session, deps.now());
    if (held === undefined) return undefined;
    return held === null ? { kind: 'token' } : { kind: 'user', user: held };
  };

  const startSession = async (c: Context<DashEnv>, userId: string | null): Promise<void> => {
    const session = issueSession(deps.adminToken, nowMs());
    await openSession(deps.pool, session, new Date(nowMs() + SESSION_TTL_MS), userId);
    setCookie(c, SESSION_COOKIE, session, {
      path: '/dashboard',
      httpOnly: true,
      sameSite: 'Strict',
      secure,
      maxAge: SESSION_TTL_MS / 1000,
    });
  };

  const rateLimited = (c: Context<DashEnv>, blockedMs: number) => {
    const minutes = Math.ceil(blockedMs / 60_000);
    c.header('Retry-After', String(Math.ceil(blockedMs / 1000)));
    return c.html(
      signInPage(
        `Too many failed sign-ins from this address: try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`,
      ),
      429,
    );
  };

  /** The actor of a request: a cookie session, or the admin token as a bearer token. */
  const authenticate = async (c: Context<DashEnv>): Promise<Actor | Response> => {
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
      return { kind: 'token' };
    }
    const session = getCookie(c, SESSION_COOKIE);
    const actor = await holder(session);
    if (session === undefined || actor === undefined) return c.redirect('/dashboard/login', 303);
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
    return actor;
  };

  const signedIn: MiddlewareHandler<DashEnv> = async (c, next) => {
    const actor = await authenticate(c);
    if (actor instanceof Response) return actor;
    c.set('actor', actor);
    const session = { formToken: c.get('formToken'), readOnly: !mayChange(actor) };
    const siteRef = c.req.param('site');
    const site = siteRef === undefined ? null : await findSite(deps.pool, siteRef);
    if (site !== null && !seesSite(actor, { id: site.id, accountId: site.account_id }))
      return c.html(notFoundPage(`There is no site ${siteRef}.`, session), 404);
    const change = c.req.method === 'POST' && c.req.routePath !== '/dashboard/logout';
    if (change && !mayChange(actor))
      return c.html(
        forbiddenPage('A viewer can look, not change: this needs an admin or an owner.', session),
        403,
      );
    await next();
    if (change && c.res.status === 303) {
      const params = c.req.param() as Record<string, string>;
      // An unnamed route is recorded by its path and site: its other parameters may be a lead's ids.
      const named = ACTIONS[c.req.routePath]?.(params) ?? { action: c.req.routePath, target: site?.id ?? '' };
      const form = await c.req.parseBody();
      const detail: Record<string, string> = {};
      for (const f of AUDITED_FIELDS)
        if (typeof form[f] === 'string') detail[f] = String(form[f]).slice(0, 40);
      await recordAudit(deps.pool, {
        actor: actorName(actor),
        userId: actor.kind === 'user' ? actor.user.userId : null,
        ...named,
        accountId: site?.account_id ?? null,
        siteId: site?.id ?? null,
        detail,
      });
    }
  };

  app.get('/dashboard/login', async (c) => {
    if ((await holder(getCookie(c, SESSION_COOKIE))) !== undefined) return c.redirect('/dashboard', 303);
    return c.html(signInPage());
  });

  // One form for both: a user's e-mail and password, or (no e-mail) the admin token.
  app.post('/dashboard/login', async (c) => {
    const ip = clientIp(c);
    const blockedMs = await signInLimit.take(ip);
    if (blockedMs > 0) return rateLimited(c, blockedMs);
    const form = await c.req.parseBody();
    const email = typeof form.email === 'string' ? form.email.trim() : '';
    if (email !== '') {
      const password = typeof form.password === 'string' ? form.password : '';
      const user = password.length <= PASSWORD_MAX ? await userByEmail(deps.pool, email) : null;
      // An unknown e-mail costs the same hash as a known one: the answer's time tells nothing.
      const ok = await passwordMatches(password.slice(0, PASSWORD_MAX), user?.passwordHash ?? DUMMY_HASH);
      if (!user || user.passwordHash === null || !ok) {
        deps.log.warn({ requestId: c.get('requestId') }, 'dashboard sign-in refused');
        return c.html(signInPage('That e-mail and password do not match a user.', email.slice(0, 254)), 401);
      }
      await signInLimit.giveBack(ip);
      await startSession(c, user.userId);
      return c.redirect('/dashboard', 303);
    }
    if (typeof form.token !== 'string' || !sameSecret(form.token.trim(), deps.adminToken)) {
      deps.log.warn({ requestId: c.get('requestId') }, 'dashboard sign-in refused');
      return c.html(signInPage('That is not the admin token.'), 401);
    }
    await signInLimit.giveBack(ip);
    await startSession(c, null);
    return c.redirect('/dashboard', 303);
  });

  app.post('/dashboard/logout', signedIn, async (c) => {
    const session = c.get('session');
    if (session !== null) await closeSession(deps.pool, session);
    deleteCookie(c, SESSION_COOKIE, { path: '/dashboard', secure });
    return c.redirect('/dashboard/login', 303);
  });

  // The invitation link is its own credential (256 random bits): it needs no session and no form token.
  app.get('/dashboard/invite/:token', async (c) => {
    const email = await invitationFor(deps.pool, c.req.param('token'), deps.now());
    if (email === null) return c.html(invitePage(null), 404);
    return c.html(invitePage(email));
  });

  app.post('/dashboard/invite/:token', async (c) => {
    const token = c.req.param('token');
    const email = await invitationFor(deps.pool, token, deps.now());
    if (email === null) return c.html(invitePage(null), 404);
    const form = await c.req.parseBody();
    const password = typeof form.password === 'string' ? form.password : '';
    const problem =
      password.length < PASSWORD_MIN
        ? `The password needs at least ${PASSWORD_MIN} characters.`
        : password.length > PASSWORD_MAX
          ? `The password may have at most ${PASSWORD_MAX} characters.`
          : password !== form.confirm
            ? 'The two passwords differ.'
            : null;
    if (problem !== null) return c.html(invitePage(email, problem), 400);
    const user = await acceptInvitation(deps.pool, token, password, deps.now());
    if (user === null) return c.html(invitePage(null), 404);
    await recordAudit(deps.pool, {
      actor: user.email,
      userId: user.userId,
      action: 'user.accept-invitation',
      target: user.email,
      accountId: user.accountId,
      siteId: user.siteId,
    });
    await startSession(c, user.userId);
    return c.redirect('/dashboard', 303);
  });

  return { signedIn };
}

/** The page state every signed-in page carries: the form token, and whether forms to change are shown. */
export function viewSession(c: Context<DashEnv>): { formToken: string; readOnly: boolean } {
  return { formToken: c.get('formToken'), readOnly: !mayChange(c.get('actor')) };
}
