import type { Hono } from 'hono';
import { isActiveChannelOf } from '../../domain/admin/channels.js';
import { decideJoinRequest } from '../../domain/admin/join-requests.js';
import { ApiError } from '../../errors.js';
import type { DashEnv } from './env.js';
import { type DashboardSurface, isUuid } from './surface.js';

/** `POST /dashboard/sites/{site}/channels/{channel}/requests/{user}/{approve|decline}`: a held join request decided. */
export function registerJoinRequestDecide(app: Hono<DashEnv>, s: DashboardSurface): void {
  const { deps } = s;
  app.post(
    '/dashboard/sites/:site/channels/:channel/requests/:user/:decision{approve|decline}',
    s.signedIn,
    async (c) => {
      const site = await s.siteOf(c);
      if (site instanceof Response) return site;
      const channelId = c.req.param('channel');
      const decision = c.req.param('decision') as 'approve' | 'decline';
      const user = Number(c.req.param('user'));
      const known = isUuid(channelId) && (await isActiveChannelOf(deps.pool, site.id, channelId));
      if (!known || !(Number.isSafeInteger(user) && user > 0))
        return s.renderSite(
          c,
          site.id,
          { error: "That join request is not one of this site's channels'." },
          404,
        );
      try {
        await decideJoinRequest(deps, { channelId, telegramUserId: user, decision });
      } catch (err) {
        if (err instanceof ApiError && err.code !== 'INTERNAL')
          return s.renderSite(c, site.id, { error: err.message }, err.code === 'NOT_FOUND' ? 404 : 409);
        throw err;
      }
      deps.log.info(
        { requestId: c.get('requestId'), channelId, decision },
        'dashboard: join request decided',
      );
      return c.redirect(
        `/dashboard/sites/${site.id}?notice=request-${decision === 'approve' ? 'approved' : 'declined'}`,
        303,
      );
    },
  );
}
