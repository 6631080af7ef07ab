import type { Task, TaskList } from 'graphile-worker';
import type { Deps } from '../../deps.js';
import { evaluateAlerts } from '../../domain/alerts/evaluate.js';
import { runRetention } from '../../domain/erasure/retention.js';
import { purgeIdempotencyKeys } from '../../domain/idempotency.js';
import { runRollup } from '../../domain/reports/rollup.js';
import { purgeDeadJobs } from '../dead-jobs.js';
import { TELEGRAM_CRONTAB, UPGRADE_WEBHOOKS_CRONTAB, telegramActionTasks } from './telegram-actions.js';
import { deliveryTasks } from './deliver.js';
import { forwardUpdateTasks } from './forward-updates.js';
import { REFILL_INVITES_CRONTAB, refillInviteTasks } from './refill-invites.js';
import { webhookTasks } from './webhooks.js';
import { SPEND_CRONTAB, spendTasks } from './spend.js';

/** Task names are part of the queue's data: keep them stable. */
export const TASKS = {
  purgeIdempotency: 'purge_idempotency',
  purgeDeadJobs: 'purge_dead_jobs',
  retention: 'retention',
  reportRollup: 'report_rollup',
  alerts: 'alerts_evaluate',
} as const;

/** One retention run stops starting batches after this long; the next hourly run goes on. */
export const RETENTION_RUN_MS = 10 * 60_000;

/** Cron schedule in graphile-worker's crontab format. */
export const CRONTAB = `0 * * * * ${TASKS.purgeIdempotency} ?max=1&jobKey=${TASKS.purgeIdempotency}&jobKeyMode=replace
*/10 * * * * ${TASKS.purgeDeadJobs} ?max=1&jobKey=${TASKS.purgeDeadJobs}&jobKeyMode=replace
23 * * * * ${TASKS.retention} ?max=5&jobKey=${TASKS.retention}&jobKeyMode=replace
*/15 * * * * ${TASKS.reportRollup} ?max=3&jobKey=${TASKS.reportRollup}&jobKeyMode=replace
* * * * * ${TASKS.alerts} ?max=1&jobKey=${TASKS.alerts}&jobKeyMode=replace
${TELEGRAM_CRONTAB}
${UPGRADE_WEBHOOKS_CRONTAB}
${REFILL_INVITES_CRONTAB}
${SPEND_CRONTAB}`;

/**
 * Task functions stay thin: they parse the payload and call a domain module, so every rule is
 * reachable from a test without the queue.
 */
export function createTaskList(deps: Deps): TaskList {
  const purge: Task = async () => {
    const n = await purgeIdempotencyKeys(deps.pool, deps.now());
    if (n > 0) deps.log.info({ purged: n }, 'purged idempotency keys');
  };
  const purgeDead: Task = async () => {
    const n = await purgeDeadJobs(deps.pool, deps.now());
    if (n.signals + n.others > 0) deps.log.info(n, 'purged dead jobs');
  };
  const retention: Task = async () => {
    const out = await runRetention(deps.pool, deps.now(), {
      days: deps.config.RETENTION_DAYS,
      until: Date.now() + RETENTION_RUN_MS,
    });
    const total = Object.values(out.cleared).reduce((a, b) => a + b, 0) + out.sendsDeleted;
    if (total > 0 || !out.done) deps.log.info(out, 'retention: old raw identifiers erased');
  };
  // Folds the reports' rows up to half an hour ago (domain/reports/rollup.ts); a long first run
  // is cut in pieces, the next quarter hour goes on.
  const reportRollup: Task = async () => {
    const out = await runRollup(deps.pool, deps.now(), { until: Date.now() + RETENTION_RUN_MS });
    if (out.sealed + out.resealed > 0) deps.log.info(out, 'reports: days folded');
  };
  // Alerts' conditions, moved and announced once a minute (domain/alerts/evaluate.ts).
  const alerts: Task = async () => {
    const out = await evaluateAlerts(deps, deps.now());
    if (out.started + out.ended + out.failed > 0) deps.log.info(out, 'alerts evaluated');
  };
  return {
    [TASKS.alerts]: alerts,
    [TASKS.reportRollup]: reportRollup,
    [TASKS.purgeIdempotency]: purge,
    [TASKS.purgeDeadJobs]: purgeDead,
    [TASKS.retention]: retention,
    ...telegramActionTasks(deps),
    ...deliveryTasks(deps),
    ...refillInviteTasks(deps),
    ...forwardUpdateTasks(deps),
    ...webhookTasks(deps),
    ...spendTasks(deps),
  };
}
