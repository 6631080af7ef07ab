import type { Queryable } from '../db/pool.js';
import type { SharedWrite } from '../db/transaction-batch.js';

/**
 * Every statement on `idempotency_keys`, the store behind the business API's Idempotency-Key
 * (the rules are `http/api/idempotency.ts`'s). A row is a claim: the API key, the client's key,
 * when it was claimed (which also tells one holder of the claim from the next), the endpoint it is
 * bound to, and once answered the answer's status and exact bytes.
 */

/** Replays are answered for 24 hours. */
export const IDEMPOTENCY_REPLAY_WINDOW_MS = 24 * 60 * 60 * 1000;
/** Rows live two days: replays are answered for 24 h, the second day is slack. */
export const IDEMPOTENCY_RETENTION_MS = 2 * 24 * 60 * 60 * 1000;

/** What is stored: the exact bytes and media type, since jsonb would reorder a JSON body's keys. */
export interface StoredResponse {
  contentType: string;
  text: string;
}

/** One claim: its holder is whoever claimed it at `claimedAt`. */
export interface ClaimRef {
  apiKeyId: string;
  key: string;
  claimedAt: Date;
}

/** A stored answer: its status, bytes, and when it was stored. */
export interface Answer {
  status: number;
  stored: StoredResponse;
  completedAt: Date;
}

/** What is stored under a key. */
export interface ClaimRow {
  createdAt: Date;
  status: number | null;
  body: StoredResponse | null;
  /** The endpoint the key was first used on (null for rows older than that record). */
  endpoint: string | null;
}

/** Claims the key unless a row holds it; true when this call claimed it. */
export async function claimKey(db: Queryable, claim: ClaimRef & { endpoint: string }): Promise<boolean> {
  const inserted = await db.query({
    name: 'capigram_idempotency_claim',
    text: 'INSERT INTO idempotency_keys (api_key_id, key, created_at, endpoint) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING',
    values: [claim.apiKeyId, claim.key, claim.claimedAt, claim.endpoint],
  });
  return inserted.rowCount === 1;
}

/** What is stored under the key, if anything. */
export async function readClaim(db: Queryable, apiKeyId: string, key: string): Promise<ClaimRow | undefined> {
  const { rows } = await db.query<{
    status_code: number | null;
    response_body: StoredResponse | null;
    created_at: Date;
    endpoint: string | null;
  }>(
    'SELECT status_code, response_body, created_at, endpoint FROM idempotency_keys WHERE api_key_id = $1 AND key = $2',
    [apiKeyId, key],
  );
  const row = rows[0];
  return (
    row && {
      createdAt: row.created_at,
      status: row.status_code,
      body: row.response_body,
      endpoint: row.endpoint,
    }
  );
}

/** Takes over an expired or abandoned claim, as it was seen (`seen`); true for the one taker that wins. */
export async function takeOverClaim(
  db: Queryable,
  seen: ClaimRef,
  now: Date,
  endpoint: string,
): Promise<boolean> {
  const taken = await db.query(
    `UPDATE idempotency_keys SET created_at = $4, status_code = NULL, response_body = NULL, completed_at = NULL, endpoint = $5
     WHERE api_key_id = $1 AND key = $2 AND created_at = $3`,
    [seen.apiKeyId, seen.key, seen.claimedAt, now, endpoint],
  );
  return taken.rowCount === 1;
}

/** Releases the claim (only its own holder's: the claim time must match). */
export async function releaseClaim(db: Queryable, claim: ClaimRef): Promise<void> {
  await db.query('DELETE FROM idempotency_keys WHERE api_key_id = $1 AND key = $2 AND created_at = $3', [
    claim.apiKeyId,
    claim.key,
    claim.claimedAt,
  ]);
}

/** The statement that stores an answer under the claim (`storeAnswer` and `storeAnswerWrite`). */
const STORE_SQL = `UPDATE idempotency_keys SET status_code = $4, response_body = $5, completed_at = $6
             WHERE api_key_id = $1 AND key = $2 AND created_at = $3`;

function answerValues(claim: ClaimRef, answer: Answer): unknown[] {
  return [
    claim.apiKeyId,
    claim.key,
    claim.claimedAt,
    answer.status,
    JSON.stringify(answer.stored),
    answer.completedAt,
  ];
}

/** Stores the answer under the claim (only its own holder's). */
export async function storeAnswer(db: Queryable, claim: ClaimRef, answer: Answer): Promise<void> {
  await db.query({
    name: 'capigram_idempotency_store',
    text: STORE_SQL,
    values: answerValues(claim, answer),
  });
}

/** `storeAnswer` as a write for the work's own transaction (sent with its COMMIT; one statement each). */
export function storeAnswerWrite(claim: ClaimRef, answer: Answer): SharedWrite {
  const call = {
    name: 'capigram_idempotency_store_with_work',
    sql: STORE_SQL,
    values: answerValues(claim, answer),
  };
  return { kind: `idempotency_store ${claim.apiKeyId} ${claim.key}`, input: null, statement: () => call };
}

/** Claims the key and stores its answer in one statement, unless a row holds it. */
export async function claimWithAnswer(
  db: Queryable,
  claim: ClaimRef & { endpoint: string },
  answer: Answer,
): Promise<void> {
  await db.query({
    name: 'capigram_idempotency_claim_with_answer',
    text: `INSERT INTO idempotency_keys (api_key_id, key, created_at, status_code, response_body, completed_at, endpoint)
           VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
    values: [...answerValues(claim, answer), claim.endpoint],
  });
}

/** The kind of `claimWithAnswerWrite`'s writes, which a conversions' statement can carry. */
export const CLAIM_KIND = 'idempotency_claim';

/**
 * The claim of a new key and its answer, made by the work's own transaction with its COMMIT: the
 * row is written once, whole. A plain INSERT, so that a key another request holds fails it (a
 * unique violation, `isClaimConflict`) and the transaction is rolled back with its work; a holder
 * that has not committed yet makes it wait for that one's end.
 */
export function claimWithAnswerWrite(claim: ClaimRef & { endpoint: string }, answer: Answer): SharedWrite {
  return {
    // The claims of a shared event transaction go as one statement, in the order given (the one
    // order of claims): a conflict on any fails it, and the transaction with it.
    kind: CLAIM_KIND,
    input: {
      api_key_id: claim.apiKeyId,
      key: claim.key,
      created_at: claim.claimedAt,
      status_code: answer.status,
      response_body: answer.stored,
      completed_at: answer.completedAt,
      endpoint: claim.endpoint,
    },
    statement: (inputs) => ({
      name: 'capigram_idempotency_claims_with_work',
      sql: `INSERT INTO idempotency_keys (api_key_id, key, created_at, status_code, response_body, completed_at, endpoint)
            SELECT * FROM jsonb_to_recordset($1::jsonb) AS i(api_key_id uuid, key text, created_at timestamptz,
              status_code int, response_body jsonb, completed_at timestamptz, endpoint text)`,
      // As JSON text: the driver would send a bare array as a PostgreSQL array, not as jsonb.
      values: [JSON.stringify(inputs)],
    }),
  };
}

/**
 * The holes of an answer not known before its conversion is written: the answer's text is made
 * (`JSON.stringify`) with these strings in place of the conversion's id, its capiStatus and its
 * sends, and the conversion's own statement fills them in (`claimsCarriedSql`) as it writes the
 * claim. Control characters, which JSON writes escaped (`"\u0001…"`), so no value of an answer
 * reads as one; a hole stands for a whole JSON value, quotes included.
 */
export const ANSWER_HOLES = {
  conversionId: '\u0001conversionId',
  capiStatus: '\u0001capiStatus',
  sendId: '\u0001sendId',
  platform: '\u0001platform',
} as const;

/** How the sends of an answer with sends read in its text before they are filled in. */
const SENDS_HOLE = JSON.stringify([{ sendId: ANSWER_HOLES.sendId, platform: ANSWER_HOLES.platform }]);
const CONVERSION_ID_HOLE = JSON.stringify(ANSWER_HOLES.conversionId);
const CAPI_STATUS_HOLE = JSON.stringify(ANSWER_HOLES.capiStatus);

/**
 * A claim whose answer is that of a conversion written by the same statement: its text with sends
 * (`sentText`) and without (`unsentText`), holes and all, and the conversion's (site, Telegram
 * user), which a statement holds at most once.
 */
export interface CreatedAnswer {
  sentText: string;
  unsentText: string;
  siteId: string;
  telegramUserId: number;
}

/**
 * The claim of a new key whose answer depends on the conversion its work writes
 * (`claimWithAnswerWrite`'s row, with the answer's two texts in holes): written by the
 * conversions' statement itself, which carries it (`claimsCarriedSql`), so the key costs no
 * statement and no round trip of its own.
 */
export function claimWithCreatedAnswerWrite(
  claim: ClaimRef & { endpoint: string },
  answer: Omit<Answer, 'stored'> & { contentType: string },
  created: CreatedAnswer,
): SharedWrite {
  const write = claimWithAnswerWrite(claim, {
    status: answer.status,
    stored: { contentType: answer.contentType, text: created.sentText },
    completedAt: answer.completedAt,
  });
  return {
    ...write,
    input: {
      ...(write.input as object),
      unsent_text: created.unsentText,
      site_id: created.siteId,
      telegram_user_id: created.telegramUserId,
    },
  };
}

/** A JSON value as JSON.stringify writes it, for the ASCII values (uuids, names) that fill an answer. */
const jsonOf = (sql: string) => `to_json(${sql})::text`;

/**
 * The claims of a statement that writes conversions (CTE `conversion`) and their sends (CTE
 * `created_sends`), as one more CTE of it: `$param` holds the claims (`claimWithAnswerWrite` and
 * `claimWithCreatedAnswerWrite` inputs), inserted in the one order of claims (API key, then key,
 * byte by byte: the order the event transactions sort their claims in).
 * A claim with a conversion's (site, Telegram user) gets its answer's holes filled from that
 * conversion's row and its sends (in the order the statement returns them: their pixels' age);
 * any other is written as given. The sort reads every input row first, so the claims are
 * inserted after every other write of the statement: the claim is the transaction's last lock.
 */
export function claimsCarriedSql(param: string): string {
  const sends = `'[' || string_agg('{"sendId":' || ${jsonOf('s.send_id')} || ',"platform":' || ${jsonOf('s.platform')} || '}', ',' ORDER BY p.created_at, p.id) || ']'`;
  const filled = `replace(replace(replace(CASE WHEN x.sends IS NULL THEN k.unsent_text ELSE k.response_body->>'text' END,
        '${CONVERSION_ID_HOLE}', ${jsonOf('c.id')}), '${CAPI_STATUS_HOLE}', ${jsonOf('c.capi_status')}), '${SENDS_HOLE}', COALESCE(x.sends, '[]'))`;
  return `claim AS (
    INSERT INTO idempotency_keys (api_key_id, key, created_at, status_code, response_body, completed_at, endpoint)
    SELECT k.api_key_id, k.key, k.created_at, k.status_code,
      CASE WHEN k.site_id IS NULL THEN k.response_body
           ELSE jsonb_build_object('contentType', k.response_body->>'contentType', 'text', ${filled}) END,
      k.completed_at, k.endpoint
    FROM jsonb_to_recordset(${param}::jsonb) AS k(api_key_id uuid, key text, created_at timestamptz,
      status_code int, response_body jsonb, completed_at timestamptz, endpoint text, unsent_text text, site_id uuid,
      telegram_user_id bigint)
    LEFT JOIN conversion c ON c.site_id = k.site_id AND c.telegram_user_id = k.telegram_user_id
    LEFT JOIN LATERAL (SELECT ${sends} AS sends
      FROM created_sends s JOIN pixels p ON p.id = s.pixel_id WHERE s.subject_id = c.id) x ON true
    ORDER BY k.api_key_id, k.key COLLATE "C")`;
}

/** Whether `error` is `claimWithAnswerWrite` meeting a key another request holds. */
export function isClaimConflict(error: unknown): boolean {
  const e = error as { code?: unknown; constraint?: unknown } | null;
  return e?.code === '23505' && e.constraint === 'idempotency_keys_pkey';
}

/**
 * The API key look-up that also claims the request's key, in one round trip (`http/api/auth.ts`):
 * the key's row by its prefix, and a claim made only for a key that is not revoked and whose
 * whole hash matches. `claimed`: whether this statement claimed it.
 */
export function keyLookupAndClaimStatement(q: {
  prefix: string;
  claimKey: string | null;
  now: Date;
  hash: Buffer;
  endpoint: string;
}) {
  return {
    name: 'capigram_api_key_by_prefix_and_claim',
    text: `WITH k AS (SELECT id, account_id, site_id, secret_hash, revoked_at, last_used_at FROM api_keys WHERE prefix = $1),
                   claim AS (INSERT INTO idempotency_keys (api_key_id, key, created_at, endpoint)
                             SELECT k.id, $2, $3, $5 FROM k WHERE $2::text IS NOT NULL AND k.revoked_at IS NULL AND k.secret_hash = $4
                             ON CONFLICT DO NOTHING RETURNING 1)
                   SELECT k.*, EXISTS (SELECT 1 FROM claim) AS claimed FROM k`,
    values: [q.prefix, q.claimKey, q.now, q.hash, q.endpoint],
  };
}

/**
 * API key look-ups, several in one statement (`domain/api-key-lookup.ts`), each with what is stored
 * under its Idempotency-Key (read only when the whole key's hash matches).
 *
 * Ordinality keeps each answer with its question; a prefix that finds no key gives no row. The
 * stored answer is looked up per question (LATERAL). The statement is planned on every run (not
 * prepared): a plan kept from when the idempotency table was small goes on scanning all of it as
 * it grows (measured: 2.6 ms a look-up after 10,000 keyed requests), and one planning per batch of
 * look-ups costs little.
 */
export const KEY_LOOKUPS_WITH_PRIOR_SQL = `
  SELECT q.n::int AS n, k.id, k.account_id, k.site_id, k.secret_hash, k.revoked_at, k.last_used_at,
         i.created_at AS prior_at, i.status_code AS prior_status, i.response_body AS prior_body, i.endpoint AS prior_endpoint
  FROM unnest($1::text[], $2::text[], $3::bytea[]) WITH ORDINALITY AS q(prefix, claim_key, hash, n)
  JOIN api_keys k ON k.prefix = q.prefix
  LEFT JOIN LATERAL (
    SELECT created_at, status_code, response_body, endpoint FROM idempotency_keys
    WHERE api_key_id = k.id AND key = q.claim_key AND k.secret_hash = q.hash
  ) i ON true`;

/** Deletes idempotency rows older than the retention; returns how many went. */
export async function purgeIdempotencyKeys(db: Queryable, now: Date): Promise<number> {
  const cutoff = new Date(now.getTime() - IDEMPOTENCY_RETENTION_MS);
  const res = await db.query('DELETE FROM idempotency_keys WHERE created_at < $1', [cutoff]);
  return res.rowCount ?? 0;
}
