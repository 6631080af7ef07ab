import { z } from 'zod';
import type { SecretBox } from '../../crypto/secret-box.js';
import type { Queryable } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { describePostFailure, postOutbound } from '../../outbound/post.js';
import { runEvery } from '../../periodic.js';
import { forwardOrderKey } from './forward-order.js';

/**
 * Update forwarding: every update Capigram receives for a bot with a forward URL is handed on to
 * that URL, after Capigram handled it, as the same JSON Telegram sent, with the operator's secret
 * in `X-Telegram-Bot-Api-Secret-Token` (so a bot backend written for Telegram's webhook takes it
 * unchanged).
 *
 * `telegram_forwards` is the outbox: a row is written in the transaction that records the update,
 * so a forward exists exactly when the update was handled, and a resent update (same update_id) is
 * not forwarded twice. The `telegram_forward_updates` job of a (bot, user) sends that user's rows
 * one by one, oldest first, under a session advisory lock, so two jobs never send one user's
 * updates side by side; the lock dies with a crashed worker's connection, and the sweep
 * (`sweepForwards`) queues a new job for rows nobody is taking care of. A non-2xx answer or a
 * network failure puts the row off by a backoff that grows as Telegram's own retries do
 * (e^attempts seconds, at most 6 hours), and the user's later rows wait behind it: at least once,
 * in order per user. The wait is kept on the row, not in the job, so that the user's next update
 * (which queues a job) does not cut it short. A row older than Telegram keeps an update (24 hours)
 * is dropped, as Telegram drops it.
 */
export const FORWARD_TASK = 'telegram_forward_updates';
/** Attempts of the job itself: it fails only when the database does (or another job holds the user's lock). */
const FORWARD_MAX_ATTEMPTS = 25;

/** The wait after a forward's `attempts`-th refusal: e^attempts seconds, at most 6 hours. */
export function forwardBackoffMs(attempts: number): number {
  return Math.round(Math.exp(Math.min(Math.max(attempts, 1), 10)) * 1000);
}
const FORWARD_MAX_AGE_MS = 24 * 3600_000;
const FORWARD_TIMEOUT_MS = 10_000;

const ForwardPayload = z.object({ botId: z.string().uuid(), orderKey: z.string().min(1).max(100) });
export type ForwardPayload = z.infer<typeof ForwardPayload>;

function forwardJobKey(p: ForwardPayload): string {
  return `${FORWARD_TASK}:${p.botId}:${p.orderKey}`;
}

// Like the delivery wake-up: a job of the key that is waiting (even out a failure's backoff) will
// send the new row too, and is left alone, so a stream of updates does not cut an outage's backoff
// short. Otherwise (none, used up, or already running) one is added.
const WAKE_SQL = `SELECT graphile_worker.add_job($1::text, $2::json, job_key := $3::text, job_key_mode := 'replace', max_attempts := $4::int)
  WHERE NOT EXISTS (SELECT 1 FROM graphile_worker.jobs WHERE key = $3::text AND locked_at IS NULL AND attempts < max_attempts)`;

/** The advisory lock's name; `sweepForwards` computes the same in SQL. */
function forwardLockKey(p: ForwardPayload): string {
  return `capigram:forward:${p.botId}:${p.orderKey}`;
}

async function wake(db: Queryable, p: ForwardPayload): Promise<void> {
  await db.query(WAKE_SQL, [FORWARD_TASK, JSON.stringify(p), forwardJobKey(p), FORWARD_MAX_ATTEMPTS]);
}

/** Queues the (bot, user)'s job for when its first row is due again (replacing a sooner one). */
async function wakeAt(db: Queryable, p: ForwardPayload, at: Date): Promise<void> {
  await db.query(
    `SELECT graphile_worker.add_job($1::text, $2::json, job_key := $3::text, job_key_mode := 'replace', max_attempts := $4::int, run_at := $5::timestamptz)`,
    [FORWARD_TASK, JSON.stringify(p), forwardJobKey(p), FORWARD_MAX_ATTEMPTS, at],
  );
}

/**
 * Records the forward of one update, in the webhook's transaction, if the bot forwards. `raw` is
 * the parsed body (for the order key); `body` the text as received, which is what is sent.
 */
export async function enqueueForward(
  tx: Queryable,
  box: SecretBox,
  botId: string,
  updateId: number,
  body: string,
  raw: unknown,
): Promise<boolean> {
  const orderKey = forwardOrderKey(raw);
  // Telegram posts updates over several connections at once: two of one user's may be handled
  // side by side. Taken before the row's id is drawn and held until commit, this lock makes ids
  // follow commit order within a user, so the sender never sees a later row before an earlier one
  // has committed.
  await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [
    `capigram:forward-enqueue:${botId}:${orderKey}`,
  ]);
  // Sealed: the update carries names and texts (see migration 170); kept only until it is sent.
  const { rowCount } = await tx.query(
    `INSERT INTO telegram_forwards (bot_id, order_key, update_id, body_enc)
     SELECT id, $2, $3, $4 FROM bots WHERE id = $1 AND forward_url IS NOT NULL
     ON CONFLICT (bot_id, update_id) DO NOTHING`,
    [botId, orderKey, updateId, box.seal(body)],
  );
  if (!rowCount) return false;
  await wake(tx, { botId, orderKey });
  return true;
}

export type ForwardDeps = Pick<Deps, 'pool' | 'box' | 'log' | 'now' | 'config'>;

/** How soon a job that found the (bot, user) taken by another job looks again (run_at is the database's clock: the wall clock). */
const BUSY_RETRY_MS = 1000;

/** Sends the (bot, user)'s pending forwards in order, up to the first one not taken, which is put off. */
export async function drainForwards(
  deps: ForwardDeps,
  raw: unknown,
): Promise<{ delivered: number; dropped: number; failed: number }> {
  const parsed = ForwardPayload.safeParse(raw);
  if (!parsed.success) return { delivered: 0, dropped: 0, failed: 0 };
  const p = parsed.data;
  const lockKey = forwardLockKey(p);
  const client = await deps.pool.connect();
  try {
    const { rows } = await client.query<{ ok: boolean }>(
      'SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok',
      [lockKey],
    );
    if (!rows[0]!.ok) {
      // Another job is sending them; it may be just finishing, so look again in a moment.
      await wakeAt(deps.pool, p, new Date(Date.now() + BUSY_RETRY_MS));
      return { delivered: 0, dropped: 0, failed: 0 };
    }
    try {
      return await sendPending(deps, p);
    } finally {
      await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [lockKey]);
    }
  } finally {
    client.release();
  }
}

async function sendPending(
  deps: ForwardDeps,
  p: ForwardPayload,
): Promise<{ delivered: number; dropped: number; failed: number }> {
  const { rows: bots } = await deps.pool.query<{
    forward_url: string | null;
    forward_secret_enc: string | null;
  }>('SELECT forward_url, forward_secret_enc FROM bots WHERE id = $1 AND removed_at IS NULL', [p.botId]);
  const bot = bots[0];
  const pending = `bot_id = $1 AND order_key = $2 AND delivered_at IS NULL AND dropped_at IS NULL`;
  if (!bot?.forward_url) {
    // Forwarding turned off (or the bot removed): what was waiting is not sent anywhere.
    const { rowCount } = await deps.pool.query(
      `UPDATE telegram_forwards SET dropped_at = $3, body_enc = NULL, last_error = 'forwarding turned off' WHERE ${pending}`,
      [p.botId, p.orderKey, deps.now()],
    );
    return { delivered: 0, dropped: rowCount ?? 0, failed: 0 };
  }
  const secret = bot.forward_secret_enc ? deps.box.open(bot.forward_secret_enc) : null;
  let delivered = 0;
  let dropped = 0;
  for (;;) {
    const { rows } = await deps.pool.query<{
      id: string;
      body_enc: string;
      created_at: Date;
      attempts: number;
      next_attempt_at: Date | null;
    }>(
      `SELECT id::text, body_enc, created_at, attempts, next_attempt_at FROM telegram_forwards WHERE ${pending} ORDER BY id LIMIT 1`,
      [p.botId, p.orderKey],
    );
    const row = rows[0];
    if (!row) return { delivered, dropped, failed: 0 };
    if (deps.now().getTime() - row.created_at.getTime() > FORWARD_MAX_AGE_MS) {
      await deps.pool.query(`UPDATE telegram_forwards SET dropped_at = $2, body_enc = NULL WHERE id = $1`, [
        row.id,
        deps.now(),
      ]);
      deps.log.warn({ botId: p.botId, forwardId: row.id }, 'update forward dropped: not taken for a day');
      dropped++;
      continue;
    }
    if (row.next_attempt_at !== null && row.next_attempt_at > deps.now()) {
      // Still waiting out its backoff (this job was queued by a later update of the user).
      await wakeAt(deps.pool, p, row.next_attempt_at);
      return { delivered, dropped, failed: 0 };
    }
    const failure = await post(
      bot.forward_url,
      secret,
      deps.box.open(row.body_enc),
      deps.config.OUTBOUND_ALLOW_PRIVATE,
    );
    if (failure !== null) {
      const next = new Date(deps.now().getTime() + forwardBackoffMs(row.attempts + 1));
      await deps.pool.query(
        'UPDATE telegram_forwards SET attempts = attempts + 1, last_error = $2, next_attempt_at = $3 WHERE id = $1',
        [row.id, failure, next],
      );
      await wakeAt(deps.pool, p, next);
      deps.log.info(
        { botId: p.botId, forwardId: row.id, reason: failure, retryAt: next.toISOString() },
        'update forward not taken; retried later',
      );
      return { delivered, dropped, failed: 1 };
    }
    await deps.pool.query(
      'UPDATE telegram_forwards SET attempts = attempts + 1, last_error = NULL, next_attempt_at = NULL, delivered_at = $2, body_enc = NULL WHERE id = $1',
      [row.id, deps.now()],
    );
    delivered++;
  }
}

/** One POST under the outbound rule; null when the answer was 2xx, else why not (never the secret). */
async function post(
  url: string,
  secret: string | null,
  body: string,
  allowPrivate: boolean,
): Promise<string | null> {
  try {
    // A redirect is not followed: Telegram does not follow them either, and the body would be lost on a 302.
    const res = await postOutbound(
      url,
      {
        headers: {
          'content-type': 'application/json',
          ...(secret === null ? {} : { 'x-telegram-bot-api-secret-token': secret }),
        },
        body,
        timeoutMs: FORWARD_TIMEOUT_MS,
      },
      { allowPrivate },
    );
    return res.status >= 200 && res.status < 300 ? null : `HTTP ${res.status}`;
  } catch (err) {
    return describePostFailure(err);
  }
}

/**
 * The backstop: (bot, user)s with pending forwards, no job waiting for them and nobody sending
 * them (the advisory lock is free: its worker died mid-forward, or its job used up its attempts)
 * get a job. A dead worker's job stays locked for hours in graphile-worker; its lock on the
 * database went with its connection, which is what is looked at. Idle, one probe of a partial index.
 */
async function sweepForwards(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ bot_id: string; order_key: string }>({
    // Named: planning this statement cost far more than running it (an idle probe), every sweep.
    name: 'capigram_sweep_forwards',
    text: `SELECT DISTINCT f.bot_id, f.order_key FROM telegram_forwards f
     WHERE f.delivered_at IS NULL AND f.dropped_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM graphile_worker.jobs j
                       WHERE j.key = $1 || ':' || f.bot_id || ':' || f.order_key AND j.locked_at IS NULL AND j.attempts < j.max_attempts)
       -- Due for a while: a job that has just been given the row and not yet taken its lock is left alone.
       AND COALESCE(f.next_attempt_at, f.created_at) < now() - interval '5 seconds'
       AND NOT EXISTS (SELECT 1 FROM pg_locks l, LATERAL (SELECT hashtextextended('capigram:forward:' || f.bot_id || ':' || f.order_key, 0) AS k) h
                       WHERE l.locktype = 'advisory' AND l.objsubid = 1
                         AND l.classid = ((h.k >> 32) & 4294967295)::oid AND l.objid = (h.k & 4294967295)::oid)
     LIMIT 100`,
    values: [FORWARD_TASK],
  });
  for (const r of rows) await wake(db, { botId: r.bot_id, orderKey: r.order_key });
  return rows.length;
}

/** Runs the sweep every `intervalMs` until the returned function is called. Errors are reported, never thrown. */
export function startForwardSweep(
  db: Queryable,
  intervalMs: number,
  onError: (err: unknown) => void,
): () => void {
  return runEvery(intervalMs, () => sweepForwards(db), onError);
}
