import type { Hono } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import { openSession } from '../../domain/dashboard/sessions.js';
import type { DashEnv } from './env.js';
import { issueSession, SESSION_COOKIE, SESSION_TTL_MS, sameSecret } from './session.js';
import type { DashboardSurface } from './surface.js';
import { loginPage } from './views.js';

/** `GET|POST /dashboard/login`: the sign-in form (ADMIN_TOKEN), with a per-address budget of failures. */
export function registerLogin(app: Hono<DashEnv>, s: DashboardSurface): void {
  const { deps } = s;
  app.get('/dashboard/login', async (c) => {
    if (await s.honoured(getCookie(c, SESSION_COOKIE))) return c.redirect('/dashboard', 303);
    return c.html(loginPage());
  });

  app.post('/dashboard/login', async (c) => {
    const ip = s.clientIp(c);
    const blockedMs = await s.signInLimit.take(ip);
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
    await s.signInLimit.giveBack(ip);
    const session = issueSession(deps.adminToken, s.nowMs());
    await openSession(deps.pool, session, new Date(s.nowMs() + SESSION_TTL_MS));
    setCookie(c, SESSION_COOKIE, session, {
      path: '/dashboard',
      httpOnly: true,
      sameSite: 'Strict',
      secure: s.secure,
      maxAge: SESSION_TTL_MS / 1000,
    });
    return c.redirect('/dashboard', 303);
  });
}
