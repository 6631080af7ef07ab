import type { TaskList } from 'graphile-worker';
import { FORWARD_TASK, drainForwards, type ForwardDeps } from '../../domain/telegram/forwards.js';

/** The update forwards of one (bot, user); a forward not taken is put off by the domain, not by failing the job. */
export function forwardUpdateTasks(deps: ForwardDeps): TaskList {
  return {
    [FORWARD_TASK]: async (payload) => {
      const out = await drainForwards(deps, payload);
      if (out.delivered + out.dropped + out.failed > 0) deps.log.debug(out, 'update forwards sent');
    },
  };
}
