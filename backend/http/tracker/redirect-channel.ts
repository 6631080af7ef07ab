import type { Hono } from 'hono';
import { redirectInvite } from '../../domain/tracker/invites.js';
import { adClick } from './ad-click.js';
import type { KeylessEnv } from './env.js';
import { type FallbackTarget, isBrowserNavigation, navigationFallback } from './navigation-fallback.js';
import { redirect } from './responses.js';
import type { TrackerSurface } from './surface.js';

/** `GET /r/{siteId}/{channelId}`: an ad click straight to a channel; never domain-validated (opened from an ad). */
export function registerRedirectChannel(keyless: Hono<KeylessEnv>, s: TrackerSurface): void {
  keyless.get('/r/:siteId/:channelId', async (c) => {
    const channelParam = c.req.param('channelId');
    // Told the site as soon as it is known, for the fallback.
    const target: FallbackTarget = { siteId: undefined, channelId: channelParam };
    try {
      const click = await adClick(
        s,
        c,
        c.req.param('siteId'),
        channelParam,
        (siteId) => {
          target.siteId = siteId;
        },
        true,
      );
      if (click instanceof Response) return click;
      const outcome = await redirectInvite(s.deps, {
        ...click.visit,
        channelId: channelParam,
        admission: click.admission,
      });
      click.setCookies();
      return redirect(c, outcome.inviteLink);
    } catch (err) {
      if (!isBrowserNavigation(c)) throw err;
      return navigationFallback(c, err, target, s.deps);
    }
  });
}
