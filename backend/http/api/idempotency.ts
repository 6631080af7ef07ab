import type { Context, MiddlewareHandler } from 'hono';
import type { SharedWrite } from '../../db/transaction-batch.js';
import type { LockedClaim } from '../../domain/conversions/lead-lock.js';
import {
  claimWithAnswerWrite,
  claimWithCreatedAnswerWrite,
  claimKey,
  claimWithAnswer,
  IDEMPOTENCY_REPLAY_WINDOW_MS,
  readClaim,
  releaseClaim,
  storeAnswer,
  storeAnswerWrite,
  takeOverClaim,
  type StoredResponse,
} from '../../domain/idempotency.js';
import type { Deps } from '../../deps.js';
import { endpointOf, type ApiEnv, type HeldClaim, type PriorClaim } from './env.js';
import { ApiError } from '../errors.js';

/**
 * `Idempotency-Key` on the business API (first layer of duplicate protection).
 *
 * The key is claimed with `INSERT … ON CONFLICT DO NOTHING` before the request runs, scoped to the
 * API key. The request's status and exact body are stored after it; a request with the same key
 * within 24 hours gets them back with `X-Idempotent-Replay: true` and runs nothing, whatever its
 * own body says. 4xx answers are stored like successes (the same request would fail the same way);
 * 5xx answers are not: the claim is released so that a retry can succeed.
 *
 * A key is bound to the endpoint it was first used on: its method and route pattern
 * (`endpointOf`). Within the same 24 hours the key on another endpoint is refused with 422
 * IDEMPOTENCY_KEY_REUSED and nothing runs: replaying another endpoint's answer would tell the
 * client its request was done when it never ran. (Rows stored before the endpoint was recorded
 * have none and replay as before.)
 *
 * While the first request runs, a duplicate waits up to a second for its result, then gets 409
 * IDEMPOTENCY_IN_PROGRESS. A claim still unfinished after a minute belongs to a request that died
 * with its process; it is taken over. A key older than 24 hours but not yet purged (rows live two
 * days) counts as new: the request runs again and its result replaces the old one.
 *
 * The event endpoints claim a new key inside their own transaction instead (`claimInWork`), which
 * changes two of the rules above for them: nothing is claimed before the work (the claim is
 * written with the answer, by the COMMIT's round trip), and a duplicate waits for as long as the
 * first request takes (behind it in this process's queue of events, or on the lead's lock, or at
 * its own claim, which then fails and rolls its work back; see `db/transaction-batch.ts`).
 */
export const IDEMPOTENCY_WAIT_MS = 1000;
export const IDEMPOTENCY_ABANDONED_MS = 60 * 1000;
const REPLAY_HEADER = 'X-Idempotent-Replay';

const KEY_RE = /^[\x20-\x7e]{1,128}$/;

export function isIdempotencyKey(key: string): boolean {
  return KEY_RE.test(key);
}
const POLL_MS = 20;

type Claim =
  | { kind: 'claimed'; claimedAt: Date }
  | { kind: 'replay'; status: number; stored: StoredResponse }
  | { kind: 'busy' }
  | { kind: 'reused' };

type StoreDeps = Pick<Deps, 'pool' | 'now' | 'log'>;

/**
 * `claimInWork`: for endpoints whose work runs in one transaction that claims the key itself
 * (`answerRecorder`'s `claim`), together with the key look-up's `claimInWork`. A new key is then
 * claimed, worked on and answered in that one transaction: a request that dies leaves nothing
 * behind, so its retry runs at once instead of meeting an unfinished claim. A duplicate that
 * arrives meanwhile waits (on the lead's lock, or at its own claim's row), then replays the answer.
 */
export function idempotency(deps: StoreDeps, { claimInWork = false } = {}): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const key = c.req.header('idempotency-key');
    if (key === undefined) return next();
    if (!isIdempotencyKey(key)) {
      throw new ApiError(
        'IDEMPOTENCY_KEY_INVALID',
        'Idempotency-Key must be 1 to 128 printable ASCII characters',
        {
          errors: [{ path: 'Idempotency-Key', message: 'must be 1 to 128 printable ASCII characters' }],
        },
      );
    }
    const apiKeyId = c.get('caller').keyId;
    const endpoint = endpointOf(c);
    const prior = claimInWork ? c.get('priorClaim') : undefined;
    if (prior?.key === key && prior.row !== null && boundElsewhere(prior.row, endpoint, deps.now()))
      throw reused();
    if (prior?.key === key && prior.row === null) {
      const held: HeldClaim = {
        apiKeyId,
        key,
        claimedAt: deps.now(),
        storedWithWork: false,
        inWork: true,
        endpoint,
      };
      c.set('heldClaim', held);
      await next();
      await settleInWork(deps, c, held);
      return;
    }
    const stored = prior?.key === key ? replayable(prior.row, deps.now()) : undefined;
    if (stored !== undefined) return replay(stored.status, stored.stored);
    // The API key look-up usually claimed it already (one round trip for both).
    const early = c.get('earlyClaim');
    const claim: Claim =
      early?.key === key
        ? { kind: 'claimed', claimedAt: early.claimedAt }
        : await acquire(deps, apiKeyId, key, endpoint);
    if (claim.kind === 'busy') throw inProgress();
    if (claim.kind === 'reused') throw reused();
    if (claim.kind === 'replay') return replay(claim.status, claim.stored);
    const held: HeldClaim = {
      apiKeyId,
      key,
      claimedAt: claim.claimedAt,
      storedWithWork: false,
      inWork: false,
      endpoint,
    };
    c.set('heldClaim', held);
    await next();
    if (!held.storedWithWork) await settle(deps, apiKeyId, key, claim.claimedAt, c.res);
  };
}

const IN_PROGRESS = 'a request with this Idempotency-Key is still executing; retry shortly';

function inProgress(): ApiError {
  return new ApiError('IDEMPOTENCY_IN_PROGRESS', IN_PROGRESS);
}

function reused(): ApiError {
  return new ApiError(
    'IDEMPOTENCY_KEY_REUSED',
    'this Idempotency-Key was first used on another endpoint in the last 24 hours; use a new key for this request',
  );
}

/** A key first used on another endpoint within the replay window (a row without an endpoint binds to none). */
function boundElsewhere(
  row: { createdAt: Date; endpoint: string | null },
  endpoint: string,
  now: Date,
): boolean {
  return (
    row.endpoint !== null &&
    row.endpoint !== endpoint &&
    now.getTime() - row.createdAt.getTime() < IDEMPOTENCY_REPLAY_WINDOW_MS
  );
}

function replay(status: number, stored: StoredResponse): Response {
  return new Response(stored.text, {
    status,
    headers: { 'content-type': stored.contentType, [REPLAY_HEADER]: 'true' },
  });
}

/** What is stored of an answer: its media type and exact bytes (the response itself still goes out). */
async function storedOf(res: Response): Promise<StoredResponse> {
  return {
    contentType: res.headers.get('content-type') ?? 'application/json',
    text: await res.clone().text(),
  };
}

/** A stored answer still within the replay window. */
function replayable(
  row: PriorClaim['row'],
  now: Date,
): { status: number; stored: StoredResponse } | undefined {
  if (row === null || row.status === null || row.body === null) return undefined;
  if (now.getTime() - row.createdAt.getTime() >= IDEMPOTENCY_REPLAY_WINDOW_MS) return undefined;
  return { status: row.status, stored: row.body };
}

/** Thrown by the work's transaction when another request holds the key (it was rolled back). */
export class ClaimTaken extends ApiError {
  constructor() {
    super('IDEMPOTENCY_IN_PROGRESS', IN_PROGRESS);
  }
}

/**
 * After work that was to claim the key in its own transaction. Stored with the work: done. Beaten
 * to the key by another request: its answer is replayed (or, if it is still running, 409). Any
 * other answer below 500 (a validation error, say) is stored with its claim in one statement; a 5xx
 * is not stored, and its transaction claimed nothing.
 */
async function settleInWork(deps: StoreDeps, c: Context<ApiEnv>, held: HeldClaim): Promise<void> {
  if (held.storedWithWork) return;
  if (c.error instanceof ClaimTaken) {
    const claim = await acquire(deps, held.apiKeyId, held.key, held.endpoint);
    if (claim.kind === 'reused') throw reused();
    if (claim.kind === 'replay') {
      c.res = replay(claim.status, claim.stored);
    } else if (claim.kind === 'claimed') {
      // The other request's claim went away (it failed, or expired) after beating this one: this
      // one has nothing to run any more. Let the client's retry run it.
      await releaseClaim(deps.pool, { apiKeyId: held.apiKeyId, key: held.key, claimedAt: claim.claimedAt });
    }
    return;
  }
  const res = c.res;
  if (res.status >= 500) return;
  try {
    await claimWithAnswer(deps.pool, held, {
      status: res.status,
      stored: await storedOf(res),
      completedAt: deps.now(),
    });
  } catch (err) {
    deps.log.warn({ err: String(err) }, 'could not store the idempotent response');
  }
}

export interface AnswerRecorder<T> {
  /** The write to commit with the work: stores the answer `c.json` will send for this outcome. */
  persist(outcome: T): SharedWrite;
  /** Call once the work's transaction committed: the middleware then stores nothing more. */
  committed(): void;
  /** For a key claimed in the work's transaction: the claim, written with the answer by `persist`. */
  claim?: LockedClaim;
  /**
   * For a key claimed in the work's transaction: `persist` before the outcome is known, of the
   * outcome with holes that the work's write fills in (`claimWithCreatedAnswerWrite`), with sends
   * and without; both must answer with one status.
   */
  persistCreated?: (created: { sent: T; unsent: T; siteId: string; telegramUserId: number }) => SharedWrite;
}

/**
 * For a handler whose work commits in one transaction: stores the answer in that transaction, so
 * that the answer is kept exactly when the work is (a crash between the two can no longer leave a
 * done request without its answer, which a retry would meet as "in progress"). Undefined when the
 * request holds no claim. `answer` must give the status and body the handler then sends with
 * `c.json`, whose bytes (`JSON.stringify`) and media type are what is stored.
 */
export function answerRecorder<T>(
  c: Context<ApiEnv>,
  deps: Pick<Deps, 'now'>,
  answer: (outcome: T) => { status: number; body: unknown },
): AnswerRecorder<T> | undefined {
  const held = c.get('heldClaim');
  if (held === undefined) return undefined;
  let persisted = false;
  /** What is stored of the answer `c.json` will send. */
  const answered = (outcome: T) => {
    const { status, body } = answer(outcome);
    return {
      status,
      stored: { contentType: 'application/json', text: JSON.stringify(body) },
      completedAt: deps.now(),
    };
  };
  return {
    ...(held.inWork
      ? {
          claim: {
            id: `${held.apiKeyId}:${held.key}`,
            taken: () => new ClaimTaken(),
          },
        }
      : {}),
    ...(held.inWork
      ? {
          persistCreated({ sent, unsent, siteId, telegramUserId }) {
            persisted = true;
            const withSends = answered(sent);
            const without = answered(unsent);
            if (withSends.status !== without.status)
              throw new Error('answerRecorder: two statuses for one answer');
            return claimWithCreatedAnswerWrite(
              held,
              {
                status: withSends.status,
                contentType: withSends.stored.contentType,
                completedAt: withSends.completedAt,
              },
              { sentText: withSends.stored.text, unsentText: without.stored.text, siteId, telegramUserId },
            );
          },
        }
      : {}),
    persist(outcome) {
      persisted = true;
      // A key claimed by the work's transaction is written once, claim and answer together.
      return held.inWork
        ? claimWithAnswerWrite(held, answered(outcome))
        : storeAnswerWrite(held, answered(outcome));
    },
    committed() {
      if (persisted) held.storedWithWork = true;
    },
  };
}

async function acquire(deps: StoreDeps, apiKeyId: string, key: string, endpoint: string): Promise<Claim> {
  const deadline = Date.now() + IDEMPOTENCY_WAIT_MS;
  for (;;) {
    const now = deps.now();
    if (await claimKey(deps.pool, { apiKeyId, key, claimedAt: now, endpoint }))
      return { kind: 'claimed', claimedAt: now };

    const row = await readClaim(deps.pool, apiKeyId, key);
    if (!row) continue; // released or purged in between: claim again
    const age = now.getTime() - row.createdAt.getTime();
    if (boundElsewhere(row, endpoint, now)) return { kind: 'reused' };
    if (row.status !== null && row.body !== null && age < IDEMPOTENCY_REPLAY_WINDOW_MS) {
      return { kind: 'replay', status: row.status, stored: row.body };
    }
    if (age >= IDEMPOTENCY_REPLAY_WINDOW_MS || (row.status === null && age >= IDEMPOTENCY_ABANDONED_MS)) {
      // Expired, or abandoned by a request that died: take it over (one taker wins the race).
      if (await takeOverClaim(deps.pool, { apiKeyId, key, claimedAt: row.createdAt }, now, endpoint))
        return { kind: 'claimed', claimedAt: now };
      continue;
    }
    if (Date.now() >= deadline) return { kind: 'busy' };
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** Stores a final answer, or releases the claim after a 5xx. Only the claim's own holder may do either. */
async function settle(
  deps: StoreDeps,
  apiKeyId: string,
  key: string,
  claimedAt: Date,
  res: Response,
): Promise<void> {
  try {
    if (res.status >= 500) {
      await releaseClaim(deps.pool, { apiKeyId, key, claimedAt });
      return;
    }
    await storeAnswer(
      deps.pool,
      { apiKeyId, key, claimedAt },
      { status: res.status, stored: await storedOf(res), completedAt: deps.now() },
    );
  } catch (err) {
    // The work is done and its answer goes out; a retry then meets the unfinished claim (409, then
    // after a minute a re-run that the recent-conversion match turns into a reuse).
    deps.log.warn({ err: String(err) }, 'could not store the idempotent response');
  }
}
