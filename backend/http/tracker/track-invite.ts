import type { Hono } from 'hono';
import { trackInviteQuerySchema } from '../../../shared/tracker-wire.js';
import { inviteClick } from '../../domain/tracker/invites.js';
import { registerClick } from './click.js';
import type { KeylessEnv } from './env.js';
import { isBrowserNavigation, navigationFallback } from './navigation-fallback.js';
import type { TrackerSurface } from './surface.js';

/** `GET /backend/track/invite`: a click on a channel's join link; the visitor gets an invite link. */
export function registerTrackInvite(keyless: Hono<KeylessEnv>, s: TrackerSurface): void {
  registerClick(keyless, s, {
    path: '/backend/track/invite',
    query: trackInviteQuerySchema,
    countsOwnLimit: true,
    record: async (deps, input, query) => {
      const outcome = await inviteClick(deps, { ...input, channelId: query.channel });
      return { visitId: outcome.visitId, url: outcome.inviteLink };
    },
    json: (outcome) => ({ visitId: outcome.visitId, inviteUrl: outcome.url }),
    fallback: (c, err, siteId) => {
      if (!isBrowserNavigation(c)) throw err;
      return navigationFallback(c, err, { siteId, channelId: c.req.query('channel') }, s.deps);
    },
  });
}
