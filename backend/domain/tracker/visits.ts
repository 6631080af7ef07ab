import { createHash } from 'node:crypto';
import type { Pool, Queryable } from '../../db/pool.js';
import type { PreparedCall } from '../../db/prepared-batch.js';
import type { DeliveryWaker } from '../outbox/delivery-wake.js';
import { ApiError } from '../../errors.js';
import { consentlessIds, consentlessPage } from './consent.js';
import { eventIdFor, sendsCte, type SqlFragment } from '../outbox/sends.js';

/**
 * Visits: one row per pageview (or direct invite, or ad redirect), each with its PageView sends.
 *
 * A `visitRequestId` makes recording retry-safe: the row is keyed by (site, visitRequestId), a
 * retry fills only attribution that is still missing, and routing (kind, channel, and with the
 * sends the pixels) stays as the first call fixed it. A retry claiming another browser, session or
 * site is refused, so one visit can never be rewritten into someone else's.
 */
export type VisitKind = 'pageview' | 'direct_invite' | 'redirect';

/** Attribution a visit carries; every one of them may be filled in by a later retry. */
export interface VisitAttribution {
  href?: string | undefined;
  landingPage?: string | undefined;
  referrer?: string | undefined;
  clientIp?: string | undefined;
  userAgent?: string | undefined;
  fbc?: string | undefined;
  fbp?: string | undefined;
  gclid?: string | undefined;
  gbraid?: string | undefined;
  wbraid?: string | undefined;
  ttclid?: string | undefined;
  sccid?: string | undefined;
  /** TikTok's `_ttp` and Snapchat's `_scid` first-party cookies. */
  ttp?: string | undefined;
  scid?: string | undefined;
  utmSource?: string | undefined;
  utmMedium?: string | undefined;
  utmCampaign?: string | undefined;
  utmContent?: string | undefined;
  utmTerm?: string | undefined;
  /**
   * False: the visitor has not consented (docs/consent.md). The visit is then stored with its
   * page's path alone, under ids of its own, and gets no PageView; absent: consented. Carried with
   * the attribution so that every way a visit is recorded (a click's minimal visit included)
   * brings it along; only a new visit takes it.
   */
  consented?: boolean | undefined;
}

const ATTRIBUTION_COLUMNS: readonly (readonly [Exclude<keyof VisitAttribution, 'consented'>, string])[] = [
  ['href', 'href'],
  ['landingPage', 'landing_page'],
  ['referrer', 'referrer'],
  ['clientIp', 'client_ip'],
  ['userAgent', 'user_agent'],
  ['fbc', 'fbc'],
  ['fbp', 'fbp'],
  ['gclid', 'gclid'],
  ['gbraid', 'gbraid'],
  ['wbraid', 'wbraid'],
  ['ttclid', 'ttclid'],
  ['sccid', 'sccid'],
  ['ttp', 'ttp'],
  ['scid', 'scid'],
  ['utmSource', 'utm_source'],
  ['utmMedium', 'utm_medium'],
  ['utmCampaign', 'utm_campaign'],
  ['utmContent', 'utm_content'],
  ['utmTerm', 'utm_term'],
];

export interface NewVisit {
  siteId: string;
  tempId: string;
  sessionId: string;
  /** Lower-case UUID; absent: every call is a new visit. */
  visitRequestId?: string | undefined;
  kind: VisitKind;
  /** Channel routing; only a new visit takes it. */
  channelId?: string | null | undefined;
  attribution: VisitAttribution;
}

export interface RecordedVisit {
  visitId: string;
  /** False when a retry found the visit of the same visitRequestId. */
  created: boolean;
  /** The visit's routing, as its first call fixed it. */
  channelId: string | null;
  /** Whether the visit was recorded with the visitor's consent (as its first call fixed it). */
  consented: boolean;
  /**
   * The `event_id` of the visit's Meta PageView, or null when none was queued (no active Meta
   * pixel): a browser pixel firing its PageView with this `eventID` is deduplicated with it.
   */
  pageViewEventId: string | null;
}

const FIXED_COLUMNS = [
  'site_id',
  'temp_id',
  'session_id',
  'visit_request_id',
  'kind',
  'channel_id',
  'consented',
] as const;
const FIXED_CASTS = ['uuid', 'uuid', 'uuid', 'uuid', 'text', 'uuid', 'boolean'] as const;
const COLUMNS = [...FIXED_COLUMNS, ...ATTRIBUTION_COLUMNS.map(([, column]) => column)];
const VALUES = COLUMNS.map((_, i) => `$${i + 1}::${FIXED_CASTS[i] ?? 'text'}`).join(', ');
const FILL_MISSING = ATTRIBUTION_COLUMNS.map(([, c]) => `${c} = COALESCE(visits.${c}, EXCLUDED.${c})`).join(
  ', ',
);

/**
 * A check the visit's own statement makes before writing it (track/init's rate-limit counter),
 * so that admitting and recording a visit cost one round trip. `sql` defines the CTE
 * `admission(allowed boolean, retry_ms bigint)`, one row, with parameters numbered from
 * `firstParam`; a refused visit writes nothing but what the check itself writes, and
 * `refusal(retryMs)` is thrown.
 */
export interface VisitAdmission {
  sql(firstParam: number): SqlFragment;
  /**
   * The same check as data, for the statement that records the visits of a batch together
   * (`visitsCall`): the counter `sql` writes, or null when the check admits every visit.
   */
  counter: VisitCounter | null;
  refusal(retryMs: number): Error;
  /**
   * The row the check writes (its counter's key), when it writes one: visits recorded together
   * (visit-batch.ts) take these rows in key order, and never two batches of a process the same one.
   */
  key?: string;
}

/**
 * A rate-limit counter as rate-limiter-flexible keeps it (`domain/rate-limits.ts`): a visit is
 * admitted while the counter of `key` is within `limit` over its window of `seconds`, or, once
 * it is spent, the burst counter of `burstKey` (null: none) within `burstLimit`.
 */
export interface VisitCounter {
  key: string;
  limit: number;
  burstKey: string | null;
  burstLimit: number;
  /** The clock the counters' windows are measured by (the process's, as the library's). */
  nowMs: number;
  seconds: number;
  burstSeconds: number;
}

const ADMIT_ALL: VisitAdmission = {
  sql: () => ({ text: 'admission AS (SELECT true AS allowed, 0::bigint AS retry_ms)', params: [] }),
  counter: null,
  refusal: () => new Error('admission refused a visit it admits'),
};

// The whole write is one statement, so it commits atomically on its own (no BEGIN/COMMIT): the
// admission check, the visit, and when the visit is new its PageView sends (`sendsCte`). A retry
// (a conflict on visitRequestId, unique across sites: migration 180) fills missing attribution and
// creates no sends. `elsewhere` refuses a visitRequestId another site already used (a changed
// websiteId); the conflict's WHERE refuses a changed browser or session, and another site that
// took the id in a race past `elsewhere`. Either way no visit comes back.
// A visit without consent gets no PageView.
const SENDS = sendsCte('visit', 'SELECT id, site_id FROM visit WHERE created AND consented', { fresh: true });
const ADMISSION_FIRST_PARAM = COLUMNS.length + SENDS.params.length + 1;

function upsertVisit(guard: string): string {
  return `
  elsewhere AS (SELECT 1 FROM visits WHERE visit_request_id = $4::uuid AND site_id <> $1::uuid LIMIT 1),
  visit AS (
    INSERT INTO visits (${COLUMNS.join(', ')})
    SELECT ${VALUES} WHERE NOT EXISTS (SELECT 1 FROM elsewhere) AND ${guard}
    ON CONFLICT (visit_request_id) WHERE visit_request_id IS NOT NULL DO UPDATE SET ${FILL_MISSING}, updated_at = now()
      WHERE visits.site_id = EXCLUDED.site_id AND visits.temp_id = EXCLUDED.temp_id AND visits.session_id = EXCLUDED.session_id
    RETURNING id, site_id, channel_id, consented, (xmax = 0) AS created)`;
}

const UPSERT_VISIT = upsertVisit('(SELECT allowed FROM admission)');

const INSERT_VISIT = `
  visit AS (
    INSERT INTO visits (${COLUMNS.join(', ')})
    SELECT ${VALUES} WHERE (SELECT allowed FROM admission)
    RETURNING id, site_id, channel_id, consented, true AS created)`;

function statement(visit: string, admission: SqlFragment): string {
  return `WITH ${admission.text}, ${visit}, ${SENDS.text}
    SELECT a.allowed, a.retry_ms, v.id, v.channel_id, v.consented, v.created, (SELECT count(*) FROM created_sends)::int AS sends,
      (EXISTS (SELECT 1 FROM created_sends WHERE platform = 'meta')
       OR EXISTS (SELECT 1 FROM sends s WHERE s.visit_id = v.id AND s.platform = 'meta')) AS meta_page_view
    FROM admission a LEFT JOIN visit v ON true`;
}

// A prepared statement per text (a handful: with or without visitRequestId, times the admission
// checks a process uses), so each call sends its values, not the statement, and PostgreSQL skips
// parsing it again.
const statementNames = new Map<string, string>();
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `record_visit_${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
    statementNames.set(text, name);
  }
  return name;
}

/**
 * What a visit without consent is stored as: its page's path and its kind and routing, under ids
 * that are not its cookies' values (`consent.ts`). Applied here, where every path records a visit.
 */
function asStored(v: NewVisit): NewVisit {
  if (v.attribution.consented !== false) return v;
  return {
    ...v,
    ...consentlessIds(v.siteId, v.visitRequestId),
    attribution: { ...consentlessPage(v.attribution), consented: false },
  };
}

function parameters(v: NewVisit): unknown[] {
  const empty = (s: string | undefined) => (s === undefined || s === '' ? null : s);
  return [
    v.siteId,
    v.tempId,
    v.sessionId,
    v.visitRequestId ?? null,
    v.kind,
    v.channelId ?? null,
    v.attribution.consented !== false,
    ...ATTRIBUTION_COLUMNS.map(([field]) => empty(v.attribution[field])),
    ...SENDS.params,
  ];
}

/** What the visit's statement answers: one row. */
export interface VisitStatementRow {
  allowed: boolean;
  retry_ms: number;
  id: string | null;
  channel_id: string | null;
  consented: boolean | null;
  created: boolean | null;
  sends: number;
  meta_page_view: boolean;
}

/**
 * The one statement that records `v` (its admission check, the visit, its PageView sends), with a
 * name per statement text (a handful per process) under which it is prepared once per connection.
 */
export function visitCall(v: NewVisit, admission: VisitAdmission = ADMIT_ALL): PreparedCall {
  const check = admission.sql(ADMISSION_FIRST_PARAM);
  const sql = statement(v.visitRequestId === undefined ? INSERT_VISIT : UPSERT_VISIT, check);
  return { name: statementName(sql), sql, values: [...parameters(asStored(v)), ...check.params] };
}

/** A visit of a batch and its admission check (`visitsCall`). */
export interface BatchedVisit {
  visit: NewVisit;
  admission: VisitAdmission | undefined;
}

const BATCH_INPUT_COLUMNS = [
  'n int',
  ...FIXED_COLUMNS.map((c, i) => `${c} ${FIXED_CASTS[i]}`),
  ...ATTRIBUTION_COLUMNS.map(([, c]) => `${c} text`),
  'counter_key varchar, counter_limit int, burst_key varchar, burst_limit int, now_ms bigint',
].join(', ');

/** One counter table's upsert for the rows of `source` (key, now_ms), its window `seconds` long, in key order. */
function countersUpsert(source: string, seconds: number): string {
  const window = seconds * 1000;
  return `INSERT INTO capigram_rate_limits AS t (key, points, expire)
    SELECT key, 1, now_ms + ${window} FROM (${source}) c ORDER BY key
    ON CONFLICT (key) DO UPDATE SET
      points = CASE WHEN t.expire <= EXCLUDED.expire - ${window} THEN 1 ELSE t.points + 1 END,
      expire = CASE WHEN t.expire <= EXCLUDED.expire - ${window} THEN EXCLUDED.expire ELSE t.expire END
    RETURNING key, points, expire`;
}

const BATCH_SENDS = sendsCte('visit', 'SELECT id, site_id FROM visit WHERE created AND consented', {
  fresh: true,
});

function batchStatement(seconds: number, burstSeconds: number): string {
  return `
  WITH input AS MATERIALIZED (
    SELECT i.*, capigram_uuid_v7() AS new_id FROM jsonb_to_recordset($1::jsonb) AS i(${BATCH_INPUT_COLUMNS})),
  counted AS (${countersUpsert('SELECT counter_key AS key, now_ms FROM input WHERE counter_key IS NOT NULL', seconds)}),
  burst_counted AS (${countersUpsert(
    `SELECT i.burst_key AS key, i.now_ms FROM input i JOIN counted c ON c.key = i.counter_key
     WHERE i.burst_key IS NOT NULL AND c.points > i.counter_limit`,
    burstSeconds,
  )}),
  admission AS MATERIALIZED (
    SELECT i.n, (i.counter_key IS NULL OR c.points <= i.counter_limit OR coalesce(b.points <= i.burst_limit, false)) AS allowed,
           coalesce(least(c.expire, b.expire) - i.now_ms, 0)::bigint AS retry_ms
    FROM input i LEFT JOIN counted c ON c.key = i.counter_key LEFT JOIN burst_counted b ON b.key = i.burst_key),
  elsewhere AS (
    SELECT i.n FROM input i
    WHERE i.visit_request_id IS NOT NULL
      AND EXISTS (SELECT 1 FROM visits v WHERE v.visit_request_id = i.visit_request_id AND v.site_id <> i.site_id)),
  visit AS (
    INSERT INTO visits (id, ${COLUMNS.join(', ')})
    SELECT i.new_id, ${COLUMNS.map((c) => `i.${c}`).join(', ')}
    FROM input i JOIN admission a ON a.n = i.n
    WHERE a.allowed AND i.n NOT IN (SELECT n FROM elsewhere)
    ON CONFLICT (visit_request_id) WHERE visit_request_id IS NOT NULL DO UPDATE SET ${FILL_MISSING}, updated_at = now()
      WHERE visits.site_id = EXCLUDED.site_id AND visits.temp_id = EXCLUDED.temp_id AND visits.session_id = EXCLUDED.session_id
    RETURNING id, site_id, channel_id, consented, (xmax = 0) AS created, visit_request_id),
  ${BATCH_SENDS.text}
  SELECT i.n, a.allowed, a.retry_ms, v.id, v.channel_id, v.consented, v.created,
    (SELECT count(*) FROM created_sends cs WHERE cs.subject_id = v.id)::int AS sends,
    (EXISTS (SELECT 1 FROM created_sends cs WHERE cs.subject_id = v.id AND cs.platform = 'meta')
     OR EXISTS (SELECT 1 FROM sends s WHERE s.visit_id = v.id AND s.platform = 'meta')) AS meta_page_view
  FROM input i JOIN admission a ON a.n = i.n
  LEFT JOIN visit v ON v.id = i.new_id OR v.visit_request_id = i.visit_request_id
  ORDER BY i.n`;
}

/**
 * The one statement that records the visits of a batch (`visit-batch.ts`): each visit's admission
 * check, its row and its PageView sends, as `visitCall` does for one, all in one statement
 * (PostgreSQL pays a statement's set-up once, not per visit). Each counter and each
 * visitRequestId at most once per batch (the batcher's keys), the counters taken in key order. A
 * row per visit, in the order given (`n`, from 1). Null when the visits' counters do not share
 * their windows (never among track/init's), for the caller to record them one by one.
 */
export function visitsCall(batch: readonly BatchedVisit[]): PreparedCall | null {
  const counters = batch.flatMap((b) => (b.admission?.counter ? [b.admission.counter] : []));
  const seconds = new Set(counters.map((c) => c.seconds));
  const burstSeconds = new Set(counters.map((c) => c.burstSeconds));
  if (seconds.size > 1 || burstSeconds.size > 1) return null;
  const [window = 60] = seconds;
  const [burstWindow = 600] = burstSeconds;
  const sql = batchStatement(window, burstWindow);
  const inputs = batch.map((b, i) => {
    const values = parameters(asStored(b.visit));
    const row: Record<string, unknown> = { n: i + 1 };
    COLUMNS.forEach((c, j) => {
      row[c] = values[j];
    });
    const counter = b.admission?.counter ?? null;
    return {
      ...row,
      counter_key: counter?.key ?? null,
      counter_limit: counter?.limit ?? null,
      burst_key: counter?.burstKey ?? null,
      burst_limit: counter?.burstLimit ?? null,
      now_ms: counter?.nowMs ?? null,
    };
  });
  // As JSON text: the driver would send a bare array as a PostgreSQL array, not as jsonb.
  return { name: statementName(sql), sql, values: [JSON.stringify(inputs)] };
}

/**
 * What recording a visit needs of the process: `Deps` has it. Named here rather than picked from
 * `Deps` so that the visit batcher, part of the process's state, does not import `Deps`.
 */
export interface VisitDeps {
  pool: Pool;
  local: { waker: Pick<DeliveryWaker, 'wake'> };
}

/**
 * Records a visit; a new visit gets its PageView sends in the same statement, which commits on its
 * own (hence a pool, never a transaction's client), and then wakes the delivery worker.
 */
export async function recordVisit(
  deps: VisitDeps,
  v: NewVisit,
  admission: VisitAdmission = ADMIT_ALL,
): Promise<RecordedVisit> {
  return recordVisitAlone(deps.pool, deps.local.waker, v, admission);
}

/** `recordVisit` with its parts named: the pool and the wake-up after the commit. */
export async function recordVisitAlone(
  pool: Pool,
  waker: Pick<DeliveryWaker, 'wake'>,
  v: NewVisit,
  admission: VisitAdmission = ADMIT_ALL,
): Promise<RecordedVisit> {
  const call = visitCall(v, admission);
  const { rows } = await pool.query<VisitStatementRow>({
    name: call.name,
    text: call.sql,
    values: [...call.values],
  });
  const row = rows[0];
  if (row !== undefined && row.sends > 0) waker.wake();
  return settleVisit(pool, row, admission);
}

/**
 * The answer to a visit from its statement's committed row: the admission's refusal, a mismatch,
 * or the visit (the delivery worker already woken by the caller when the row made sends).
 */
export async function settleVisit(
  pool: Pool,
  row: VisitStatementRow | undefined,
  admission: VisitAdmission = ADMIT_ALL,
): Promise<RecordedVisit> {
  if (row !== undefined && !row.allowed) throw admission.refusal(row.retry_ms);
  if (row === undefined || row.id === null) throw visitMismatch();
  return {
    visitId: row.id,
    created: row.created === true,
    channelId: row.channel_id,
    consented: row.consented !== false,
    pageViewEventId: (await hasMetaPageView(pool, row.id, row))
      ? eventIdFor({ kind: 'visit', id: row.id })
      : null,
  };
}

/** A visitRequestId that another site, browser or session already used. */
export function visitMismatch(): ApiError {
  return new ApiError(
    'VISIT_IDENTITY_MISMATCH',
    'this visitRequestId belongs to a visit of another websiteId, tempId or sessionId; use a new UUID for a new visit',
  );
}

/**
 * Whether the visit has a Meta PageView. The statement that found a duplicate of a visit being
 * recorded at the same moment waited for that one's commit, but its snapshot predates it and so
 * misses the sends it made: a new statement (a new snapshot) sees them. Asked only then.
 */
async function hasMetaPageView(
  db: Pool,
  visitId: string,
  row: { created: boolean | null; meta_page_view: boolean },
): Promise<boolean> {
  if (row.meta_page_view || row.created === true) return row.meta_page_view;
  const { rows } = await db.query<{ meta: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM sends WHERE visit_id = $1 AND platform = 'meta') AS meta`,
    [visitId],
  );
  return rows[0]?.meta === true;
}

/**
 * A visit recorded as part of a larger statement (an invite click's, `click-handout.ts`): the CTEs
 * `visit` (id, site_id, channel_id, consented, created), written only where the SQL condition
 * `guard` holds, and `created_sends`, a new visit's PageView sends. `insert` always makes a new
 * visit (a click's minimal one); `upsert` is keyed by the visitRequestId, as `recordVisit` has it.
 * Its values (`visitValues`) are the parameters $1 to $VISIT_PARAMS: $1 the site, $2 and $3 the
 * browser and session ids it is stored under, $6 its channel.
 */
export function visitCtes(how: 'insert' | 'upsert', guard: string): string {
  const visit =
    how === 'upsert'
      ? upsertVisit(guard)
      : `visit AS (
    INSERT INTO visits (${COLUMNS.join(', ')})
    SELECT ${VALUES} WHERE ${guard}
    RETURNING id, site_id, channel_id, consented, true AS created)`;
  return `${visit},
  ${SENDS.text}`;
}

export const VISIT_PARAMS = COLUMNS.length + SENDS.params.length;

export function visitValues(v: NewVisit): unknown[] {
  return parameters(asStored(v));
}

/** `findClickVisit`'s query: $1 the site, $2 the browser's id, $3 the session's (`p` renames them). */
export function clickVisitSql(p = { site: '$1', tempId: '$2', sessionId: '$3' }): string {
  return `(SELECT id, 1 AS rank FROM visits WHERE site_id = ${p.site} AND session_id = ${p.sessionId} AND temp_id = ${p.tempId} ORDER BY created_at DESC, id DESC LIMIT 1)
     UNION ALL
     (SELECT id, 2 AS rank FROM visits WHERE site_id = ${p.site} AND temp_id = ${p.tempId} ORDER BY created_at DESC, id DESC LIMIT 1)
     ORDER BY rank LIMIT 1`;
}

/**
 * The visit an invite click belongs to: the session's latest, else the browser's latest.
 * Null when the browser was never seen on the site.
 */
export async function findClickVisit(
  db: Queryable,
  q: { siteId: string; tempId: string; sessionId: string },
): Promise<string | null> {
  const { rows } = await db.query<{ id: string }>(clickVisitSql(), [q.siteId, q.tempId, q.sessionId]);
  return rows[0]?.id ?? null;
}

/**
 * A click's visit once its destination is known to exist: the one `findClickVisit` found, else a
 * minimal visit recorded from the click itself (its init was lost or blocked), so that what the
 * click leads to is still traced to it.
 */
export async function clickVisitId(
  deps: VisitDeps,
  q: { siteId: string; tempId: string; sessionId: string; click: VisitAttribution },
  found: string | null,
): Promise<string> {
  if (found !== null) return found;
  const visit = await recordVisit(deps, {
    siteId: q.siteId,
    tempId: q.tempId,
    sessionId: q.sessionId,
    kind: 'pageview',
    attribution: q.click,
  });
  return visit.visitId;
}

/** What a join or an entry credited to a visit sends with its conversion: the page, IP and User-Agent. */
export interface VisitContext {
  href: string | null;
  client_ip: string | null;
  user_agent: string | null;
  /** False: the visitor did not consent, and what the visit leads to is organic (docs/consent.md). */
  consented: boolean;
}

export async function visitContext(tx: Queryable, visitId: string): Promise<VisitContext | null> {
  const { rows } = await tx.query<VisitContext>(
    'SELECT href, client_ip, user_agent, consented FROM visits WHERE id = $1',
    [visitId],
  );
  return rows[0] ?? null;
}
