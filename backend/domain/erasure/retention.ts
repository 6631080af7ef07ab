import type { Pool } from '../../db/pool.js';
import { ensurePrepared, execute, withSession, type PreparedCall } from '../../db/prepared-batch.js';
import {
  CONVERSION_RAW_FIELDS,
  ENTRY_CLICK_RAW_FIELDS,
  VISIT_RAW_FIELDS,
  anyHeld,
  setClause,
  type ClearedFields,
} from './fields.js';

/**
 * Retention (`RETENTION_DAYS`, docs/data-lifecycle.md): raw identifiers of rows older than the
 * limit are cleared, the rows themselves stay (counts, reports, attribution history); finished
 * sends older than the limit are deleted, and so are entry clicks no Telegram user ever brought
 * back (nothing reads them but a late /start, and a payload that old is as good as unknown).
 *
 * A walk clears one table in time order, in batches of `batch` rows, each its own short
 * transaction that also records how far the walk got (`retention_progress`): a restart, even in
 * the middle of a batch, loses at most that uncommitted batch and resumes after the last committed
 * one. Rows are found along a B-tree on the time (migration 182), from where the last batch ended:
 * a batch reads its own rows and few others, whatever VACUUM or new rows did to the pages. Nothing
 * waits long for a lock: a row locked by someone else for `LOCK_TIMEOUT` ends the run, and the
 * next run takes it up.
 */
export interface RetentionWalk {
  /** Key in `retention_progress`. */
  target: string;
  table: string;
  time: string;
  /** The B-tree on `time` the walk finds its rows along. */
  index: string;
  /** What becomes of an old row: its fields cleared, or (rows matching `where`, on the alias `t`) the row deleted. */
  action: { clear: ClearedFields } | { delete: string };
}

export const RETENTION_WALKS: readonly RetentionWalk[] = [
  {
    target: 'visits',
    table: 'visits',
    time: 'created_at',
    index: 'visits_created',
    action: { clear: VISIT_RAW_FIELDS },
  },
  {
    target: 'conversions',
    table: 'conversions',
    time: 'received_at',
    index: 'conversions_received',
    action: { clear: CONVERSION_RAW_FIELDS },
  },
  // Unused clicks go first, so that the payload walk after it finds only the used ones.
  {
    target: 'entry_clicks_unused',
    table: 'entry_clicks',
    time: 'created_at',
    index: 'entry_clicks_created',
    action: { delete: 't.used_by IS NULL' },
  },
  {
    target: 'entry_clicks',
    table: 'entry_clicks',
    time: 'created_at',
    index: 'entry_clicks_created',
    action: { clear: ENTRY_CLICK_RAW_FIELDS },
  },
];

/** Sends in these states are finished: nothing will change them but a retry by hand. */
const FINISHED_SENDS = ['sent', 'failed', 'skipped'] as const;

const RETENTION_BATCH = 1_000;
/**
 * After each batch the job rests five times as long as the batch took (a sixth of each of its
 * two connections' time at most), leaving room to the requests beside it while a backlog of a
 * million rows still clears within minutes: docs/benchmarks.md has the runs that chose it.
 */
export const RETENTION_REST = 5;
const LOCK_TIMEOUT = '5s';
const DAY_MS = 86_400_000;

export interface RetentionOptions {
  days: number;
  batch?: number;
  /** Stop starting batches after this instant (ms); the next run continues. */
  until?: number;
  /** The pause after each batch, as a multiple of the time that batch took (`RETENTION_REST`). */
  rest?: number;
}

export interface RetentionResult {
  /** Rows cleared (or, for a deleting walk, deleted), per walk, and finished sends deleted. */
  cleared: Record<string, number>;
  sendsDeleted: number;
  /** False when the run stopped early (its time was up, or a row stayed locked). */
  done: boolean;
  /** Wall time per walk and for the sends (`sends`), pauses included, in seconds. */
  seconds: Record<string, number>;
}

export async function runRetention(pool: Pool, now: Date, opts: RetentionOptions): Promise<RetentionResult> {
  const cutoff = new Date(now.getTime() - opts.days * DAY_MS);
  const pace: Pace = {
    batch: opts.batch ?? RETENTION_BATCH,
    until: opts.until ?? Number.POSITIVE_INFINITY,
    rest: opts.rest ?? RETENTION_REST,
  };
  const result: RetentionResult = { cleared: {}, sendsDeleted: 0, done: true, seconds: {} };
  /** One walk after another, each on its own table; false when one stopped before its end. */
  const lane = async (walks: readonly RetentionWalk[], sends: boolean): Promise<boolean> => {
    try {
      for (const walk of walks) {
        const started = performance.now();
        const out = await walkTable(pool, walk, cutoff, pace);
        result.cleared[walk.target] = out.cleared;
        result.seconds[walk.target] = (performance.now() - started) / 1000;
        if (!out.done) return false;
      }
      if (!sends) return true;
      const started = performance.now();
      const out = await deleteFinishedSends(pool, cutoff, pace);
      result.seconds.sends = (performance.now() - started) / 1000;
      result.sendsDeleted = out.deleted;
      return out.done;
    } catch (err) {
      if ((err as { code?: string }).code === '55P03') return false; // lock_timeout
      throw err;
    }
  };
  // The visits are most of the work, and no other walk depends on theirs: they go on one
  // connection while the other walks and the sends follow each other on a second. Under a
  // saturated database a walk's pace is its connection's share of the CPU (measured: the
  // visits of a million expired ones cost 12 µs each alone and took 290 s beside 50 busy
  // clients), so two lanes finish in the time of the longer one.
  const [visits, others] = [
    RETENTION_WALKS.filter((w) => w.table === 'visits'),
    RETENTION_WALKS.filter((w) => w.table !== 'visits'),
  ];
  // Both lanes end before an error of either is thrown: none goes on behind the caller's back.
  const lanes = await Promise.allSettled([lane(visits, false), lane(others, true)]);
  for (const l of lanes) if (l.status === 'rejected') throw l.reason;
  result.done = lanes.every((l) => l.status === 'fulfilled' && l.value);
  // The walks' keys in their listed order, whichever lane finished first.
  result.cleared = Object.fromEntries(
    RETENTION_WALKS.filter((w) => w.target in result.cleared).map((w) => [
      w.target,
      result.cleared[w.target]!,
    ]),
  );
  return result;
}

interface Pace {
  batch: number;
  until: number;
  rest: number;
}

/**
 * After a batch that took `ms`, the job waits `rest × ms` before the next: its share of one
 * database connection's time stays at 1 / (1 + rest) whatever the load, and under load (slower
 * batches) it backs off with it.
 */
async function breathe(pace: Pace, ms: number): Promise<void> {
  const wait = Math.min(pace.rest * ms, Math.max(0, pace.until - Date.now()));
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}

/**
 * One batch of a walk: the oldest rows from `$1` up to `$2` (the cutoff) still holding something
 * to clear (or matching the delete), at most `$3`, reached by their ctid (a TID scan: no index
 * descent per row) and locked by the UPDATE or DELETE itself (locking them first, FOR UPDATE,
 * wrote every row twice). A row someone else changes meanwhile has a new ctid once the statement
 * has waited for it, so it is skipped, not clobbered: the walk's progress then stops at the first
 * row skipped, and the next batch finds it again if it still holds anything. `$4` names the walk in
 * `retention_progress`, where the batch records where the next one starts.
 */
export function batchSql(w: RetentionWalk): string {
  const pending = 'clear' in w.action ? anyHeld(w.action.clear, 't') : `(${w.action.delete})`;
  const change =
    'clear' in w.action ? `UPDATE ${w.table} x SET ${setClause(w.action.clear)}` : `DELETE FROM ${w.table} x`;
  return `WITH batch AS MATERIALIZED (
      SELECT ctid AS tid, id, ${w.time} AS at FROM ${w.table} t
      WHERE ${w.time} >= $1::timestamptz AND ${w.time} < $2::timestamptz AND ${pending}
      ORDER BY ${w.time} LIMIT $3::int
    ), done AS (
      ${change} WHERE x.ctid = ANY (ARRAY(SELECT tid FROM batch)) RETURNING x.id
    ), skipped AS (
      SELECT min(at) AS at FROM batch WHERE id NOT IN (SELECT id FROM done)
    ), progress AS (
      INSERT INTO retention_progress (target, done_before)
      SELECT $4::text, CASE WHEN skipped.at IS NOT NULL THEN skipped.at
                            WHEN (SELECT count(*) FROM batch) < $3::int THEN $2::timestamptz
                            ELSE (SELECT max(at) FROM batch) END
        FROM skipped
      ON CONFLICT (target) DO UPDATE SET done_before = EXCLUDED.done_before
      RETURNING done_before
    )
    SELECT (SELECT count(*)::int FROM done) AS n, done_before FROM progress`;
}

async function walkTable(
  pool: Pool,
  w: RetentionWalk,
  cutoff: Date,
  pace: Pace,
): Promise<{ cleared: number; done: boolean }> {
  const { rows } = await pool.query<{ done_before: Date }>(
    'SELECT done_before FROM retention_progress WHERE target = $1',
    [w.target],
  );
  // From where the last batch ended, inclusive: rows of that same instant may not all have fitted
  // (those cleared already are passed over, as they no longer hold anything).
  let from = rows[0]?.done_before ?? new Date(0);
  let cleared = 0;
  const call: PreparedCall = { name: `retention_${w.target}`, sql: batchSql(w), values: [] };
  while (from < cutoff) {
    if (Date.now() >= pace.until) return { cleared, done: false };
    const started = performance.now();
    // The batch is one round trip: its own short transaction, with its lock timeout.
    const { n, done_before: doneBefore } = await withSession(pool, async (client) => {
      await ensurePrepared(client, call);
      const sql = [
        'BEGIN',
        `SET LOCAL lock_timeout = '${LOCK_TIMEOUT}'`,
        execute(client, { ...call, values: [from, cutoff, pace.batch, w.target] }),
        'COMMIT',
      ];
      const res = (await client.query(sql.join('; '))) as unknown as {
        rows: { n: number; done_before: Date }[];
      }[];
      return res[2]!.rows[0]!;
    });
    cleared += n;
    from = doneBefore;
    if (from < cutoff) await breathe(pace, performance.now() - started);
  }
  return { cleared, done: true };
}

async function deleteFinishedSends(
  pool: Pool,
  cutoff: Date,
  pace: Pace,
): Promise<{ deleted: number; done: boolean }> {
  const { batch, until } = pace;
  let deleted = 0;
  for (const status of FINISHED_SENDS) {
    // Where the last batch ended: each batch starts there, not at the head of the index, whose
    // first pages hold nothing but the entries of rows deleted since (until VACUUM removes them)
    // and which every batch would otherwise read again, longer each time.
    let after = new Date(0);
    for (;;) {
      if (Date.now() >= until) return { deleted, done: false };
      const started = performance.now();
      // The oldest first along sends_status (status, created_at), each reached by its ctid (no
      // index descent per row); each batch its own statement, with its lock timeout. The DELETE
      // locks its rows itself (locking them first, FOR UPDATE, wrote every row twice); a send
      // someone retries by hand meanwhile has a new ctid once the DELETE has waited for it, and
      // stays. One round trip, so the values are written into the text: a constant status,
      // timestamps Capigram computed and an integer.
      const res = (await withSession(pool, (client) =>
        client.query(
          `BEGIN; SET LOCAL lock_timeout = '${LOCK_TIMEOUT}';
           WITH batch AS MATERIALIZED (
             SELECT ctid AS tid, created_at FROM sends WHERE status = '${status}' AND created_at >= '${after.toISOString()}'::timestamptz
               AND created_at < '${cutoff.toISOString()}'::timestamptz ORDER BY created_at LIMIT ${Math.trunc(batch)}
           ), done AS (
             DELETE FROM sends s WHERE s.ctid = ANY (ARRAY(SELECT tid FROM batch)) RETURNING 1
           )
           SELECT (SELECT count(*)::int FROM batch) AS found, (SELECT count(*)::int FROM done) AS n,
                  (SELECT max(created_at) FROM batch) AS last;
           COMMIT`,
        ),
      )) as unknown as { rows: { found: number; n: number; last: Date | null }[] }[];
      const { found, n, last } = res[2]!.rows[0]!;
      deleted += n;
      if (found < batch || last === null) break;
      // Inclusive: sends created in the same instant as the last one may not all have fitted.
      after = last;
      await breathe(pace, performance.now() - started);
    }
  }
  return { deleted, done: true };
}
