import type { Hono } from 'hono';
import { trackDirectInviteBodySchema } from '../../../shared/tracker-wire.js';
import { isConsented } from '../../domain/tracker/consent.js';
import { directInvite } from '../../domain/tracker/invites.js';
import { ApiError } from '../../errors.js';
import { readJson } from '../json.js';
import type { KeylessEnv } from './env.js';
import type { TrackerSurface } from './surface.js';

/** `POST /backend/track/direct-invite`: a visit and its invite link in one call (no page view before). */
export function registerTrackDirectInvite(keyless: Hono<KeylessEnv>, s: TrackerSurface): void {
  keyless.post('/backend/track/direct-invite', async (c) => {
    const body = await readJson(c, trackDirectInviteBodySchema);
    // One visit per visitRequestId is the point of this endpoint: one of the two names is required.
    const visitRequestId = s.requestIdOf(body);
    if (visitRequestId === undefined)
      throw new ApiError('VALIDATION_FAILED', 'body: visitRequestId: required');
    const site = await s.siteFor(body.websiteId);
    s.admit(c, site);
    await s.limiter.consume('invite', site.id, c.get('browser').ip);
    const outcome = await directInvite(s.deps, {
      siteId: site.id,
      tempId: body.tempId,
      sessionId: body.sessionId,
      visitRequestId,
      channelId: body.channelId,
      kind: 'direct_invite',
      attribution: s.attributionOf(c, body, isConsented(body.consent, site.consentMode)),
    });
    return c.json({ visitId: outcome.visitId, inviteUrl: outcome.inviteLink });
  });
}
