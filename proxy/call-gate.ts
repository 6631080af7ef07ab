/**
 * How many tracker calls the proxy lets run, and when it stops sending background ones: a bound
 * on calls in flight (a stalled tracker would otherwise collect one pending call and socket per
 * pageview) and a circuit breaker that drops background calls while the tracker keeps failing,
 * letting one probe through after each cool-down. Calls a visitor waits on are only counted.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';

/** At most one line per interval about dropped calls, however many are dropped. */
const DROP_LOG_INTERVAL_MS = 10_000;

export interface CallGate {
  /** A background call, run only when the bound and the circuit allow it; else undefined at once. */
  bounded<T>(op: string, call: () => Promise<T | undefined>): Promise<T | undefined>;
  /** A call a visitor waits on: always run, counted for `drain`. */
  track<T>(promise: Promise<T>): Promise<T>;
  succeeded(): void;
  failed(): void;
  closed(): boolean;
  running(): number;
  /** Resolves when no call runs any more, or after `maxWaitMs`. */
  drain(maxWaitMs: number): Promise<void>;
}

export function createCallGate(options: {
  log: Logger;
  maxPending: number;
  /** Consecutive failed attempts that open the circuit. */
  threshold: number;
  /** How long an open circuit drops background calls before one probe is let through. */
  cooldownMs: number;
}): CallGate {
  const { log, maxPending, threshold, cooldownMs } = options;
  // Calls in flight, counted rather than kept: a drain only needs to know when none is left.
  let running = 0;
  let drained: Array<() => void> = [];
  let background = 0;
  let dropped = 0;
  let lastDropLog = Number.NEGATIVE_INFINITY;
  let failures = 0;
  let circuit: 'closed' | 'open' | 'probing' = 'closed';
  let openUntil = 0;

  function settled(): void {
    running -= 1;
    if (running === 0 && drained.length > 0) {
      for (const wake of drained) wake();
      drained = [];
    }
  }
  function settledBackground(): void {
    background -= 1;
    settled();
  }

  function drop(op: string, reason: string): Promise<undefined> {
    dropped += 1;
    const now = performance.now();
    if (now - lastDropLog >= DROP_LOG_INTERVAL_MS) {
      lastDropLog = now;
      log.error({ op, dropped, reason }, 'tracker calls dropped');
    }
    return Promise.resolve(undefined);
  }

  return {
    bounded<T>(op: string, call: () => Promise<T | undefined>): Promise<T | undefined> {
      if (circuit === 'probing') return drop(op, 'circuit open');
      if (circuit === 'open') {
        if (performance.now() < openUntil) return drop(op, 'circuit open');
        circuit = 'probing';
      }
      if (background >= maxPending) return drop(op, `more than ${maxPending} calls in flight`);
      background += 1;
      running += 1;
      // One settlement hook for both counts, and no closure: this runs on every pageview.
      const promise = call();
      void promise.then(settledBackground, settledBackground);
      return promise;
    },
    track<T>(promise: Promise<T>): Promise<T> {
      running += 1;
      void promise.then(settled, settled);
      return promise;
    },
    succeeded() {
      if (circuit !== 'closed') log.info('tracker answers again: circuit closed');
      failures = 0;
      circuit = 'closed';
    },
    failed() {
      failures += 1;
      if (circuit === 'probing' || (circuit === 'closed' && failures >= threshold)) {
        if (circuit === 'closed') log.error({ failures, cooldownMs }, 'tracker keeps failing: circuit open');
        circuit = 'open';
        openUntil = performance.now() + cooldownMs;
      }
    },
    closed: () => circuit === 'closed',
    running: () => running,
    async drain(maxWaitMs) {
      if (running === 0) return;
      const timer = sleep(maxWaitMs, undefined, { ref: false });
      await Promise.race([new Promise<void>((resolve) => drained.push(resolve)), timer]);
    },
  };
}
