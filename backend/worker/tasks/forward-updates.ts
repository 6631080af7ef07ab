import type { TaskList } from 'graphile-worker';
import type { Deps } from '../../deps.js';
import { FORWARD_TASK, drainForwards, type ForwardDeps } from '../../domain/telegram/forwards.js';

/** The update forwards of one (bot, user); a forward not taken is put off by the domain, not by failing the job. */
export function forwardUpdateTasks(deps: ForwardDeps & Pick<Deps, 'metrics'>): TaskList {
  const counter = deps.metrics.telegramForwards;
  return {
    [FORWARD_TASK]: async (payload) => {
      const out = await drainForwards(deps, payload);
      if (out.delivered > 0) counter.inc({ outcome: 'sent' }, out.delivered);
      if (out.failed > 0) counter.inc({ outcome: 'refused' }, out.failed);
      if (out.dropped > 0) counter.inc({ outcome: 'dropped' }, out.dropped);
      if (out.delivered + out.dropped + out.failed > 0) deps.log.debug(out, 'update forwards sent');
    },
  };
}
