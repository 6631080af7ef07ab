import type { Pool } from '../../db/pool.js';
import { CONVERSION_RAW_FIELDS, ENTRY_CLICK_RAW_FIELDS, VISIT_RAW_FIELDS, anyHeld, setClause, type ClearedFields } from './fields.js';

/**
 * Retention (`RETENTION_DAYS`, docs/data-lifecycle.md): raw identifiers of rows older than the
 * limit are cleared, the rows themselves stay (counts, reports, attribution history); finished
 * sends older than the limit are deleted, and so are entry clicks no Telegram user ever brought
 * back (nothing reads them but a late /start, and a payload that old is as good as unknown).
 *
 * A walk clears one table in time order, in batches of `batch` rows, each its own short
 * transaction that also records how far the walk got (`retention_progress`): a restart, even in
 * the middle of a batch, loses at most that uncommitted batch and resumes after the last committed
 * one. Rows are found through a BRIN index on the time (no B-tree on the insert path) in windows
 * whose width follows the density of the rows: a window that held a full batch is narrowed to the
 * span that batch covered, one that did not is doubled. Nothing waits long for a lock: a row
 * locked by someone else for `LOCK_TIMEOUT` ends the run, and the next run takes it up.
 */
export interface RetentionWalk {
  /** Key in `retention_progress`. */
  target: string;
  table: string;
  time: string;
  /** What becomes of an old row: its fields cleared, or (rows matching `where`, on the alias `t`) the row deleted. */
  action: { clear: ClearedFields } | { delete: string };
}

export const RETENTION_WALKS: readonly RetentionWalk[] = [
  { target: 'visits', table: 'visits', time: 'created_at', action: { clear: VISIT_RAW_FIELDS } },
  { target: 'conversions', table: 'conversions', time: 'received_at', action: { clear: CONVERSION_RAW_FIELDS } },
  // Unused clicks go first, so that the payload walk after it finds only the used ones.
  { target: 'entry_clicks_unused', table: 'entry_clicks', time: 'created_at', action: { delete: 't.used_by IS NULL' } },
  { target: 'entry_clicks', table: 'entry_clicks', time: 'created_at', action: { clear: ENTRY_CLICK_RAW_FIELDS } },
];

/** Sends in these states are finished: nothing will change them but a retry by hand. */
const FINISHED_SENDS = ['sent', 'failed', 'skipped'] as const;

export const RETENTION_BATCH = 1_000;
const LOCK_TIMEOUT = '5s';
const FIRST_WINDOW_MS = 3_600_000;
const MIN_WINDOW_MS = 1_000;
const DAY_MS = 86_400_000;

export interface RetentionOptions {
  days: number;
  batch?: number;
  /** Stop starting batches after this instant (ms); the next run continues. */
  until?: number;
}

export interface RetentionResult {
  /** Rows cleared (or, for a deleting walk, deleted), per walk, and finished sends deleted. */
  cleared: Record<string, number>;
  sendsDeleted: number;
  /** False when the run stopped early (its time was up, or a row stayed locked). */
  done: boolean;
}

export async function runRetention(pool: Pool, now: Date, opts: RetentionOptions): Promise<RetentionResult> {
  const cutoff = new Date(now.getTime() - opts.days * DAY_MS);
  const batch = opts.batch ?? RETENTION_BATCH;
  const until = opts.until ?? Number.POSITIVE_INFINITY;
  const result: RetentionResult = { cleared: {}, sendsDeleted: 0, done: true };
  try {
    for (const walk of RETENTION_WALKS) {
      const out = await walkTable(pool, walk, cutoff, batch, until);
      result.cleared[walk.target] = out.cleared;
      if (!out.done) return { ...result, done: false };
    }
    const sends = await deleteFinishedSends(pool, cutoff, batch, until);
    result.sendsDeleted = sends.deleted;
    result.done = sends.done;
    return result;
  } catch (err) {
    if ((err as { code?: string }).code === '55P03') return { ...result, done: false }; // lock_timeout
    throw err;
  }
}

async function walkTable(pool: Pool, w: RetentionWalk, cutoff: Date, batch: number, until: number): Promise<{ cleared: number; done: boolean }> {
  const { rows } = await pool.query<{ done_before: Date }>('SELECT done_before FROM retention_progress WHERE target = $1', [w.target]);
  let lo = rows[0]?.done_before.getTime() ?? 0;
  let width = FIRST_WINDOW_MS;
  let cleared = 0;
  const end = cutoff.getTime();
  const [pending, change] =
    'clear' in w.action
      ? [anyHeld(w.action.clear, 't'), `UPDATE ${w.table} x SET ${setClause(w.action.clear)} FROM batch WHERE x.id = batch.id RETURNING batch.at`]
      : [`(${w.action.delete})`, `DELETE FROM ${w.table} x USING batch WHERE x.id = batch.id RETURNING batch.at`];
  const sql = `WITH batch AS (
      SELECT id, ${w.time} AS at FROM ${w.table} t
      WHERE ${w.time} >= $1 AND ${w.time} < $2 AND ${pending}
      ORDER BY ${w.time} LIMIT $3 FOR UPDATE
    ), done AS (
      ${change}
    ), progress AS (
      INSERT INTO retention_progress (target, done_before)
      SELECT $4, CASE WHEN count(*) < $3 THEN $2 ELSE max(at) END FROM done
      ON CONFLICT (target) DO UPDATE SET done_before = EXCLUDED.done_before
      RETURNING done_before
    )
    SELECT (SELECT count(*)::int FROM done) AS n, done_before FROM progress`;
  while (lo < end) {
    if (Date.now() >= until) return { cleared, done: false };
    const hi = Math.min(lo + width, end);
    const client = await pool.connect();
    let n: number;
    let doneBefore: Date;
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'`);
      const res = await client.query<{ n: number; done_before: Date }>(sql, [new Date(lo), new Date(hi), batch, w.target]);
      await client.query('COMMIT');
      ({ n, done_before: doneBefore } = res.rows[0]!);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
    cleared += n;
    const next = doneBefore.getTime();
    width = n < batch ? Math.min(width * 2, Number.MAX_SAFE_INTEGER / 4) : Math.max(next - lo, MIN_WINDOW_MS);
    lo = next;
  }
  return { cleared, done: true };
}

async function deleteFinishedSends(pool: Pool, cutoff: Date, batch: number, until: number): Promise<{ deleted: number; done: boolean }> {
  let deleted = 0;
  for (const status of FINISHED_SENDS) {
    for (;;) {
      if (Date.now() >= until) return { deleted, done: false };
      // The oldest first along sends_status (status, created_at); each batch its own statement.
      const res = await pool.query(
        `DELETE FROM sends WHERE id IN (SELECT id FROM sends WHERE status = $1 AND created_at < $2 ORDER BY created_at LIMIT $3 FOR UPDATE SKIP LOCKED)`,
        [status, cutoff, batch],
      );
      deleted += res.rowCount ?? 0;
      if ((res.rowCount ?? 0) < batch) break;
    }
  }
  return { deleted, done: true };
}
