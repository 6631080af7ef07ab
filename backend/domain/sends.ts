import type { Queryable } from '../db/pool.js';
import { capiStatusOf, type SendStatus } from './capi-status.js';

/**
 * The outbox: one send row per (subject, active pixel), created in the caller's transaction
 * together with its delivery job, so a committed conversion or visit always has its sends queued
 * and a rolled-back one has none.
 */
export type SendSubject = { kind: 'conversion'; id: string; siteId: string } | { kind: 'visit'; id: string; siteId: string };

export interface CreatedSend {
  sendId: string;
  platform: string;
  pixelId: string;
}

export const DELIVER_TASK = 'deliver_send';

/** The platform-facing event id: stable for a subject, so every retry is deduplicated downstream. */
export function eventIdFor(subject: SendSubject): string {
  return subject.kind === 'conversion' ? `cnv_${subject.id}` : `pv_${subject.id}`;
}

export async function createSends(tx: Queryable, subject: SendSubject): Promise<CreatedSend[]> {
  const column = subject.kind === 'conversion' ? 'conversion_id' : 'visit_id';
  const { rows } = await tx.query<{ id: string; platform: string; pixel_id: string }>(
    `INSERT INTO sends (${column}, pixel_id, platform, event_id)
     SELECT $1, p.id, p.platform, $3 FROM pixels p WHERE p.site_id = $2 AND p.active
     ORDER BY p.created_at, p.id
     ON CONFLICT DO NOTHING
     RETURNING id, platform, pixel_id`,
    [subject.id, subject.siteId, eventIdFor(subject)],
  );
  if (rows.length > 0) await enqueueDelivery(tx, rows.map((r) => ({ sendId: r.id, pixelId: r.pixel_id })));
  return rows.map((r) => ({ sendId: r.id, platform: r.platform, pixelId: r.pixel_id }));
}

/**
 * Queues delivery jobs in the caller's transaction (graphile-worker's add_job is plain SQL).
 * One job per send; the delivery task batches pending sends of the same pixel together.
 */
export async function enqueueDelivery(tx: Queryable, sends: { sendId: string; pixelId: string }[], runAt?: Date): Promise<void> {
  await tx.query(
    `SELECT graphile_worker.add_job($1, json_build_object('sendId', s.id), run_at := $3::timestamptz, max_attempts := 25)
     FROM unnest($2::uuid[]) AS s(id)`,
    [DELIVER_TASK, sends.map((s) => s.sendId), runAt ?? null],
  );
}

/** Recomputes a conversion's capiStatus from its sends, in the caller's transaction. */
export async function refreshCapiStatus(tx: Queryable, conversionId: string): Promise<SendStatus> {
  const { rows } = await tx.query<{ status: SendStatus }>('SELECT status FROM sends WHERE conversion_id = $1', [conversionId]);
  const status = capiStatusOf(rows.map((r) => r.status));
  await tx.query('UPDATE conversions SET capi_status = $2, updated_at = now() WHERE id = $1 AND capi_status <> $2', [conversionId, status]);
  return status;
}
