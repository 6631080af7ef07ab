import type { Queryable } from '../../db/pool.js';
import { capiStatusOf, type SendStatus } from './capi-status.js';

/**
 * The outbox: one send row per (subject, active pixel), created in the caller's transaction, so a
 * committed conversion or visit always has its sends and a rolled-back one has none. A pending
 * send row *is* the queue entry: `backend/delivery/` claims due sends straight from this table.
 * graphile-worker jobs only wake a worker up (`delivery-wake.ts`); a lost wake-up delays a send
 * by at most the worker's sweep interval and loses nothing.
 */
export type SendSubject =
  | { kind: 'conversion'; id: string; siteId: string }
  | { kind: 'visit'; id: string; siteId: string };

export interface CreatedSend {
  sendId: string;
  platform: string;
  pixelId: string;
}

const EVENT_ID_PREFIX = { conversion: 'cnv_', visit: 'pv_' } as const satisfies Record<
  SendSubject['kind'],
  string
>;

/**
 * The platform-facing event id: stable for a subject, so every retry is deduplicated downstream.
 * A conversion with an order takes the order's id instead (`capigram_order_event_id`, migration
 * 191), so that the same order reported twice is one event for the platform as well.
 */
export function eventIdFor(subject: Pick<SendSubject, 'kind' | 'id'>): string {
  return `${EVENT_ID_PREFIX[subject.kind]}${subject.id}`;
}

/** The SQL of the order event id of the conversion row `c` (NULL when it has no order). */
export function orderEventIdSql(c: string): string {
  return `capigram_order_event_id(${c}.site_id, ${c}.event_type, ${c}.custom_event_name, ${c}.order_id)`;
}

/** SQL text and the values of its parameters, which are numbered from the fragment's first one. */
export interface SqlFragment {
  text: string;
  params: unknown[];
}

/**
 * The outbox write as a common table expression, for a statement that also writes its subjects:
 * `subjects` is SQL yielding the `(id, site_id)` of the subjects that get sends (a CTE of the
 * caller's statement, or parameters). It defines `created_sends` (one row per send: `send_id`,
 * `platform`, `pixel_id`, and the subject's id as `subject_id`); the statement must read it, since PostgreSQL only runs a CTE without
 * a data-modifying statement when something reads it. One send per active pixel, at most one per
 * subject and pixel however often this runs. It takes no parameters (`params` is empty) but keeps
 * the fragment's shape so callers number theirs the same way.
 *
 * `fresh`: the subjects are rows the same statement has just inserted, so none can have a send
 * yet, and the insert skips ON CONFLICT's arbiter checks and speculative insertion (the unique
 * keys still refuse a duplicate).
 *
 * A conversion's subjects also yield `event_id`: its order's event id, or NULL for `cnv_<id>`.
 */
export function sendsCte(kind: SendSubject['kind'], subjects: string, { fresh = false } = {}): SqlFragment {
  const column = kind === 'conversion' ? 'conversion_id' : 'visit_id';
  const own = `'${EVENT_ID_PREFIX[kind]}' || s.id`;
  const eventId = kind === 'conversion' ? `COALESCE(s.event_id, ${own})` : own;
  return {
    text: `created_sends AS (
       INSERT INTO sends (${column}, pixel_id, platform, event_id)
       SELECT s.id, p.id, p.platform, ${eventId} FROM (${subjects}) s JOIN pixels p ON p.site_id = s.site_id AND p.active
       ORDER BY s.id, p.created_at, p.id${fresh ? '' : ' ON CONFLICT DO NOTHING'}
       RETURNING id AS send_id, ${column} AS subject_id, platform, pixel_id)`,
    params: [],
  };
}

/** Creates the subject's sends in the caller's transaction; wake the worker after the commit. */
export async function createSends(tx: Queryable, subject: SendSubject): Promise<CreatedSend[]> {
  const sends = sendsCte(
    subject.kind,
    subject.kind === 'conversion'
      ? `SELECT c.id, c.site_id, ${orderEventIdSql('c')} AS event_id FROM conversions c WHERE c.id = $1::uuid AND c.site_id = $2::uuid`
      : 'SELECT $1::uuid AS id, $2::uuid AS site_id',
  );
  const { rows } = await tx.query<{ send_id: string; platform: string; pixel_id: string }>(
    `WITH ${sends.text} SELECT send_id, platform, pixel_id FROM created_sends`,
    [subject.id, subject.siteId, ...sends.params],
  );
  return rows.map((r) => ({ sendId: r.send_id, platform: r.platform, pixelId: r.pixel_id }));
}

/** Recomputes a conversion's capiStatus from its sends, in the caller's transaction. */
export async function refreshCapiStatus(tx: Queryable, conversionId: string): Promise<SendStatus> {
  const { rows } = await tx.query<{ status: SendStatus }>(
    'SELECT status FROM sends WHERE conversion_id = $1',
    [conversionId],
  );
  const status = capiStatusOf(rows.map((r) => r.status));
  await tx.query(
    'UPDATE conversions SET capi_status = $2, updated_at = now() WHERE id = $1 AND capi_status <> $2',
    [conversionId, status],
  );
  return status;
}

/**
 * `refreshCapiStatus` for many conversions in two statements (a delivered batch touches up to
 * 2,000). The caller must hold the conversions' row locks (`lockConversions`): without them two
 * transactions finishing sends of the same conversion on different platforms could each miss
 * the other's uncommitted status and leave a stale capiStatus behind.
 */
export async function refreshCapiStatuses(tx: Queryable, conversionIds: readonly string[]): Promise<void> {
  if (conversionIds.length === 0) return;
  const { rows } = await tx.query<{ conversion_id: string; statuses: SendStatus[] }>(
    `SELECT conversion_id, array_agg(status) AS statuses FROM sends WHERE conversion_id = ANY($1::uuid[]) GROUP BY conversion_id`,
    [conversionIds],
  );
  await tx.query(
    `UPDATE conversions c SET capi_status = u.status, updated_at = now()
     FROM unnest($1::uuid[], $2::text[]) AS u(id, status)
     WHERE c.id = u.id AND c.capi_status <> u.status`,
    [rows.map((r) => r.conversion_id), rows.map((r) => capiStatusOf(r.statuses))],
  );
}

/**
 * Row locks on conversions, in id order so that concurrent lockers never deadlock: conversions
 * come before their sends in the one lock order (docs/architecture.md#lock-order).
 */
export async function lockConversions(tx: Queryable, conversionIds: readonly string[]): Promise<void> {
  if (conversionIds.length === 0) return;
  await tx.query('SELECT 1 FROM conversions WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE', [
    conversionIds,
  ]);
}

/**
 * `lockConversions`, then the sends of those conversions, in id order: for a transaction that is
 * about to change several conversions and their sends in an order of its own (a shared event
 * transaction), so that it holds them all, taken in the one order, before it starts.
 */
export async function lockConversionsAndSends(
  tx: Queryable,
  conversionIds: readonly string[],
): Promise<void> {
  if (conversionIds.length === 0) return;
  await lockConversions(tx, conversionIds);
  await tx.query('SELECT 1 FROM sends WHERE conversion_id = ANY($1::uuid[]) ORDER BY id FOR UPDATE', [
    conversionIds,
  ]);
}

/**
 * capiStatus as SQL: `capiStatusOf` over the send statuses `status` of a group (an aggregate
 * expression for a `GROUP BY conversion_id`). The one rule in two languages, kept equal by
 * test/delivery/capi-status-sql.test.ts.
 */
export function capiStatusAggregateSql(status: string): string {
  return `CASE WHEN bool_or(${status} = 'pending') THEN 'pending'
               WHEN bool_or(${status} = 'failed') THEN 'failed'
               WHEN bool_or(${status} = 'sent') THEN 'sent'
               ELSE 'skipped' END`;
}

// ---------------------------------------------------------------------------------------------
// Delivery's writes. Every statement that changes a send lives in this module, so that a reader
// (and a row-level trigger's author) finds each change of a send's state in one place: created
// above, claimed, leased further, given its outcome, put back in the queue, re-dispatched,
// reported failed by Google's diagnostics, or cancelled with an erased person.

/** The lease's end: now plus `$2` ms, to the millisecond (so that it survives a JS Date). */
const LEASE_END_SQL = `date_trunc('milliseconds', now()) + $2::int * interval '1 millisecond'`;

/**
 * Claims up to `$3` due sends of pixel `$1`, oldest due first, for a lease of `$2` ms, and reads
 * them: `read(claimed)` is the statement's final SELECT over the CTE `claimed` (the claimed rows
 * with every column of `sends`, `next_attempt_at` being the lease's end). The due sends are a range
 * of `sends_queue` (pixel_id, queue_at), a send under lease left out by its `next_attempt_at`; the
 * claim changes no indexed column, so PostgreSQL writes it as a heap-only update. SKIP LOCKED: concurrent
 * claims of one pixel split the due sends and never wait on each other. One statement: the claim,
 * its commit and the read of what was claimed in one round trip.
 */
export function claimSendsSql(read: (claimed: string) => string): string {
  return `WITH claimed AS (
    UPDATE sends SET attempts = attempts + 1, next_attempt_at = ${LEASE_END_SQL}, in_flight = true, updated_at = now()
    WHERE id = ANY (ARRAY(
      SELECT id FROM sends
      WHERE pixel_id = $1 AND status = 'pending' AND queue_at <= now() AND next_attempt_at <= now()
      ORDER BY queue_at LIMIT $3
      FOR UPDATE SKIP LOCKED))
    RETURNING *)
  ${read('claimed')}`;
}

/**
 * Moves the lease of the claimed sends `sendIds` that are still under lease `leaseUntil` to
 * `leaseMs` from now; those whose lease is no longer ours are left out. Locked in id order, as
 * every locker of several sends takes them (docs/architecture.md#lock-order).
 */
export async function extendSendLease(
  db: Queryable,
  sendIds: readonly string[],
  leaseUntil: Date,
  leaseMs: number,
): Promise<{ id: string; lease_until: Date }[]> {
  const { rows } = await db.query<{ id: string; lease_until: Date }>(
    `UPDATE sends SET next_attempt_at = ${LEASE_END_SQL}, updated_at = now()
     WHERE id IN (SELECT id FROM sends WHERE id = ANY($1::uuid[]) AND status = 'pending' AND next_attempt_at = $3 ORDER BY id FOR UPDATE)
     RETURNING id, next_attempt_at AS lease_until`,
    [sendIds, leaseMs, leaseUntil],
  );
  return rows;
}

/** One send's outcome as the outcome statement takes it. */
export interface OutcomeInput {
  id: string;
  /** `sent`, `failed`, `skipped`, or `retry` (pending again after `delay_ms`). */
  kind: 'sent' | 'failed' | 'skipped' | 'retry';
  /** The error (failed, retry) or the skip reason (skipped). */
  error: string | null;
  delay_ms: number;
}

/** A row of the outcome statement: a send it wrote. */
export interface OutcomeRow {
  id: string;
  created_at: Date;
}

const OUTCOMES_SQL = `
  WITH o AS MATERIALIZED (SELECT * FROM jsonb_to_recordset($1::jsonb) AS o(id uuid, kind text, error text, delay_ms int)),
  written AS (
    UPDATE sends s SET
      status = CASE o.kind WHEN 'retry' THEN 'pending' ELSE o.kind END,
      sent_at = CASE WHEN o.kind = 'sent' THEN now() ELSE s.sent_at END,
      response_summary = CASE WHEN o.kind = 'sent' THEN $2::jsonb ELSE s.response_summary END,
      last_error = CASE WHEN o.kind IN ('retry', 'failed') THEN o.error WHEN o.kind = 'sent' THEN NULL ELSE s.last_error END,
      skip_reason = CASE WHEN o.kind = 'skipped' THEN o.error END,
      -- a skipped send was never put to the platform: its claim was no attempt
      attempts = CASE WHEN o.kind = 'skipped' THEN s.attempts - 1 ELSE s.attempts END,
      next_attempt_at = CASE WHEN o.kind = 'retry' THEN now() + o.delay_ms * interval '1 millisecond' ELSE s.next_attempt_at END,
      queue_at = CASE WHEN o.kind = 'retry' THEN now() + o.delay_ms * interval '1 millisecond' ELSE s.queue_at END,
      in_flight = false,
      updated_at = now()
    FROM o WHERE s.id = o.id AND s.status = 'pending' AND s.next_attempt_at = $3
    RETURNING s.id, s.conversion_id, s.status, s.created_at),
  statuses AS (
    SELECT x.conversion_id, ${capiStatusAggregateSql('COALESCE(w.status, x.status)')} AS status
    FROM sends x LEFT JOIN written w ON w.id = x.id
    WHERE x.conversion_id IN (SELECT conversion_id FROM written WHERE conversion_id IS NOT NULL)
    GROUP BY x.conversion_id),
  conversion AS (
    UPDATE conversions c SET capi_status = st.status, updated_at = now()
    FROM statuses st WHERE c.id = st.conversion_id AND c.capi_status <> st.status
    RETURNING c.id),
  retry AS (
    SELECT graphile_worker.add_job($4::text, '{}'::json, run_at := now() + d.delay_ms * interval '1 millisecond',
                                   max_attempts := $5::int, flags := $6::text[])
    FROM (SELECT DISTINCT o.delay_ms FROM o JOIN written w ON w.id = o.id WHERE o.kind = 'retry') d)
  SELECT w.id, w.created_at, (SELECT count(*) FROM conversion)::int AS conversions, (SELECT count(*) FROM retry)::int AS retries
  FROM written w`;

/**
 * The outcomes of a claim's sends as one statement: the sends still under lease `leaseUntil` get
 * theirs (any other is left alone), their conversions' capiStatus follows from all their sends,
 * and one wake-up job (`wakeTask`, with `wakeFlags`) is queued per distinct retry time, so that a
 * retry does not wait for the sweep. PostgreSQL reads the other sends of those conversions in the
 * statement's snapshot: the caller must have locked the conversions in an earlier statement of
 * the same transaction (`lockConversionsSql`), so that the snapshot holds every sibling's
 * committed state and no other writer changes one meanwhile. Each changed send and conversion is
 * an UPDATE of its row, so row-level triggers see every change.
 */
export function outcomesStatement(
  outcomes: readonly OutcomeInput[],
  responseSummary: unknown,
  leaseUntil: Date,
  wake: { task: string; maxAttempts: number; flags: readonly string[] },
): { name: string; sql: string; values: unknown[] } {
  return {
    name: 'capigram_send_outcomes',
    sql: OUTCOMES_SQL,
    values: [
      // As JSON text: the driver would send a bare array as a PostgreSQL array, not as jsonb.
      JSON.stringify(outcomes),
      responseSummary === undefined ? null : JSON.stringify(responseSummary),
      leaseUntil,
      wake.task,
      wake.maxAttempts,
      `{${wake.flags.join(',')}}`,
    ],
  };
}

/** `lockConversions` as a statement, for a caller that sends it with others in one round trip. */
export function lockConversionsStatement(conversionIds: readonly string[]): {
  name: string;
  sql: string;
  values: unknown[];
} {
  return {
    name: 'capigram_lock_conversions',
    sql: 'SELECT 1 FROM conversions WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE',
    values: [`{${conversionIds.join(',')}}`],
  };
}

const REQUEUE = `SET status = 'pending', attempts = 0, skip_reason = NULL, next_attempt_at = now(), queue_at = now(), in_flight = false, updated_at = now()`;

/**
 * Puts failed or skipped sends back in the queue with a fresh attempt budget, due now (`sends
 * retry`); `onlyFailed` leaves the skipped ones. The caller holds their conversions' locks and
 * refreshes their capiStatus. Returns the conversions of the sends put back.
 */
export async function requeueSends(
  tx: Queryable,
  sendIds: readonly string[],
  onlyFailed: boolean,
): Promise<{ conversion_id: string | null }[]> {
  const { rows } = await tx.query<{ conversion_id: string | null }>(
    `UPDATE sends ${REQUEUE} WHERE id = ANY($1::uuid[]) AND status IN ${onlyFailed ? `('failed')` : `('failed', 'skipped')`}
     RETURNING conversion_id`,
    [sendIds],
  );
  return rows;
}

/**
 * A conversion's failed and skipped sends to still-active pixels back to pending, due now, with a
 * fresh budget and their error cleared (same event id, so a platform that did get one
 * deduplicates it). The caller holds the conversion's lock.
 */
export async function redispatchSends(tx: Queryable, conversionId: string): Promise<void> {
  await tx.query(
    `UPDATE sends s SET status = 'pending', attempts = 0, last_error = NULL, skip_reason = NULL, next_attempt_at = now(), queue_at = now(), in_flight = false, updated_at = now()
     FROM pixels p
     WHERE s.conversion_id = $1 AND s.status IN ('failed', 'skipped') AND p.id = s.pixel_id AND p.active`,
    [conversionId],
  );
}

/** Delivered sends a platform rejected afterwards (Google's diagnostics): failed, with its reason. */
export async function failDeliveredSends(
  tx: Queryable,
  sendIds: readonly string[],
  error: string,
): Promise<void> {
  await tx.query(
    `UPDATE sends SET status = 'failed', last_error = $2, updated_at = now()
     WHERE id = ANY($1::uuid[]) AND status = 'sent'`,
    [sendIds, error],
  );
}

/** A note on delivered sends' answer (Google's diagnostics of a partly failed request). */
export async function noteDeliveredSends(
  tx: Queryable,
  sendIds: readonly string[],
  note: string,
): Promise<void> {
  await tx.query(
    `UPDATE sends SET response_summary = COALESCE(response_summary, '{}'::jsonb) || jsonb_build_object('diagnostics', $2::text), updated_at = now()
     WHERE id = ANY($1::uuid[]) AND status = 'sent'`,
    [sendIds, note],
  );
}

/**
 * The sends of an erased person's conversions and visits that were not delivered: skipped with
 * `reason`, never to be sent. The caller holds the locks of the conversions and then the sends.
 */
export async function cancelSends(
  tx: Queryable,
  conversionIds: readonly string[],
  visitIds: readonly string[],
  reason: string,
): Promise<number> {
  const cancelled = await tx.query(
    `UPDATE sends SET status = 'skipped', skip_reason = $3, in_flight = false, updated_at = now()
     WHERE (conversion_id = ANY($1::uuid[]) OR visit_id = ANY($2::uuid[])) AND status IN ('pending', 'failed')`,
    [conversionIds, visitIds, reason],
  );
  return cancelled.rowCount ?? 0;
}

/**
 * Skips the pending sends of conversions that must not go out (an unvalued Stars purchase), each
 * with its reason, as one statement for a caller that sends it in the transaction creating them.
 */
export function skipPendingSendsStatement(items: readonly { conversionId: string; reason: string }[]): {
  name: string;
  sql: string;
  values: unknown[];
} {
  return {
    name: 'capigram_skip_pending_sends',
    sql: `UPDATE sends s SET status = 'skipped', skip_reason = i.reason, updated_at = now()
            FROM jsonb_to_recordset($1::jsonb) AS i(conversion_id uuid, reason text)
           WHERE s.conversion_id = i.conversion_id AND s.status = 'pending'`,
    values: [JSON.stringify(items.map((i) => ({ conversion_id: i.conversionId, reason: i.reason })))],
  };
}
