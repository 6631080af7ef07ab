import type { Queryable } from '../db/pool.js';
import { DELIVER_TASK } from '../domain/sends.js';

/**
 * The backstop behind the lease jobs. A worker that dies after graphile-worker locked a job but
 * before its claim committed leaves that job locked for graphile-worker's 4 hours, and the send
 * with no lease job. Any later job of the same pixel would deliver it; this sweep makes sure one
 * exists: every pixel with a pending send overdue by more than `overdueMs` gets one job (keyed
 * per pixel, so repeated sweeps never pile up jobs).
 */
export const RECOVER_TASK = 'deliver_recover';

/** Every minute, on whichever worker is free; jobKey keeps one sweep queued at a time. */
export const RECOVER_CRONTAB = `* * * * * ${RECOVER_TASK} ?max=1&jobKey=${RECOVER_TASK}&jobKeyMode=replace`;

export async function requeueOverdue(db: Queryable, overdueMs: number): Promise<number> {
  const { rowCount } = await db.query(
    `SELECT graphile_worker.add_job($1, json_build_object('sendId', d.id), job_key := 'deliver_recover:' || d.pixel_id, max_attempts := 25)
     FROM (SELECT DISTINCT ON (pixel_id) pixel_id, id FROM sends
           WHERE status = 'pending' AND next_attempt_at < now() - $2::int * interval '1 millisecond'
           ORDER BY pixel_id, next_attempt_at) AS d`,
    [DELIVER_TASK, overdueMs],
  );
  return rowCount ?? 0;
}
