import type { TaskList } from 'graphile-worker';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { REFILL_INVITES_TASK } from '../../domain/invites/link-pool.js';
import { refillAllPools, refillChannelPool, type RefillOutcome } from '../../domain/invites/refill.js';

/**
 * `refill_invites`: with `{channelId}` (queued when a click used that channel's pool, or
 * rescheduled after Telegram's flood control) it refills one pool; from the cron (every minute)
 * it refills them all. Telegram failures never fail the job: the next pass tries again.
 */
export const REFILL_INVITES_CRONTAB = `* * * * * ${REFILL_INVITES_TASK} ?max=1&jobKey=${REFILL_INVITES_TASK}&jobKeyMode=replace`;

const Payload = z.object({ channelId: z.uuid() });

export function refillInviteTasks(deps: Deps): TaskList {
  const report = (outcomes: RefillOutcome[]) => {
    for (const o of outcomes) {
      if (o.created > 0 || o.retired > 0 || o.deferredUntil !== undefined || o.error !== undefined) {
        deps.log.info({ ...o, deferredUntil: o.deferredUntil?.toISOString() }, 'invite pool refill');
      }
    }
  };
  return {
    [REFILL_INVITES_TASK]: async (payload) => {
      const one = Payload.safeParse(payload);
      report(one.success ? [await refillChannelPool(deps, one.data.channelId)] : await refillAllPools(deps));
    },
  };
}
