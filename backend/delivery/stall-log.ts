import type { Logger } from '../log.js';

export type DeliveryStatus = 'ok' | 'stalled';

export interface DeliveryCheck {
  delivery: DeliveryStatus;
  oldestDueSeconds: number;
  /** Whether this process's runner works; null when it runs no worker. */
  workerRunning: boolean | null;
}

/**
 * Remembers the last status so that a stall is logged once when it starts and once when it ends,
 * however often it is checked (every /readyz probe, every scrape, the periodic watch).
 */
export class StallLog {
  private stalled = false;
  constructor(private readonly log: Pick<Logger, 'error' | 'info'>) {}

  record(check: DeliveryCheck): void {
    const now = check.delivery === 'stalled';
    if (now === this.stalled) return;
    this.stalled = now;
    const fields = {
      oldestDueSeconds: Math.round(check.oldestDueSeconds),
      workerRunning: check.workerRunning,
    };
    // Both at error level: an operator grepping errors sees where the incident ends, too.
    if (now) this.log.error(fields, 'delivery is stalled: due sends are not being delivered');
    else this.log.error(fields, 'delivery resumed');
  }
}
