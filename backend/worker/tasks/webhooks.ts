import type { TaskList } from 'graphile-worker';
import { WEBHOOK_TASK, drainWebhookEvents, type WebhookDeps } from '../../domain/webhooks/deliver.js';

/** One (webhook, lead)'s events; a delivery not taken is put off by the domain, not by failing the job. */
export function webhookTasks(deps: WebhookDeps): TaskList {
  return {
    [WEBHOOK_TASK]: async (payload) => {
      const out = await drainWebhookEvents(deps, payload);
      if (out.delivered + out.failed + out.dropped > 0) deps.log.debug(out, 'webhook deliveries');
    },
  };
}
