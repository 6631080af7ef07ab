import type { Context, MiddlewareHandler } from 'hono';
import type { Deps } from '../../deps.js';
import { Uuid } from '../../domain/admin/schemas.js';
import { findSite, type SiteRow } from '../../domain/admin/sites.js';
import { heldRequestsOfSite } from '../../domain/admin/join-requests.js';
import { dashboardSite } from '../../domain/dashboard/read-model.js';
import { viewSession } from './auth.js';
import type { DashEnv } from './env.js';
import { notFoundPage, sitePage, type SitePageState } from './views.js';

export type DashDeps = Pick<Deps, 'pool' | 'now' | 'adminToken' | 'config' | 'log' | 'local' | 'box'>;

export const isUuid = (s: string) => Uuid.safeParse(s).success;

/**
 * What every dashboard route shares: the sign-in gate (auth.ts), the site a URL names, and the site
 * page re-rendered with a notice or an error. Made once per app by `dashboardRoutes`.
 */
export interface DashboardSurface {
  deps: DashDeps;
  nowMs(): number;
  /** The one gate of every signed-in route (auth.ts): who is signed in, and what they may see and change. */
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

export function createDashboardSurface(
  deps: DashDeps,
  signedIn: MiddlewareHandler<DashEnv>,
): DashboardSurface {
  const nowMs = () => deps.now().getTime();

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
  ): Promise<Response> {
    const detail = await dashboardSite(deps.pool, siteRef);
    if (!detail) return c.html(notFoundPage(`There is no site ${siteRef}.`, viewSession(c)), 404);
    const heldRequests = await heldRequestsOfSite(deps.pool, detail.site.id);
    return c.html(sitePage(detail, { ...state, heldRequests, ...viewSession(c) }), status);
  }

  return { deps, nowMs, signedIn, siteOf, renderSite };
}
