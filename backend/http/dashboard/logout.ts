import type { Hono } from 'hono';
import { deleteCookie } from 'hono/cookie';
import { closeSession } from '../../domain/dashboard/sessions.js';
import type { DashEnv } from './env.js';
import { SESSION_COOKIE } from './session.js';
import type { DashboardSurface } from './surface.js';

/** `POST /dashboard/logout`: the session is closed in the database, not only its cookie dropped. */
export function registerLogout(app: Hono<DashEnv>, s: DashboardSurface): void {
  app.post('/dashboard/logout', s.signedIn, async (c) => {
    const session = c.get('session');
    if (session !== null) await closeSession(s.deps.pool, session);
    deleteCookie(c, SESSION_COOKIE, { path: '/dashboard', secure: s.secure });
    return c.redirect('/dashboard/login', 303);
  });
}
