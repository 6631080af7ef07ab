import type { TaskList } from 'graphile-worker';
import { z } from 'zod';
import type { Deps } from '../../deps.js';
import {
  SPEND_IMPORT_TASK,
  SPEND_REFRESH_TASK,
  handleImportJob,
  isDay,
  queueRefreshes,
} from '../../domain/spend/sync.js';

export { SPEND_CRONTAB } from '../../domain/spend/sync.js';

const Day = z.string().refine(isDay);
const ImportPayload = z.object({
  sourceId: z.string().uuid(),
  from: Day,
  to: Day,
  backfill: z.boolean().optional(),
  token: z.string().uuid(),
  pauses: z.number().int().min(0).optional(),
});

/** A source's import (backfill, refresh, a pause's resumption) and the hourly refresh of all. */
export function spendTasks(deps: Deps): TaskList {
  return {
    [SPEND_IMPORT_TASK]: async (payload) => {
      const job = ImportPayload.safeParse(payload);
      if (!job.success) {
        deps.log.warn({ task: SPEND_IMPORT_TASK }, 'spend import: unreadable payload dropped');
        return;
      }
      await handleImportJob(deps, job.data);
    },
    [SPEND_REFRESH_TASK]: async () => {
      const queued = await queueRefreshes(deps.pool, deps.now());
      if (queued > 0) deps.log.info({ queued }, 'spend refresh queued');
    },
  };
}
