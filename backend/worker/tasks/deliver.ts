import type { Task, TaskList } from 'graphile-worker';
import type { Deps } from '../../deps.js';
import { deliveryOptions, type DeliveryOptions } from '../../delivery/options.js';
import {
  REQUEST_STATUS_TASK,
  RequestStatusJob,
  checkRequestStatus,
} from '../../delivery/google-diagnostics.js';
import { deliverDue } from '../../delivery/pipeline.js';
import { DELIVER_TASK } from '../../domain/outbox/delivery-wake.js';

/**
 * Task names an earlier version queued, one job per send and a recovery cron: a job of theirs
 * still in a database that was upgraded simply delivers whatever is due.
 */
const LEGACY_DELIVER_TASKS = ['deliver_send', 'deliver_recover'] as const;

/**
 * `deliver_due`: delivers every due send. Platform failures never make a job fail: the pipeline
 * records them on the send and schedules its own retry. A job fails (and graphile-worker retries
 * it) only when the database does.
 */
export function deliveryTasks(deps: Deps, overrides: Partial<DeliveryOptions> = {}): TaskList {
  const o = deliveryOptions(overrides);
  const deliver: Task = async () => {
    await deps.local.deliveryGate.drain(() => deliverDue(deps, o));
  };
  // Reads a Data Manager API request's diagnostics; a malformed payload is dropped, not retried.
  const requestStatus: Task = async (payload) => {
    const job = RequestStatusJob.safeParse(payload);
    if (job.success) await checkRequestStatus(deps, job.data);
  };
  return {
    ...Object.fromEntries([DELIVER_TASK, ...LEGACY_DELIVER_TASKS].map((name) => [name, deliver])),
    [REQUEST_STATUS_TASK]: requestStatus,
  };
}
