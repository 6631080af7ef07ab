import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { describePostFailure, postOutbound } from '../../outbound/post.js';
import { runEvery } from '../../periodic.js';
import { SIGNATURE_HEADER, signatureHeader } from './signature.js';

/**
 * Delivery of webhook events (recorded by the triggers of migration 199 in the transaction of
 * their fact). The `capigram_webhook_deliver` job of a (webhook, Telegram user) posts that user's
 * rows one by one in id order under a session advisory lock, so two jobs never post one lead's
 * events side by side and a lead's events never overtake each other; the lock dies with a
 * crashed worker's connection, and the sweep queues a job for rows nobody is taking care of. A
 * non-2xx answer or a network failure puts the row off by a doubling backoff (1 s, 2 s, 4 s … at
 * most an hour) and the lead's later rows wait behind it: at least once, in order per lead. A row
 * refused for a day is given up (`failed` in the delivery log; `webhook resend` queues it again).
 */
export const WEBHOOK_TASK = 'capigram_webhook_deliver';
const WEBHOOK_MAX_ATTEMPTS = 25;
export const WEBHOOK_GIVE_UP_MS = 24 * 3600_000;
const WEBHOOK_TIMEOUT_MS = 10_000;
const BUSY_RETRY_MS = 1000;

/** The wait after a delivery's `attempts`-th refusal: 2^(attempts-1) seconds, at most an hour. */
export function webhookBackoffMs(attempts: number): number {
  return Math.min(2 ** Math.min(Math.max(attempts, 1) - 1, 12) * 1000, 3600_000);
}

const Payload = z.object({ webhookId: z.string().uuid(), telegramUserId: z.string().regex(/^-?\d{1,20}$/) });
type Payload = z.infer<typeof Payload>;

const jobKey = (p: Payload) => `${WEBHOOK_TASK}:${p.webhookId}:${p.telegramUserId}`;
const lockKey = (p: Payload) => `capigram:webhook:${p.webhookId}:${p.telegramUserId}`;

async function wakeAt(db: Queryable, p: Payload, at: Date): Promise<void> {
  await db.query(
    `SELECT graphile_worker.add_job($1::text, $2::json, job_key := $3::text, job_key_mode := 'replace', max_attempts := $4::int, run_at := $5::timestamptz)`,
    [WEBHOOK_TASK, JSON.stringify(p), jobKey(p), WEBHOOK_MAX_ATTEMPTS, at],
  );
}

export type WebhookDeps = Pick<Deps, 'pool' | 'box' | 'log' | 'now' | 'config'>;
export interface DrainOutcome {
  delivered: number;
  failed: number;
  dropped: number;
}

/** Posts the (webhook, lead)'s pending events in order, up to the first one not taken, which is put off. */
export async function drainWebhookEvents(deps: WebhookDeps, raw: unknown): Promise<DrainOutcome> {
  const none = { delivered: 0, failed: 0, dropped: 0 };
  const parsed = Payload.safeParse(raw);
  if (!parsed.success) return none;
  const p = parsed.data;
  const client = await deps.pool.connect();
  try {
    const { rows } = await client.query<{ ok: boolean }>(
      'SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok',
      [lockKey(p)],
    );
    if (!rows[0]!.ok) {
      await wakeAt(deps.pool, p, new Date(Date.now() + BUSY_RETRY_MS));
      return none;
    }
    try {
      return await postPending(deps, p);
    } finally {
      await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [lockKey(p)]);
    }
  } finally {
    client.release();
  }
}

async function postPending(deps: WebhookDeps, p: Payload): Promise<DrainOutcome> {
  const out = { delivered: 0, failed: 0, dropped: 0 };
  const pending = 'webhook_id = $1 AND telegram_user_id = $2 AND delivered_at IS NULL AND dropped_at IS NULL';
  const { rows: hooks } = await deps.pool.query<{ url: string; secret_enc: string }>(
    'SELECT url, secret_enc FROM webhooks WHERE id = $1 AND removed_at IS NULL',
    [p.webhookId],
  );
  const hook = hooks[0];
  if (!hook) {
    const { rowCount } = await deps.pool.query(
      `UPDATE webhook_events SET dropped_at = $3, last_error = 'webhook removed' WHERE ${pending}`,
      [p.webhookId, p.telegramUserId, deps.now()],
    );
    return { ...out, dropped: rowCount ?? 0 };
  }
  const secret = deps.box.open(hook.secret_enc);
  for (;;) {
    const { rows } = await deps.pool.query<{
      id: string;
      event_id: string;
      type: string;
      data: unknown;
      created_at: Date;
      attempts: number;
      next_attempt_at: Date | null;
    }>(
      `SELECT id::text, event_id, type, data, created_at, attempts, next_attempt_at FROM webhook_events WHERE ${pending} ORDER BY id LIMIT 1`,
      [p.webhookId, p.telegramUserId],
    );
    const row = rows[0];
    if (!row) return out;
    const now = deps.now();
    if (row.next_attempt_at !== null && row.next_attempt_at > now) {
      await wakeAt(deps.pool, p, row.next_attempt_at);
      return out;
    }
    const body = JSON.stringify({
      id: row.event_id,
      type: row.type,
      createdAt: row.created_at.toISOString(),
      data: row.data,
    });
    let status: number | null = null;
    let failure: string | null = null;
    try {
      status = (
        await postOutbound(
          hook.url,
          {
            headers: {
              'content-type': 'application/json',
              'user-agent': 'Capigram-Webhooks/1',
              [SIGNATURE_HEADER]: signatureHeader(secret, Math.floor(now.getTime() / 1000), body),
            },
            body,
            timeoutMs: WEBHOOK_TIMEOUT_MS,
          },
          { allowPrivate: deps.config.OUTBOUND_ALLOW_PRIVATE },
        )
      ).status;
      if (status < 200 || status > 299) failure = `HTTP ${status}`;
    } catch (err) {
      failure = describePostFailure(err);
    }
    if (failure === null) {
      await deps.pool.query(
        'UPDATE webhook_events SET attempts = attempts + 1, last_status = $2, last_error = NULL, next_attempt_at = NULL, delivered_at = $3 WHERE id = $1',
        [row.id, status, deps.now()],
      );
      out.delivered++;
      continue;
    }
    if (now.getTime() - row.created_at.getTime() >= WEBHOOK_GIVE_UP_MS) {
      await deps.pool.query(
        'UPDATE webhook_events SET attempts = attempts + 1, last_status = $2, last_error = $3, next_attempt_at = NULL, dropped_at = $4 WHERE id = $1',
        [row.id, status, failure, now],
      );
      deps.log.warn(
        { webhookId: p.webhookId, deliveryId: row.id, reason: failure },
        'webhook delivery given up after a day',
      );
      out.dropped++;
      continue;
    }
    const next = new Date(now.getTime() + webhookBackoffMs(row.attempts + 1));
    await deps.pool.query(
      'UPDATE webhook_events SET attempts = attempts + 1, last_status = $2, last_error = $3, next_attempt_at = $4 WHERE id = $1',
      [row.id, status, failure, next],
    );
    await wakeAt(deps.pool, p, next);
    deps.log.info(
      { webhookId: p.webhookId, deliveryId: row.id, reason: failure, retryAt: next.toISOString() },
      'webhook delivery not taken; retried later',
    );
    out.failed++;
    return out;
  }
}

/**
 * The backstop, as for update forwards: (webhook, lead)s with pending events, no job waiting and
 * nobody posting them (the advisory lock is free: its worker died mid-post) get a job. Idle, one
 * probe of a partial index. Delivered and given-up rows older than a week leave the log.
 */
async function sweepWebhooks(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ webhook_id: string; telegram_user_id: string }>({
    // Named: planning this statement cost far more than running it (an idle probe), every sweep.
    name: 'capigram_sweep_webhooks',
    text: `SELECT DISTINCT e.webhook_id, e.telegram_user_id::text FROM webhook_events e
     WHERE e.delivered_at IS NULL AND e.dropped_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM graphile_worker.jobs j
                       WHERE j.key = $1 || ':' || e.webhook_id || ':' || e.telegram_user_id AND j.locked_at IS NULL AND j.attempts < j.max_attempts)
       AND COALESCE(e.next_attempt_at, e.created_at) < now() - interval '5 seconds'
       AND NOT EXISTS (SELECT 1 FROM pg_locks l, LATERAL (SELECT hashtextextended('capigram:webhook:' || e.webhook_id || ':' || e.telegram_user_id, 0) AS k) h
                       WHERE l.locktype = 'advisory' AND l.objsubid = 1
                         AND l.classid = ((h.k >> 32) & 4294967295)::oid AND l.objid = (h.k & 4294967295)::oid)
     LIMIT 100`,
    values: [WEBHOOK_TASK],
  });
  for (const r of rows)
    await db.query('SELECT capigram_webhook_wake($1, $2)', [r.webhook_id, r.telegram_user_id]);
  await db.query(
    `DELETE FROM webhook_events WHERE id IN (SELECT id FROM webhook_events
       WHERE created_at < now() - interval '7 days' AND (delivered_at IS NOT NULL OR dropped_at IS NOT NULL) LIMIT 1000)`,
  );
  return rows.length;
}

export function startWebhookSweep(
  db: Queryable,
  intervalMs: number,
  onError: (err: unknown) => void,
): () => void {
  return runEvery(intervalMs, () => sweepWebhooks(db), onError);
}
