import { z } from 'zod';
import { retryLockConflicts } from '../db/lock-conflict.js';
import { withTx, type Pool } from '../db/pool.js';
import type { Deps } from '../deps.js';
import {
  failDeliveredSends,
  lockConversions,
  noteDeliveredSends,
  refreshCapiStatuses,
} from '../domain/outbox/sends.js';
import { isRecord, parseJsonObject, stringField, truncateError } from '../platforms/response.js';
import type { PlatformResponse } from '../platforms/types.js';
import { loadPixel } from './event-builder.js';
import { authorize } from './google-oauth.js';

/**
 * The Data Manager API accepts a request when its shape is right and processes its events later:
 * an unknown click, denied consent or an event too old is only reported by
 * `GET /v1/requestStatus:retrieve?requestId=…` (one `RequestStatusPerDestination` per destination
 * of the request, in its order). After each accepted ingest a `google_request_status` job asks
 * for that status until it is settled: a destination whose events all FAILED turns their sends
 * (sent so far) to failed with Google's reasons, which the conversion's status and the pixel
 * health report then show. PARTIAL_SUCCESS names counts, not events: the sends of a destination
 * that held one event fail, larger ones keep `sent` and carry the diagnosis in their response.
 */
export const REQUEST_STATUS_TASK = 'google_request_status';

/** A request still PROCESSING after this many checks (about a day with doubling waits) is left as it is. */
const MAX_CHECKS = 10;
const CHECK_TIMEOUT_MS = 10_000;

export const RequestStatusJob = z.object({
  pixelId: z.string().uuid(),
  requestId: z.string().min(1),
  /** The delivered sends of each destination of the request, in the request's order. */
  destinations: z.array(z.object({ reference: z.string(), sendIds: z.array(z.string().uuid()) })),
  check: z.number().int().min(1),
  delayMs: z.number().int().min(0),
});
export type RequestStatusJob = z.infer<typeof RequestStatusJob>;

async function addStatusJob(pool: Pool, job: RequestStatusJob): Promise<void> {
  await pool.query(
    `SELECT graphile_worker.add_job($1, $2::json, run_at := now() + $3 * interval '1 millisecond', max_attempts := 5)`,
    [REQUEST_STATUS_TASK, JSON.stringify(job), job.delayMs],
  );
}

/**
 * After an accepted ingest: the job that will read its diagnostics. Sends are grouped by the
 * destination their event named (`destinationReferences`), as the status answers per destination.
 */
export async function scheduleRequestStatus(
  deps: Pick<Deps, 'pool' | 'log'>,
  r: {
    pixelId: string;
    res: PlatformResponse;
    requestBody: string;
    sendIds: string[];
    delivered: ReadonlySet<string>;
    firstCheckMs: number;
  },
): Promise<void> {
  if ('networkError' in r.res || r.res.status < 200 || r.res.status >= 300) return;
  const requestId = stringField(parseJsonObject(r.res.bodyText) ?? {}, 'requestId');
  if (requestId === undefined) return;
  const body = parseJsonObject(r.requestBody) ?? {};
  const destinations = (Array.isArray(body.destinations) ? body.destinations : [])
    .filter(isRecord)
    .map((d) => ({ reference: stringField(d, 'reference') ?? '', sendIds: [] as string[] }));
  const byRef = new Map(destinations.map((d) => [d.reference, d]));
  const events = Array.isArray(body.events) ? body.events : [];
  events.forEach((e, i) => {
    const sendId = r.sendIds[i];
    if (sendId === undefined || !r.delivered.has(sendId) || !isRecord(e)) return;
    const refs = Array.isArray(e.destinationReferences) ? e.destinationReferences : [];
    for (const ref of refs) if (typeof ref === 'string') byRef.get(ref)?.sendIds.push(sendId);
  });
  if (!destinations.some((d) => d.sendIds.length > 0)) return;
  try {
    await addStatusJob(deps.pool, {
      pixelId: r.pixelId,
      requestId,
      destinations,
      check: 1,
      delayMs: r.firstCheckMs,
    });
  } catch (err) {
    // The events are with Google; only the later diagnosis of this request is lost.
    deps.log.warn(
      { pixelId: r.pixelId, requestId, err: String(err) },
      'cannot schedule the Google request status check',
    );
  }
}

/**
 * Google already has an event with this transaction id: a resend after a lost answer (the same
 * conversion, the same id) landed. That is what was wanted, not a failure of the send.
 */
const ALREADY_RECORDED = 'PROCESSING_ERROR_REASON_DUPLICATE_TRANSACTION_ID';

export interface DestinationStatus {
  requestStatus: string;
  /** `REASON ×n` for each error count. */
  errors: string[];
  /** Events that failed, by Google's counts. */
  failedRecords: number;
}

/** Reads a `RetrieveRequestStatusResponse`. */
export function parseRequestStatus(body: Record<string, unknown>): DestinationStatus[] {
  const list = Array.isArray(body.requestStatusPerDestination) ? body.requestStatusPerDestination : [];
  return list.filter(isRecord).map((d) => {
    const info = isRecord(d.errorInfo) ? d.errorInfo : {};
    const counts = Array.isArray(info.errorCounts) ? info.errorCounts.filter(isRecord) : [];
    let failedRecords = 0;
    const errors: string[] = [];
    for (const c of counts) {
      const reason = stringField(c, 'reason') ?? 'PROCESSING_ERROR_REASON_UNSPECIFIED';
      if (reason === ALREADY_RECORDED) continue;
      const n = Number(c.recordCount ?? 0);
      failedRecords += Number.isFinite(n) ? n : 0;
      errors.push(`${reason} ×${n}`);
    }
    let requestStatus = stringField(d, 'requestStatus') ?? 'REQUEST_STATUS_UNKNOWN';
    // Failures that are only repeats of events Google already has are successes.
    const failing = requestStatus === 'FAILED' || requestStatus === 'PARTIAL_SUCCESS';
    if (failing && counts.length > 0 && errors.length === 0) requestStatus = 'SUCCESS';
    return { requestStatus, errors, failedRecords };
  });
}

export type StatusCheck = 'settled' | 'again' | 'gave-up';

/** One check of a request's diagnostics; schedules the next one while Google is still processing. */
export async function checkRequestStatus(
  deps: Pick<Deps, 'pool' | 'box' | 'config' | 'log' | 'local'>,
  job: RequestStatusJob,
): Promise<StatusCheck> {
  const again = async (why: string): Promise<StatusCheck> => {
    if (job.check >= MAX_CHECKS) {
      deps.log.warn(
        { pixelId: job.pixelId, requestId: job.requestId, why },
        'Google request status never settled',
      );
      return 'gave-up';
    }
    await addStatusJob(deps.pool, { ...job, check: job.check + 1, delayMs: Math.max(job.delayMs * 2, 1000) });
    return 'again';
  };
  const loaded = await loadPixel(deps.pool, deps.box, job.pixelId);
  if (!loaded || 'error' in loaded || loaded.config.platform !== 'google') return 'settled';
  const auth = await authorize(loaded.config, {
    oauthUrl: deps.config.GOOGLE_OAUTH_URL,
    timeoutMs: CHECK_TIMEOUT_MS,
    nowMs: Date.now(),
    tokens: deps.local.googleTokens,
  });
  if ('error' in auth) return again(auth.error);
  const token = auth.pixel.platform === 'google' ? auth.pixel.oauthToken : undefined;
  const url = `${deps.config.GOOGLE_DATA_MANAGER_URL.replace(/\/+$/, '')}/v1/requestStatus:retrieve?requestId=${encodeURIComponent(job.requestId)}`;
  let res: Response;
  let text: string;
  try {
    res = await fetch(url, {
      headers: { authorization: `Bearer ${token ?? ''}` },
      signal: AbortSignal.timeout(CHECK_TIMEOUT_MS),
    });
    text = await res.text();
  } catch (err) {
    return again(String(err));
  }
  if (res.status !== 200) return again(`HTTP ${res.status}: ${text.slice(0, 200)}`);
  const statuses = parseRequestStatus(parseJsonObject(text) ?? {});
  if (statuses.some((s) => s.requestStatus === 'PROCESSING' || s.requestStatus === 'REQUEST_STATUS_UNKNOWN'))
    return again('PROCESSING');
  const failures: { sendIds: string[]; error: string }[] = [];
  const notes: { sendIds: string[]; note: string }[] = [];
  job.destinations.forEach((d, i) => {
    const s = statuses[i];
    if (s === undefined || d.sendIds.length === 0) return;
    const reasons = s.errors.join(', ') || 'no reason given';
    const error = truncateError(
      `Google rejected the conversion after accepting it (request ${job.requestId}): ${s.requestStatus}: ${reasons}`,
    );
    if (s.requestStatus === 'FAILED' || (s.requestStatus === 'PARTIAL_SUCCESS' && d.sendIds.length === 1))
      failures.push({ sendIds: d.sendIds, error });
    else if (s.requestStatus === 'PARTIAL_SUCCESS') notes.push({ sendIds: d.sendIds, note: error });
  });
  if (failures.length > 0 || notes.length > 0) await recordDiagnosis(deps.pool, failures, notes);
  if (failures.length > 0)
    deps.log.warn(
      {
        pixelId: job.pixelId,
        requestId: job.requestId,
        sends: failures.flatMap((f) => f.sendIds).length,
        error: failures[0]!.error,
      },
      'Google rejected delivered conversions',
    );
  return 'settled';
}

/** Turns sent sends failed with Google's reason (and notes a partial failure), then their conversions' status. */
async function recordDiagnosis(
  pool: Pool,
  failures: { sendIds: string[]; error: string }[],
  notes: { sendIds: string[]; note: string }[],
): Promise<void> {
  const ids = [...failures.flatMap((f) => f.sendIds), ...notes.flatMap((n) => n.sendIds)];
  await retryLockConflicts(() =>
    withTx(pool, async (tx) => {
      const { rows } = await tx.query<{ conversion_id: string | null }>(
        'SELECT conversion_id FROM sends WHERE id = ANY($1::uuid[])',
        [ids],
      );
      const conversionIds = [
        ...new Set(rows.map((r) => r.conversion_id).filter((c): c is string => c !== null)),
      ];
      // Conversions first, then sends: the lock order of every writer (docs/architecture.md#lock-order).
      await lockConversions(tx, conversionIds);
      for (const f of failures) await failDeliveredSends(tx, f.sendIds, f.error);
      for (const n of notes) await noteDeliveredSends(tx, n.sendIds, n.note);
      await refreshCapiStatuses(tx, conversionIds);
    }),
  );
}
