import type { TaskList } from 'graphile-worker';
import { FORWARD_TASK, drainForwards, type ForwardDeps } from '../../domain/telegram/forwards.js';

/** The update forwards of one (bot, user); a forward not taken fails the job, for graphile-worker's backoff. */
export function forwardUpdateTasks(deps: ForwardDeps): TaskList {
  return {
    [FORWARD_TASK]: async (payload) => {
      const out = await drainForwards(deps, payload);
      if (out.delivered + out.dropped > 0) deps.log.debug(out, 'update forwards sent');
    },
  };
}
