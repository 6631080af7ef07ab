import { ApiError } from '../../errors.js';
import { findChannel, findSiteChannel, type InviteChannel } from '../invites/invite-channels.js';
import { inviteForVisit, inviteFromTelegram, requestRefill, type HandedOut } from '../invites/handout.js';
import {
  type ClickRoundTrip,
  clickRoundTrip,
  inviteClickCall,
  type RedirectClick,
  redirectCall,
} from './click-handout.js';
import type { InviteDeps } from '../invites/telegram.js';
import type { Queryable } from '../../db/pool.js';
import {
  recordVisit,
  visitMismatch,
  type VisitAdmission,
  type VisitAttribution,
  type VisitKind,
} from './visits.js';

/**
 * The tracker's two ways into a channel: an invite click from a tracked page, and a direct invite
 * (an ad pointing at Telegram with no landing page, through `track/direct-invite` or `/r/…`).
 */
export interface InviteOutcome extends HandedOut {
  visitId: string;
}

function channelNotFound(channelId: string | undefined): ApiError {
  return new ApiError(
    'NOT_FOUND',
    channelId === undefined
      ? 'the site has no default channel; name one with channel'
      : `channel ${channelId} is not an active channel of this site`,
  );
}

async function requireChannel(
  db: Queryable,
  siteId: string,
  channelId: string | undefined,
): Promise<InviteChannel> {
  const channel = await findSiteChannel(db, siteId, channelId);
  if (channel !== null) return channel;
  throw channelNotFound(channelId);
}

/**
 * An invite click belongs to the session's latest visit, else the browser's latest. A browser
 * never seen before (its init was lost, or blocked) gets a minimal visit from the click itself,
 * so the join is still traced to it. The rate limit (`admission`) is counted by the click's own
 * statement: on the common path (the visit holds a link, or the pool has one) the whole click is
 * one round trip and one commit (`click-handout.ts`); only a dry pool takes the slower way, with
 * Telegram called outside any transaction.
 */
export async function inviteClick(
  deps: InviteDeps,
  q: {
    siteId: string;
    tempId: string;
    sessionId: string;
    channelId?: string | undefined;
    click: VisitAttribution;
    admission: VisitAdmission;
  },
): Promise<InviteOutcome> {
  const trip = await clickRoundTrip(deps, inviteClickCall(q), 'usable');
  return handOut(deps, trip, q, 'usable');
}

/**
 * An ad's click straight to a channel (`/r/{site}/{channel}`): `directInvite`'s visit (one per
 * visitRequestId: a reload or a double tap gets the same link back) and link, with the rate limit
 * counted by the same statement, in one round trip and one commit unless the pool is dry.
 */
export async function redirectInvite(deps: InviteDeps, q: RedirectClick): Promise<InviteOutcome> {
  const trip = await clickRoundTrip(deps, redirectCall(q), 'any');
  if (trip.allowed && trip.channel !== null && trip.visitId === null) throw visitMismatch();
  return handOut(deps, trip, q, 'any');
}

/** A click's round trip made good: its errors, the worker woken, and a link from Telegram when the pool was dry. */
async function handOut(
  deps: InviteDeps,
  trip: ClickRoundTrip,
  q: { channelId?: string | undefined; admission: VisitAdmission },
  mode: 'usable' | 'any',
): Promise<InviteOutcome> {
  if (!trip.allowed) throw q.admission.refusal(trip.retryMs);
  if (trip.channel === null || trip.visitId === null) throw channelNotFound(q.channelId);
  if (trip.sends > 0) deps.local.waker.wake();
  const { channel, visitId, link } = trip;
  if (link === null) return { visitId, ...(await inviteFromTelegram(deps, { visitId, channel, mode })) };
  if (!link.held) await requestRefill(deps, channel.id);
  return {
    visitId,
    invitationId: link.invitationId,
    inviteLink: link.inviteLink,
    source: link.held ? 'held' : 'pool',
  };
}

/**
 * One visit, one PageView and one invitation per visitRequestId: a retry gets the same link back
 * and only fills attribution the first call lacked. The channel is routing, fixed by the first call.
 */
export async function directInvite(
  deps: InviteDeps,
  q: {
    siteId: string;
    tempId: string;
    sessionId: string;
    visitRequestId: string;
    channelId?: string | undefined;
    kind: Extract<VisitKind, 'direct_invite' | 'redirect'>;
    attribution: VisitAttribution;
  },
): Promise<InviteOutcome> {
  const asked = await requireChannel(deps.pool, q.siteId, q.channelId);
  const visit = await recordVisit(deps, {
    siteId: q.siteId,
    tempId: q.tempId,
    sessionId: q.sessionId,
    visitRequestId: q.visitRequestId,
    kind: q.kind,
    channelId: asked.id,
    attribution: q.attribution,
  });
  const routed =
    visit.channelId === null || visit.channelId === asked.id
      ? asked
      : ((await findChannel(deps.pool, visit.channelId)) ?? asked);
  return {
    visitId: visit.visitId,
    ...(await inviteForVisit(deps, { visitId: visit.visitId, channel: routed, mode: 'any' })),
  };
}
