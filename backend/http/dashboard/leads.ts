import type { Hono } from 'hono';
import { leadJourney } from '../../domain/dashboard/lead-journey.js';
import { scopeOf } from '../../domain/admin/roles.js';
import { viewSession } from './auth.js';
import type { DashEnv } from './env.js';
import { type DashboardSurface, isUuid } from './surface.js';
import { journeyPage } from './views.js';

/** `GET /dashboard/leads?user=…`: one Telegram user's journey on every site. */
export function registerLeads(app: Hono<DashEnv>, s: DashboardSurface): void {
  app.get('/dashboard/leads', s.signedIn, async (c) => {
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
        await leadJourney(s.deps.pool, id, scopeOf(c.get('actor'))),
        session,
        undefined,
        notice,
      ),
    );
  });
}
