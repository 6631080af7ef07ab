import { TelegramError } from '../../telegram/client.js';
import { findChannel, listPoolChannels, type InviteChannel } from './invite-channels.js';
import { handoutCutoff } from './links.js';
import { insertCreatedLink, poolSize, queueRefill } from './link-pool.js';
import { createLinkAtTelegram, inFloodWait, revokeLinkAtTelegram, type InviteDeps } from './telegram.js';

/**
 * Keeping each channel's pool at `pool_target` links that can still be handed out, and retiring
 * unassigned links too old to hand out. Telegram's flood control is obeyed, never probed: the
 * first 429 stops the pass for that bot and the channel's refill is rescheduled for when Telegram
 * said to come back.
 */
export interface RefillOutcome {
  channelId: string;
  created: number;
  retired: number;
  /** Set when flood control stopped the refill; the next one is queued for then. */
  deferredUntil?: Date;
  /** Set when the channel was left alone. */
  skipped?: 'inactive' | 'bot_cannot_invite';
  /** Set when Telegram failed otherwise (unreachable, refused); the next pass tries again. */
  error?: string;
}

const REFILL_TELEGRAM_TIMEOUT_MS = 10_000;

/** One channel's refill (the job queued when a click used its pool). */
export async function refillChannelPool(deps: InviteDeps, channelId: string): Promise<RefillOutcome> {
  const channel = await findChannel(deps.pool, channelId);
  if (channel === null) return { channelId, created: 0, retired: 0, skipped: 'inactive' };
  return refillPool(deps, channel);
}

/** Every active channel (the cron pass). A bot that hit flood control is not asked again in it. */
export async function refillAllPools(deps: InviteDeps): Promise<RefillOutcome[]> {
  const outcomes: RefillOutcome[] = [];
  const held = new Map<string, Date>();
  for (const channel of await listPoolChannels(deps.pool)) {
    const wait = held.get(channel.botId);
    if (wait !== undefined && (channel.floodWaitUntil === null || channel.floodWaitUntil < wait))
      channel.floodWaitUntil = wait;
    const outcome = await refillPool(deps, channel);
    if (outcome.deferredUntil !== undefined) held.set(channel.botId, outcome.deferredUntil);
    outcomes.push(outcome);
  }
  return outcomes;
}

async function refillPool(deps: InviteDeps, channel: InviteChannel): Promise<RefillOutcome> {
  const outcome: RefillOutcome = { channelId: channel.id, created: 0, retired: 0 };
  if (channel.botCannotInvite) return { ...outcome, skipped: 'bot_cannot_invite' };
  try {
    const missing =
      channel.poolTarget -
      (await poolSize(deps.pool, channel.id, handoutCutoff(deps.now(), channel.inviteTtlSeconds)));
    for (let i = 0; i < missing; i++) {
      if (inFloodWait(channel, deps.now())) break;
      const link = await createLinkAtTelegram(deps, channel, REFILL_TELEGRAM_TIMEOUT_MS);
      await insertCreatedLink(deps.pool, { channelId: channel.id, link, visitId: null, now: deps.now() });
      outcome.created++;
    }
    if (!inFloodWait(channel, deps.now())) outcome.retired = await retireStaleLinks(deps, channel);
  } catch (err) {
    if (!(err instanceof TelegramError)) throw err;
    if (err.kind !== 'rate_limited') outcome.error = err.message;
  }
  if (inFloodWait(channel, deps.now()) && channel.floodWaitUntil !== null) {
    outcome.deferredUntil = channel.floodWaitUntil;
    await queueRefill(deps.pool, channel.id, channel.floodWaitUntil);
  }
  return outcome;
}

/**
 * Unassigned links past their hand-out age leave the pool. They are taken out in the database
 * first (so no click can claim one in between), then the live ones are revoked at Telegram so the
 * channel's list of links does not fill with unused ones; one that flood control spares simply
 * expires, unknown to anyone.
 */
async function retireStaleLinks(deps: InviteDeps, channel: InviteChannel): Promise<number> {
  const now = deps.now();
  const { rows } = await deps.pool.query<{ invite_link: string; live: boolean }>(
    `UPDATE invitations SET revoked_at = $2
     WHERE id IN (
       SELECT id FROM invitations
       WHERE channel_id = $1 AND visit_id IS NULL AND revoked_at IS NULL AND used_at IS NULL AND NOT unattributed AND expires_at <= $3
       ORDER BY expires_at LIMIT 200 FOR UPDATE SKIP LOCKED)
     RETURNING invite_link, expires_at > $2 AS live`,
    [channel.id, now, handoutCutoff(now, channel.inviteTtlSeconds)],
  );
  for (const row of rows) {
    if (row.live && !inFloodWait(channel, deps.now())) {
      await revokeLinkAtTelegram(deps, channel, row.invite_link, REFILL_TELEGRAM_TIMEOUT_MS).catch(
        (err: unknown) => {
          if (!(err instanceof TelegramError)) throw err;
        },
      );
    }
  }
  return rows.length;
}
