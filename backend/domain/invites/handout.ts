import { withTx } from '../../db/pool.js';
import { ApiError } from '../../errors.js';
import type { InviteChannel } from './invite-channels.js';
import { fallbackUrl, handoutCutoff } from './links.js';
import {
  heldLink,
  heldOrPooledLink,
  insertCreatedLink,
  insertFallback,
  lockVisit,
  queueRefill,
  type AssignedLink,
} from './link-pool.js';
import { createLinkAtTelegram, inFloodWait, type CreatedLink, type InviteDeps } from './telegram.js';

/**
 * Handing a visit an invite link of a channel, in order of preference:
 * 1. the link the visit already holds for the channel (a second click gets the same link);
 * 2. a link from the channel's pool (one UPDATE, no Telegram round trip);
 * 3. a link created on the spot, when the pool ran dry;
 * 4. the channel's public address, recorded as an unattributed invitation, when Telegram cannot
 *    give a link (down, flood control, no rights): the visitor still reaches the channel.
 * Each step that used the pool or Telegram asks for a refill of the pool.
 */
type HandoutSource = 'held' | 'pool' | 'created' | 'fallback';

export interface HandedOut extends AssignedLink {
  source: HandoutSource;
}

/** How long a click waits for Telegram before settling for the public link. */
const CLICK_TELEGRAM_TIMEOUT_MS = 2500;

export async function inviteForVisit(
  deps: InviteDeps,
  q: { visitId: string; channel: InviteChannel; mode: 'usable' | 'any' },
): Promise<HandedOut> {
  const { channel, visitId, mode } = q;
  const now = deps.now();
  const link = await heldOrPooledLink(deps.pool, {
    visitId,
    channelId: channel.id,
    now,
    cutoff: handoutCutoff(now, channel.inviteTtlSeconds),
    mode,
  });
  const fromPool: HandedOut | null =
    link === null
      ? null
      : { invitationId: link.invitationId, inviteLink: link.inviteLink, source: link.held ? 'held' : 'pool' };
  if (fromPool !== null) {
    if (fromPool.source === 'pool') await requestRefill(deps, channel.id);
    return fromPool;
  }
  return inviteFromTelegram(deps, q);
}

/**
 * Steps 3 and 4, once the visit held no link for the channel and its pool was found dry: a link
 * created on the spot, else the channel's public address.
 */
export async function inviteFromTelegram(
  deps: InviteDeps,
  q: { visitId: string; channel: InviteChannel; mode: 'usable' | 'any' },
): Promise<HandedOut> {
  const { channel, visitId, mode } = q;
  const now = deps.now();
  // The Telegram call happens outside any transaction: no row lock or connection is held while
  // Telegram takes its time.
  let created: CreatedLink | null = null;
  if (!channel.botCannotInvite && !inFloodWait(channel, now)) {
    try {
      created = await createLinkAtTelegram(deps, channel, CLICK_TELEGRAM_TIMEOUT_MS);
    } catch (err) {
      deps.log.warn(
        { channelId: channel.id, err: (err as Error).message },
        'no invite link could be created for a click',
      );
    }
  }

  const handedOut = await withTx(deps.pool, async (tx): Promise<HandedOut> => {
    await lockVisit(tx, visitId);
    // A concurrent click of the same visit may have been served meanwhile: it keeps its link, and
    // the one just created goes to the pool rather than being wasted.
    const held = await heldLink(tx, { visitId, channelId: channel.id, now, mode });
    if (held !== null) {
      if (created !== null)
        await insertCreatedLink(tx, { channelId: channel.id, link: created, visitId: null, now });
      return { ...held, source: 'held' };
    }
    if (created !== null) {
      return {
        ...(await insertCreatedLink(tx, { channelId: channel.id, link: created, visitId, now })),
        source: 'created',
      };
    }
    const url = fallbackUrl(channel);
    if (url === null) {
      throw new ApiError(
        'UNAVAILABLE',
        'no invite link can be had from Telegram right now and the channel has no public link',
        {
          headers: { 'Retry-After': '5' },
        },
      );
    }
    return {
      ...(await insertFallback(tx, { channelId: channel.id, visitId, url, now })),
      source: 'fallback',
    };
  });
  if (handedOut.source !== 'held') await requestRefill(deps, channel.id);
  return handedOut;
}

/**
 * How often one process asks for a refill of one channel's pool. Every click queueing the job
 * would make clicks of a channel queue up behind each other on the job's row; one request per
 * interval is as good, since a queued refill tops the pool up to its target in one go (and the
 * cron checks every pool each minute anyway).
 */
const REFILL_REQUEST_INTERVAL_MS = 2000;

export async function requestRefill(deps: InviteDeps, channelId: string): Promise<void> {
  // When this process last asked for each channel's refill (`process-state.ts`).
  const lastRefillRequest = deps.local.refillRequests;
  const now = performance.now();
  if (now - (lastRefillRequest.get(channelId) ?? -Infinity) < REFILL_REQUEST_INTERVAL_MS) return;
  lastRefillRequest.set(channelId, now);
  try {
    await queueRefill(deps.pool, channelId);
  } catch (err) {
    lastRefillRequest.delete(channelId);
    deps.log.warn(
      { channelId, err: (err as Error).message },
      'could not queue an invite pool refill; the cron will catch up',
    );
  }
}
