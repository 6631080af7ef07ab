import { Hono, type MiddlewareHandler } from 'hono';
import { registerConversionValue } from './conversion-value.js';
import type { DashEnv } from './env.js';
import { registerJoinRequestDecide } from './join-request-decide.js';
import { registerLeadErase } from './lead-erase.js';
import { registerLeads } from './leads.js';
import { registerLiveEvents } from './live-events.js';
import { registerAuditPage } from './audit-page.js';
import { registerDashboardAuth } from './auth.js';
import { registerOverview } from './overview.js';
import { registerDashboardReports } from './reports.js';
import { registerDashboardRoi } from './roi.js';
import { registerDashboardWebhooks } from './webhooks.js';
import { registerSendRetry } from './send-retry.js';
import { registerSendsRetryFailed } from './sends-retry-failed.js';
import { registerSite } from './site.js';
import { createDashboardSurface, type DashDeps } from './surface.js';
import { STYLE_HASH } from './views.js';

/**
 * `/dashboard`: the operator's view of every site (what is set up, what fails, what waits for a
 * value) and the actions the CLI also offers: submitting a waiting conversion's value, retrying a
 * failed send, approving or declining a held join request. Signed in as a user (e-mail and
 * password, a role over a scope) or with ADMIN_TOKEN (a cookie session, or `Authorization: Bearer`
 * for scripts): auth.ts is the one gate every signed-in route passes. Server-rendered; forms carry
 * a session-bound token. One file per route; what they share is in surface.ts.
 */
const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': `default-src 'none'; style-src '${STYLE_HASH}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

export function dashboardRoutes(deps: DashDeps): Hono<DashEnv> {
  const app = new Hono<DashEnv>();
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
  const s = createDashboardSurface(deps, signedIn);
  registerOverview(app, s);
  registerLeads(app, s);
  registerLeadErase(app, s);
  registerDashboardReports(app, deps, s.signedIn, s.siteOf);
  registerDashboardRoi(app, deps, s.signedIn, s.siteOf);
  registerDashboardWebhooks(app, deps, s.signedIn, s.siteOf);
  registerLiveEvents(app, deps, s.signedIn, s.siteOf);
  registerSite(app, s);
  registerConversionValue(app, s);
  registerSendsRetryFailed(app, s);
  registerSendRetry(app, s);
  registerJoinRequestDecide(app, s);
  return app;
}
