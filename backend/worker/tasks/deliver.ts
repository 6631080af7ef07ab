import type { TaskList } from 'graphile-worker';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import { deliveryOptions, type DeliveryOptions } from '../../delivery/options.js';
import { deliverSend } from '../../delivery/pipeline.js';
import { RECOVER_CRONTAB, RECOVER_TASK, requeueOverdue } from '../../delivery/recovery.js';
import { DELIVER_TASK } from '../../domain/sends.js';

const DeliverPayload = z.object({ sendId: z.uuid() });

export const DELIVERY_CRONTAB = RECOVER_CRONTAB;

/**
 * `deliver_send {sendId}` and the recovery sweep. Platform failures never make a job fail: the
 * pipeline records them on the send and schedules its own retry. A job fails (and graphile-worker
 * retries it) only when the database does.
 */
export function deliveryTasks(deps: Deps, overrides: Partial<DeliveryOptions> = {}): TaskList {
  const o = deliveryOptions(overrides);
  return {
    [DELIVER_TASK]: async (payload, helpers) => {
      const parsed = DeliverPayload.safeParse(payload);
      if (!parsed.success) {
        helpers.logger.error(`ignoring ${DELIVER_TASK} job ${helpers.job.id}: payload is not {sendId: uuid}`);
        return;
      }
      await deliverSend(deps, parsed.data.sendId, o);
    },
    [RECOVER_TASK]: async () => {
      const n = await requeueOverdue(deps.pool, o.recoverAfterMs);
      if (n > 0) deps.log.warn({ pixels: n }, 're-queued overdue sends');
    },
  };
}
