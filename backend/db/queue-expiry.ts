import { ApiError } from '../errors.js';

/** What a job waiting for a shared transaction needs for its wait to end: when it came, how to answer it. */
export interface WaitingJob {
  queuedAt: number;
  reject(error: unknown): void;
}

/**
 * Answers 503 `UNAVAILABLE` the jobs that waited longer than the wait allows, oldest first: one
 * timer, armed for the head of the queue (its owner keeps the queue in arrival order) and armed
 * again after each expiry. Shared by the business events' batcher and the visits' batcher, which
 * differ in what they batch, not in how long a caller may wait.
 */
export class QueueExpiry<J extends WaitingJob> {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** The owner's queue as it is now (the owner replaces the array as it takes batches). */
    private readonly queue: () => J[],
    private readonly waitMs: () => number,
    private readonly message: string,
  ) {}

  arm(): void {
    const waiting = this.queue();
    if (this.timer !== undefined || waiting.length === 0) return;
    const due = waiting[0]!.queuedAt + this.waitMs();
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        const queue = this.queue();
        const cutoff = performance.now() - this.waitMs();
        const kept = queue.findIndex((j) => j.queuedAt > cutoff);
        const expired = queue.splice(0, kept === -1 ? queue.length : kept);
        const error = new ApiError('UNAVAILABLE', this.message);
        for (const job of expired) job.reject(error);
        this.arm();
      },
      Math.max(0, due - performance.now()),
    );
    this.timer.unref();
  }

  /** Forgets the armed timer: the process is closing, or the wait changed (then `arm` again). */
  disarm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
