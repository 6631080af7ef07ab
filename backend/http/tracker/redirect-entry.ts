import type { Hono } from 'hono';
import { entryRedirect } from '../../domain/entries/click.js';
import { adClick } from './ad-click.js';
import { entryNavigationFallback } from './entry-fallback.js';
import type { KeylessEnv } from './env.js';
import { redirect } from './responses.js';
import type { TrackerSurface } from './surface.js';

/** `GET /r/{siteId}/entry/{entryId}`: an ad click straight to a bot (three segments, never confused with `/r/{siteId}/{channelId}`). */
export function registerRedirectEntry(keyless: Hono<KeylessEnv>, s: TrackerSurface): void {
  keyless.get('/r/:siteId/entry/:entryId', async (c) => {
    let siteId: string | undefined;
    try {
      const click = await adClick(
        s,
        c,
        c.req.param('siteId'),
        `entry:${c.req.param('entryId')}`,
        (id) => (siteId = id),
      );
      if (click instanceof Response) return click;
      const outcome = await entryRedirect(s.deps, { ...click.visit, entryId: c.req.param('entryId') });
      click.setCookies();
      return redirect(c, outcome.url);
    } catch (err) {
      return entryNavigationFallback(c, s.deps, err, siteId, c.req.param('entryId'));
    }
  });
}
