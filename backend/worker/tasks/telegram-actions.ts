import type { JobHelpers, Task, TaskList } from 'graphile-worker';
import { isUuid } from '../../../shared/ids.js';
import {
  TELEGRAM_TASKS,
  revokeInviteLink,
  type ActionDeps,
  type ActionOutcome,
} from '../../domain/bot-api/actions.js';
import { approveAndRecordJoin } from '../../domain/telegram/approved-joins.js';
import { SEND_WELCOME_TASK, sendWelcome } from '../../domain/entries/welcome.js';
import { JOIN_WELCOME_TASK, sendJoinWelcome } from '../../domain/telegram/join-welcome.js';
import {
  JOIN_QUERY_TASKS,
  answerJoinQuery,
  joinGateFallback,
  showJoinGate,
} from '../../domain/telegram/guard-queries.js';
import { UPGRADE_WEBHOOKS_TASK, upgradeWebhooks } from '../../domain/telegram/webhook-upgrade.js';
import { purgeTelegramUpdates } from '../../domain/telegram/purge.js';
import { RIGHTS_CHECK_TASK, checkRights } from '../../domain/bot-api/rights-check.js';

const PURGE_TASK = 'purge_telegram_updates';

/** Daily purge of the webhook's old de-duplication records; the bot's rights re-checked every 10 minutes. */
export const TELEGRAM_CRONTAB = `17 3 * * * ${PURGE_TASK} ?max=1&jobKey=${PURGE_TASK}&jobKeyMode=replace
*/10 * * * * ${RIGHTS_CHECK_TASK} ?max=1&jobKey=${RIGHTS_CHECK_TASK}&jobKeyMode=replace`;

/** Webhooks set with fewer update types than Capigram asks for are set again (also when a worker starts). */
export const UPGRADE_WEBHOOKS_CRONTAB = `*/15 * * * * ${UPGRADE_WEBHOOKS_TASK} ?max=1&jobKey=${UPGRADE_WEBHOOKS_TASK}&jobKeyMode=replace`;

/**
 * Jobs of the Telegram webhook: its Bot API calls, and the purge of old update records.
 *
 * Bot API calls: A flood-control answer schedules the same action again
 * after Telegram's `retry_after` (graphile-worker's own backoff cannot be told a delay; run_at is
 * compared with the database's clock, hence the wall clock here); network failures are thrown and
 * retried with backoff.
 */
export function telegramActionTasks(deps: ActionDeps): TaskList {
  const task =
    (name: string, run: (d: ActionDeps, payload: unknown) => Promise<ActionOutcome>): Task =>
    async (payload, helpers) => {
      const result = await run(deps, payload);
      await settle(deps, name, result, helpers);
    };
  return {
    [TELEGRAM_TASKS.approveJoinRequest]: task(TELEGRAM_TASKS.approveJoinRequest, approveAndRecordJoin),
    [TELEGRAM_TASKS.revokeInviteLink]: task(TELEGRAM_TASKS.revokeInviteLink, revokeInviteLink),
    [SEND_WELCOME_TASK]: task(SEND_WELCOME_TASK, sendWelcome),
    [JOIN_WELCOME_TASK]: task(JOIN_WELCOME_TASK, sendJoinWelcome),
    [JOIN_QUERY_TASKS.answer]: task(JOIN_QUERY_TASKS.answer, answerJoinQuery),
    [JOIN_QUERY_TASKS.showGate]: task(JOIN_QUERY_TASKS.showGate, showJoinGate),
    [JOIN_QUERY_TASKS.fallback]: task(JOIN_QUERY_TASKS.fallback, joinGateFallback),
    [RIGHTS_CHECK_TASK]: async (payload) => {
      const channelId = (payload as { channelId?: unknown } | null)?.channelId;
      await checkRights(deps, {
        channelId: typeof channelId === 'string' && isUuid(channelId) ? channelId : undefined,
      });
    },
    [UPGRADE_WEBHOOKS_TASK]: async () => {
      await upgradeWebhooks(deps);
    },
    [PURGE_TASK]: async () => {
      const n = await purgeTelegramUpdates(deps.pool, deps.now());
      if (n > 0) deps.log.info({ purged: n }, 'purged old telegram update records');
    },
  };
}

async function settle(deps: ActionDeps, name: string, r: ActionOutcome, helpers: JobHelpers): Promise<void> {
  if (r.outcome === 'retry_after') {
    await helpers.addJob(name, r.payload, {
      runAt: new Date(Date.now() + r.seconds * 1000),
      maxAttempts: helpers.job.max_attempts,
    });
  } else if (r.outcome === 'gave_up') {
    deps.log.warn({ task: name, jobId: helpers.job.id, reason: r.reason }, 'telegram action given up');
  }
}
