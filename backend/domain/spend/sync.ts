import { randomUUID } from 'node:crypto';
import type { SecretBox } from '../../crypto/secret-box.js';
import { type Queryable, withTx } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import type { ImportOutcome, ImportWindow, SpendPlatform, SpendSource } from './importer.js';
import { SPEND_IMPORTERS } from './importers.js';

/**
 * Running a source's imports (docs/spend.md, "Running it"). One import of a source at a time: an
 * import holds the source's lease (`import_lease_token`, `import_lease_until`) from the moment it
 * is queued until it ends, also while it waits out a platform's rate limit, so that the backfill,
 * the hourly refresh and `spend sync` never read one source together. A lease whose holder died
 * ends by itself after LEASE_MS. The worker's task (`spend_import`) and the CLI call `runImport`;
 * the hourly cron (`spend_refresh`) queues one import per source whose lease is free.
 */
export const SPEND_IMPORT_TASK = 'spend_import';
export const SPEND_REFRESH_TASK = 'spend_refresh';
/** Minute 7 of every hour: the platforms restate today and yesterday all day long. */
export const SPEND_CRONTAB = `7 * * * * ${SPEND_REFRESH_TASK} ?max=1&jobKey=${SPEND_REFRESH_TASK}&jobKeyMode=replace`;

export const BACKFILL_DAYS = 90;
/** How long a lease lasts past its holder's last sign of life. */
export const LEASE_MS = 30 * 60_000;
/** A source paused this many times in a row (a platform that never lets it finish) is failing. */
export const MAX_PAUSES = 48;
/** The wait after an import that ended without the platform's answer (network, timeout). */
const NO_ANSWER_RETRY_MS = 5 * 60_000;

export interface ImportJob {
  sourceId: string;
  from: string;
  to: string;
  /** The import queued when the source was added: when done, the source counts as backfilled. */
  backfill?: boolean;
  /** The lease this job holds. */
  token: string;
  /** Pauses so far (rate limits, no answer). */
  pauses?: number;
}

const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** Today in a time zone, as YYYY-MM-DD (an unknown zone counts as UTC). */
export function dayIn(timeZone: string | null, at: Date): string {
  const f = (tz: string) =>
    new Intl.DateTimeFormat('en-CA', {
      timeZone: tz,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
    }).format(at);
  try {
    return f(timeZone ?? 'UTC');
  } catch {
    return f('UTC');
  }
}

/** A YYYY-MM-DD day moved by `days`. */
export function addDays(day: string, days: number): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) + days * 86_400_000).toISOString().slice(0, 10);
}

/** Yesterday and today of the account (what the hourly refresh and a plain `spend sync` read). */
export function recentWindow(timeZone: string | null, at: Date): ImportWindow {
  const today = dayIn(timeZone, at);
  return { from: addDays(today, -1), to: today };
}

/** The BACKFILL_DAYS days up to the account's today. */
export function backfillWindow(timeZone: string | null, at: Date): ImportWindow {
  const today = dayIn(timeZone, at);
  return { from: addDays(today, -(BACKFILL_DAYS - 1)), to: today };
}

export function isDay(s: string): boolean {
  return DATE.test(s) && new Date(`${s}T00:00:00Z`).toISOString().slice(0, 10) === s;
}

/** A spend source's row, as `sourceOf` reads it. */
export interface SpendSourceRow {
  id: string;
  site_id: string;
  platform: SpendPlatform;
  account_ref: string;
  credentials: string;
  currency: string | null;
  time_zone: string | null;
}

interface SourceRow extends SpendSourceRow {
  progress_window: ImportWindow | null;
}

const SOURCE_COLUMNS =
  'id, site_id, platform, account_ref, credentials, currency, time_zone, progress_window';

export function sourceOf(r: SpendSourceRow, box: Pick<SecretBox, 'open'>): SpendSource {
  return {
    id: r.id,
    siteId: r.site_id,
    platform: r.platform,
    accountRef: r.account_ref,
    credentials: JSON.parse(box.open(r.credentials)) as Record<string, string>,
    currency: r.currency,
    timeZone: r.time_zone,
  };
}

/**
 * Queues an import of `window` and gives it the source's lease (within the caller's transaction:
 * `spend add` queues the backfill with the insert). `runAtMs`: later than now (a pause).
 */
export async function queueImport(
  db: Queryable,
  job: Omit<ImportJob, 'token'> & { token?: string },
  runAfterMs = 0,
): Promise<string> {
  const token = job.token ?? randomUUID();
  await db.query(
    `WITH l AS (
       UPDATE spend_sources SET import_lease_token = $2::uuid,
         import_lease_until = now() + ($3::bigint + $4::bigint) * interval '1 millisecond'
       WHERE id = $1 RETURNING 1)
     SELECT graphile_worker.add_job($5::text, $6::json, run_at := now() + $3::bigint * interval '1 millisecond', max_attempts := 5)
     FROM l`,
    [job.sourceId, token, runAfterMs, LEASE_MS, SPEND_IMPORT_TASK, JSON.stringify({ ...job, token })],
  );
  return token;
}

export type RunOutcome = ImportOutcome | { kind: 'busy'; until: Date } | { kind: 'gone' };

/**
 * One import of a source's `window` under the lease `token` (taken here when free, or already
 * held by the job that carries it). Goes on from the page an interrupted import of the same window
 * stopped at; an import of another window starts from the first page. The importer writes the
 * rows; the source's state (ok, failing and why, last synced) is kept here whatever the importer
 * wrote. The lease is let go when the import ends, kept when it paused (the caller queues its
 * resumption with the same token).
 */
export async function runImport(
  deps: Pick<Deps, 'pool' | 'config' | 'box'>,
  sourceId: string,
  window: ImportWindow,
  token: string,
): Promise<RunOutcome> {
  const { rows } = await deps.pool.query<SourceRow>(
    `UPDATE spend_sources SET import_lease_token = $2::uuid, import_lease_until = now() + $3::bigint * interval '1 millisecond',
       progress = CASE WHEN progress_window IS DISTINCT FROM $4::jsonb THEN NULL ELSE progress END,
       progress_window = $4::jsonb
     WHERE id = $1 AND removed_at IS NULL
       AND (import_lease_token IS NULL OR import_lease_token = $2::uuid OR import_lease_until < now())
     RETURNING ${SOURCE_COLUMNS}`,
    [sourceId, token, LEASE_MS, JSON.stringify({ from: window.from, to: window.to })],
  );
  const row = rows[0];
  if (!row) {
    const { rows: held } = await deps.pool.query<{ until: Date | null }>(
      'SELECT import_lease_until AS until FROM spend_sources WHERE id = $1 AND removed_at IS NULL',
      [sourceId],
    );
    return held[0]?.until ? { kind: 'busy', until: held[0].until } : { kind: 'gone' };
  }
  const importer = SPEND_IMPORTERS[row.platform];
  let out: ImportOutcome;
  if (!importer) out = { kind: 'failed', rows: 0, reason: `no importer for ${row.platform}` };
  else {
    try {
      out = await importer.importDays(deps.pool, deps.config, sourceOf(row, deps.box), window);
    } catch (err) {
      out = { kind: 'paused', rows: 0, retryAfterMs: NO_ANSWER_RETRY_MS, reason: describe(err) };
    }
  }
  await recordOutcome(deps.pool, sourceId, token, out);
  return out;
}

function describe(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return 'no answer in time';
  return String(e?.cause?.code ?? e?.cause?.message ?? e?.message ?? err).slice(0, 300);
}

async function recordOutcome(
  db: Queryable,
  sourceId: string,
  token: string,
  out: ImportOutcome,
): Promise<void> {
  const release = 'import_lease_token = NULL, import_lease_until = NULL';
  if (out.kind === 'done')
    await db.query(
      `UPDATE spend_sources SET status = 'ok', last_error = NULL, last_synced_at = now(), progress = NULL, progress_window = NULL, ${release}
       WHERE id = $1 AND import_lease_token = $2::uuid`,
      [sourceId, token],
    );
  else if (out.kind === 'failed')
    await db.query(
      `UPDATE spend_sources SET status = 'failing', last_error = $3, progress = NULL, progress_window = NULL, ${release}
       WHERE id = $1 AND import_lease_token = $2::uuid`,
      [sourceId, token, out.reason],
    );
}

/**
 * The worker's `spend_import`: runs the job's import; a pause queues its resumption at the time
 * the platform gave (the lease kept until then); a source whose lease another import holds is
 * tried again when that lease ends.
 */
export async function handleImportJob(
  deps: Pick<Deps, 'pool' | 'config' | 'box' | 'log'>,
  job: ImportJob,
): Promise<RunOutcome> {
  const window = { from: job.from, to: job.to };
  const out = await runImport(deps, job.sourceId, window, job.token);
  if (out.kind === 'done' && job.backfill)
    await deps.pool.query('UPDATE spend_sources SET backfilled = true WHERE id = $1', [job.sourceId]);
  if (out.kind === 'paused') {
    const pauses = (job.pauses ?? 0) + 1;
    if (pauses > MAX_PAUSES) {
      const reason = `gave up after ${MAX_PAUSES} pauses; last: ${out.reason}`;
      await recordOutcome(deps.pool, job.sourceId, job.token, { kind: 'failed', rows: 0, reason });
      return { kind: 'failed', rows: out.rows, reason };
    }
    await queueImport(deps.pool, { ...job, pauses }, out.retryAfterMs);
  }
  if (out.kind === 'busy') {
    const wait = Math.max(1000, out.until.getTime() - Date.now());
    await deps.pool.query(
      `SELECT graphile_worker.add_job($1::text, $2::json, run_at := now() + $3::bigint * interval '1 millisecond', max_attempts := 5)`,
      [SPEND_IMPORT_TASK, JSON.stringify(job), wait],
    );
  }
  if (out.kind !== 'gone')
    deps.log.info(
      {
        sourceId: job.sourceId,
        from: job.from,
        to: job.to,
        outcome: out.kind,
        rows: 'rows' in out ? out.rows : 0,
      },
      'spend import',
    );
  return out;
}

/**
 * The hourly `spend_refresh`: each live source whose lease is free gets an import of yesterday and
 * today in its own time zone, or of the whole backfill when it has none yet (its backfill failed).
 */
export async function queueRefreshes(db: Deps['pool'], at: Date): Promise<number> {
  const { rows } = await db.query<{ id: string; time_zone: string | null; backfilled: boolean }>(
    `SELECT id, time_zone, backfilled FROM spend_sources
     WHERE removed_at IS NULL AND (import_lease_token IS NULL OR import_lease_until < now())`,
  );
  let queued = 0;
  for (const s of rows) {
    const window = s.backfilled ? recentWindow(s.time_zone, at) : backfillWindow(s.time_zone, at);
    await withTx(db, async (tx) => {
      // Taken again under a row lock: an import may have started since the read above.
      const { rowCount } = await tx.query(
        `SELECT 1 FROM spend_sources WHERE id = $1 AND (import_lease_token IS NULL OR import_lease_until < now()) FOR UPDATE`,
        [s.id],
      );
      if (!rowCount) return;
      await queueImport(tx, { sourceId: s.id, ...window, ...(s.backfilled ? {} : { backfill: true }) });
      queued++;
    });
  }
  return queued;
}
