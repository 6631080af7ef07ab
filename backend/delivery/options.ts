/**
 * Knobs of the delivery pipeline. The defaults are the production values; tests and benchmarks
 * pass a few overrides (shorter timeouts, `backoffScale`) to the task list.
 */
export interface DeliveryOptions {
  /** Per platform request, answer included. Meta advises 1.5 s. */
  requestTimeoutMs: number;
  /**
   * How long a claimed send stays reserved for the worker delivering it. A worker killed
   * mid-request leaves its sends pending; they are due again when the lease ends, and the next
   * sweep (every poll interval) wakes a worker for them. Extended while a long isolation is still
   * going. It must hold a request and `outcomeRoomMs` after it: see there.
   */
  leaseMs: number;
  /**
   * The time the lease leaves, after a request's timeout, for writing what the platform answered:
   * a database away for that long (a restart, a failover, a network cut) only delays the write,
   * and the events the platform accepted are not sent again. A request is not started on a lease
   * with less room left: the lease is extended first.
   */
  outcomeRoomMs: number;
  /** First retry delay; doubles with every attempt, up to `maxDelayMs`, with jitter. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** A send that failed transiently this many times is marked failed with its last error. */
  maxAttempts: number;
  /** …and so is one whose next attempt would come later than this after the send was created. */
  maxAgeMs: number;
  /** Multiplies every delay, platform-requested ones included. 1 in production; tests use less. */
  backoffScale: number;
  /**
   * How long after a Data Manager API request its diagnostics (`requestStatus:retrieve`) are first
   * asked for; later checks wait twice as long each time.
   */
  googleStatusDelayMs: number;
  /** Caps the batch below the platform's own limit (the benchmark's one-event-per-request run). */
  maxBatch?: number;
}

export const DEFAULT_DELIVERY_OPTIONS: Readonly<DeliveryOptions> = {
  requestTimeoutMs: 1500,
  // A request (1.5 s), an outage of up to 30 s while its answer waits to be written, and the
  // reconnection and backoff after it.
  leaseMs: 40_000,
  outcomeRoomMs: 30_000,
  baseDelayMs: 1000,
  maxDelayMs: 30 * 60_000,
  maxAttempts: 20,
  maxAgeMs: 24 * 3600_000,
  backoffScale: 1,
  googleStatusDelayMs: 2 * 60_000,
};

export function deliveryOptions(overrides: Partial<DeliveryOptions> = {}): DeliveryOptions {
  return { ...DEFAULT_DELIVERY_OPTIONS, ...overrides };
}
