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
