/**
 * How the sandbox Telegram posts updates to a webhook, as the Bot API server does
 * (tdlib/telegram-bot-api, WebhookActor.cpp and Client.cpp):
 *
 * - Per-user queues. Each update goes into a queue by its webhook queue id, and a queue's next
 *   update is sent only once the one before it was answered 2xx or dropped: a private chat's
 *   messages queue by chat id (`Client::process_new_message_queue` → `add_message_update(…,
 *   chat_id)`), `chat_member` and `chat_join_request` by the user's id (`add_update_chat_member`,
 *   `add_update_chat_join_request`: `user_id + (6 << 33)`). Different queues do not wait for each
 *   other, so a user's `/start` and that user's join may arrive in either order.
 * - Resends. An answer outside 200–299, a closed connection or a timeout is an error
 *   (`WebhookActor::handle`) and the update is sent again
 *   (`WebhookActor::on_update_error`): at once after the first failure, then after 2, 4, 8 … s,
 *   the delay doubling up to a random 60–120 s (`WEBHOOK_MAX_RESEND_TIMEOUT` = 60); a
 *   `Retry-After` header in the answer is waited instead (clamped to 3600 s).
 * - One day. An update lives until its date + 86400 s (`add_message_update`,
 *   `add_update_chat_member`: `left_time = date + 86400 - now`); one older is never queued, and
 *   one whose next try would fall past that is dropped (`on_update_error`: "Drop update").
 * - getWebhookInfo's `pending_update_count` counts what is queued (`get_pending_update_count`),
 *   and `last_error_date`/`last_error_message` tell the last failure, worded as the server words
 *   it ("Wrong response from the webhook: 401 Unauthorized", `WebhookActor::handle`).
 *
 * Delays are in seconds times `secondMs` (1000 in the demo; a test sets it tiny), and time comes
 * from `now`, so tests never wait for a real backoff or a real day.
 */

export interface DeliveryTarget {
  url: string;
  secret?: string;
}

export interface DeliveryOptions {
  /** Where updates go now (the webhook may change between tries); null when none is set. */
  target: () => DeliveryTarget | null;
  /** Milliseconds per Telegram second of backoff. Default 1000. */
  secondMs?: number;
  /** The clock (ms since the epoch). Default Date.now. */
  now?: () => number;
  /** How long one POST may take before it counts as failed (ms). Default 10000. */
  timeoutMs?: number;
  /** Told of each try: the HTTP status (or null for no answer) and the error text, if any. */
  onTry?: (t: {
    updateId: number;
    type: string;
    status: number | null;
    error: string | null;
    tries: number;
  }) => void;
  /** Told when an update is dropped (too old to send or to retry). */
  onDrop?: (t: { updateId: number; type: string; reason: string }) => void;
}

interface Queued {
  update: Record<string, unknown> & { update_id: number };
  type: string;
  /** Unix seconds after which the update is dropped. */
  expiresAt: number;
  /** Telegram's per-update backoff state (`Update::delay_`, `fail_count_`). */
  delay: number;
  fails: number;
  /** Resolves with the first try's outcome (what the demo page shows). */
  first?: (outcome: string) => void;
}

export const DAY_SECONDS = 86_400;
const MAX_RETRY_AFTER = 3_600;
const MAX_RESEND_TIMEOUT = 60;

export class WebhookDelivery {
  private readonly queues = new Map<string, Queued[]>();
  private readonly busy = new Set<string>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private lastError: { date: number; message: string } | null = null;
  private readonly secondMs: number;
  private readonly now: () => number;
  private readonly timeoutMs: number;

  constructor(private readonly opts: DeliveryOptions) {
    this.secondMs = opts.secondMs ?? 1000;
    this.now = opts.now ?? Date.now;
    this.timeoutMs = opts.timeoutMs ?? 10_000;
  }

  /**
   * Queues an update under `queueId` (see the queue rules above) and starts its queue. `date` is
   * the update's own date (unix s): an update a day old is never queued. Resolves with the first
   * try's outcome (`HTTP 200`, `HTTP 401 (will be resent)`, `unreachable (will be resent)`, …) or,
   * when an earlier update of the same queue still waits, `queued behind N`.
   */
  enqueue(queueId: string, update: Queued['update'], date: number): Promise<string> {
    const type = Object.keys(update).find((k) => k !== 'update_id') ?? 'update';
    const expiresAt = date + DAY_SECONDS;
    if (expiresAt <= this.nowSec()) {
      this.opts.onDrop?.({ updateId: update.update_id, type, reason: 'older than a day: never sent' });
      return Promise.resolve('dropped: older than a day');
    }
    const queue = this.queues.get(queueId) ?? [];
    this.queues.set(queueId, queue);
    const ahead = queue.length;
    return new Promise((resolve) => {
      queue.push({ update, type, expiresAt, delay: 1, fails: 0, first: resolve });
      if (ahead > 0) {
        queue.at(-1)!.first = undefined;
        resolve(`queued behind ${ahead} earlier update${ahead === 1 ? '' : 's'} of this user`);
      }
      if (!this.busy.has(queueId)) this.schedule(queueId, 0);
    });
  }

  /** Updates not yet answered 2xx nor dropped (getWebhookInfo's pending_update_count). */
  pendingCount(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.length;
    return n;
  }

  /** getWebhookInfo's last_error_date and last_error_message, when a try failed. */
  lastErrorInfo(): { last_error_date: number; last_error_message: string } | Record<string, never> {
    return this.lastError === null
      ? {}
      : { last_error_date: this.lastError.date, last_error_message: this.lastError.message };
  }

  /** A new webhook starts with no error to report (`Client::do_set_webhook` resets it). */
  resetError(): void {
    this.lastError = null;
  }

  /** drop_pending_updates: every queued update is forgotten (`Client::clear_tqueue`). */
  dropPending(): void {
    this.queues.clear();
  }

  /** Stops every pending resend (the sandbox is closing). */
  stop(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.queues.clear();
  }

  private nowSec(): number {
    return Math.floor(this.now() / 1000);
  }

  private schedule(queueId: string, delaySec: number): void {
    this.busy.add(queueId);
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      void this.sendHead(queueId);
    }, delaySec * this.secondMs);
    this.timers.add(timer);
  }

  private async sendHead(queueId: string): Promise<void> {
    const queue = this.queues.get(queueId);
    const head = queue?.[0];
    if (!queue || !head) {
      this.busy.delete(queueId);
      this.queues.delete(queueId);
      return;
    }
    const { status, error, retryAfter } = await this.post(head);
    this.opts.onTry?.({
      updateId: head.update.update_id,
      type: head.type,
      status,
      error,
      tries: head.fails + 1,
    });
    if (this.queues.get(queueId) !== queue) return; // dropped meanwhile (drop_pending_updates)
    if (error === null) {
      head.first?.(`HTTP ${status}`);
      queue.shift();
      this.schedule(queueId, 0);
      return;
    }
    this.lastError = { date: this.nowSec(), message: error };
    // WebhookActor::on_update_error: retry_after if given, else at once after the first failure,
    // then a doubling delay capped at a random 60–120 s.
    let nextDelay = head.delay;
    let effective = Math.min(Math.max(retryAfter, 0), MAX_RETRY_AFTER);
    if (effective === 0 && head.fails > 0) {
      const cap = MAX_RESEND_TIMEOUT + Math.floor(Math.random() * (MAX_RESEND_TIMEOUT + 1));
      nextDelay = Math.min(cap, nextDelay * 2);
      effective = nextDelay;
    }
    head.first?.(`${status === null ? 'unreachable' : `HTTP ${status}`} (will be resent)`);
    head.first = undefined;
    if (this.nowSec() + effective > head.expiresAt) {
      queue.shift();
      this.opts.onDrop?.({ updateId: head.update.update_id, type: head.type, reason: error });
      this.schedule(queueId, 0);
      return;
    }
    head.delay = nextDelay;
    head.fails++;
    this.schedule(queueId, effective);
  }

  private async post(
    q: Queued,
  ): Promise<{ status: number | null; error: string | null; retryAfter: number }> {
    const target = this.opts.target();
    if (target === null) return { status: null, error: 'Webhook is not set', retryAfter: 0 };
    try {
      const res = await fetch(target.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(target.secret ? { 'x-telegram-bot-api-secret-token': target.secret } : {}),
        },
        body: JSON.stringify(q.update),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      await res.arrayBuffer().catch(() => undefined);
      if (res.status >= 200 && res.status <= 299) return { status: res.status, error: null, retryAfter: 0 };
      return {
        status: res.status,
        error: `Wrong response from the webhook: ${res.status} ${res.statusText}`.trimEnd(),
        retryAfter: retryAfterOf(res),
      };
    } catch (err) {
      const timedOut = (err as Error).name === 'TimeoutError';
      return {
        status: null,
        error: timedOut ? 'Read timeout expired' : 'Connection refused',
        retryAfter: 0,
      };
    }
  }
}

/**
 * `HttpQuery::get_retry_after` (tdlib td/tdnet): a webhook may ask for a pause with a
 * `Retry-After` header of whole seconds; anything else in it counts as none.
 */
function retryAfterOf(res: Response): number {
  const value = res.headers.get('retry-after') ?? '';
  return /^\d+$/.test(value.trim()) ? Number(value.trim()) : 0;
}
