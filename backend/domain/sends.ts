import type { Queryable } from '../db/pool.js';
import { capiStatusOf, type SendStatus } from './capi-status.js';

/**
 * The outbox: one send row per (subject, active pixel), created in the caller's transaction
 * together with its delivery job, so a committed conversion or visit always has its sends queued
 * and a rolled-back one has none. `backend/delivery/` takes it from there.
 */
export type SendSubject = { kind: 'conversion'; id: string; siteId: string } | { kind: 'visit'; id: string; siteId: string };

export interface CreatedSend {
  sendId: string;
  platform: string;
  pixelId: string;
}

export const DELIVER_TASK = 'deliver_send';

/** Jobs only fail when the database does (platform failures are handled by the task itself). */
const JOB_MAX_ATTEMPTS = 25;

const EVENT_ID_PREFIX = { conversion: 'cnv_', visit: 'pv_' } as const satisfies Record<SendSubject['kind'], string>;

/** The platform-facing event id: stable for a subject, so every retry is deduplicated downstream. */
export function eventIdFor(subject: SendSubject): string {
  return `${EVENT_ID_PREFIX[subject.kind]}${subject.id}`;
}

/** SQL text and the values of its parameters, which are numbered from the fragment's first one. */
export interface SqlFragment {
  text: string;
  params: unknown[];
}

/**
 * The outbox write as common table expressions, for a statement that also writes its subjects:
 * `subjects` is SQL yielding the `(id, site_id)` of the subjects that get sends (a CTE of the
 * caller's statement, or parameters), and the fragment's parameters are numbered from
 * `firstParam`. It defines `created_sends` and `send_jobs` (one row per send: `send_id`,
 * `platform`, `pixel_id`, `job_id`); the statement must read `send_jobs`, since PostgreSQL only
 * runs a CTE without a data-modifying statement when something reads it. One send per active
 * pixel (at most one per subject and pixel, however often this runs), each with its job, in the
 * statement's transaction.
 */
export function sendsCte(kind: SendSubject['kind'], subjects: string, firstParam: number): SqlFragment {
  const column = kind === 'conversion' ? 'conversion_id' : 'visit_id';
  const [prefix, task, attempts] = [firstParam, firstParam + 1, firstParam + 2].map((n) => `$${n}`);
  return {
    text: `created_sends AS (
       INSERT INTO sends (${column}, pixel_id, platform, event_id)
       SELECT s.id, p.id, p.platform, ${prefix}::text || s.id FROM (${subjects}) s JOIN pixels p ON p.site_id = s.site_id AND p.active
       ORDER BY s.id, p.created_at, p.id
       ON CONFLICT DO NOTHING
       RETURNING id, platform, pixel_id),
     send_jobs AS (
       SELECT c.id AS send_id, c.platform, c.pixel_id,
              (graphile_worker.add_job(${task}::text, json_build_object('sendId', c.id), max_attempts := ${attempts}::int, job_key := ${task}::text || ':' || c.id)).id AS job_id
       FROM created_sends c)`,
    params: [EVENT_ID_PREFIX[kind], DELIVER_TASK, JOB_MAX_ATTEMPTS],
  };
}

export async function createSends(tx: Queryable, subject: SendSubject): Promise<CreatedSend[]> {
  // One statement for the rows and their jobs: the outbox write sits on the hot path of every
  // visit and conversion, and each round trip there counts.
  const sends = sendsCte(subject.kind, 'SELECT $1::uuid AS id, $2::uuid AS site_id', 3);
  const { rows } = await tx.query<{ send_id: string; platform: string; pixel_id: string; job_id: string }>(
    `WITH ${sends.text} SELECT send_id, platform, pixel_id, job_id FROM send_jobs`,
    [subject.id, subject.siteId, ...sends.params],
  );
  return rows.map((r) => ({ sendId: r.send_id, platform: r.platform, pixelId: r.pixel_id }));
}

/** Each send's own job is keyed, so that the claim that delivers it can drop it from the queue. */
export function deliveryJobKey(sendId: string): string {
  return `${DELIVER_TASK}:${sendId}`;
}

/**
 * Queues delivery jobs in the caller's transaction (graphile-worker's add_job is plain SQL, and
 * its NOTIFY wakes a worker at commit). One job per send: whichever job of a pixel runs first
 * claims every due send of that pixel and removes the jobs of the sends it took, so a burst
 * costs a few job runs, not one per event.
 */
export async function enqueueDelivery(tx: Queryable, sends: readonly { sendId: string }[], runAt?: Date): Promise<void> {
  await tx.query(
    `SELECT graphile_worker.add_job($1, json_build_object('sendId', s.id), run_at := $3::timestamptz, max_attempts := $4, job_key := $1 || ':' || s.id)
     FROM unnest($2::uuid[]) AS s(id)`,
    [DELIVER_TASK, sends.map((s) => s.sendId), runAt ?? null, JOB_MAX_ATTEMPTS],
  );
}

/** Recomputes a conversion's capiStatus from its sends, in the caller's transaction. */
export async function refreshCapiStatus(tx: Queryable, conversionId: string): Promise<SendStatus> {
  const { rows } = await tx.query<{ status: SendStatus }>('SELECT status FROM sends WHERE conversion_id = $1', [conversionId]);
  const status = capiStatusOf(rows.map((r) => r.status));
  await tx.query('UPDATE conversions SET capi_status = $2, updated_at = now() WHERE id = $1 AND capi_status <> $2', [conversionId, status]);
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

/** Row locks on conversions, in id order so that concurrent lockers never deadlock. */
export async function lockConversions(tx: Queryable, conversionIds: readonly string[]): Promise<void> {
  if (conversionIds.length === 0) return;
  await tx.query('SELECT 1 FROM conversions WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE', [conversionIds]);
}
