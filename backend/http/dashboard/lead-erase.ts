import type { Hono } from 'hono';
import { leadJourney } from '../../domain/dashboard/lead-journey.js';
import { eraseLeadInAccount } from '../../domain/erasure/erase-lead.js';
import { ApiError } from '../../errors.js';
import { scopeOf } from '../../domain/admin/roles.js';
import { viewSession } from './auth.js';
import type { DashEnv } from './env.js';
import type { DashboardSurface } from './surface.js';
import { journeyPage } from './views.js';

/**
 * `POST /dashboard/sites/{site}/leads/{user}/erase`. Erasure needs the confirmation box ticked:
 * the page has no script to ask, and nothing undoes it.
 */
export function registerLeadErase(app: Hono<DashEnv>, s: DashboardSurface): void {
  const { deps } = s;
  app.post('/dashboard/sites/:site/leads/:user/erase', s.signedIn, async (c) => {
    const site = await s.siteOf(c);
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
}
