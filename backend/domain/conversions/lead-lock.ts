import type { Pool } from '../../db/pool.js';
import { retryLockConflicts } from '../../db/lock-conflict.js';
import { ensurePrepared, execute, withSession, type PreparedCall } from '../../db/prepared-batch.js';
import {
  type LockedClaim,
  type LockedFinish,
  type LockedWork,
  type SharedRead,
  type SharedWrite,
  writeStatements,
} from '../../db/transaction-batch.js';
import { isClaimConflict } from '../idempotency.js';

/**
 * Business events for one Telegram user of one account run one at a time: their transaction starts
 * with an advisory lock, so concurrent duplicates see each other (the second waits, then finds the
 * first's conversion and reuses it). Per account rather than per site because the site may only
 * be known from the user's history, which is read under the lock.
 *
 * Round trips are what an event costs, so the transaction takes as few as it can. BEGIN, the lock
 * and the first read under it travel together: a multi-statement simple query, in which each
 * statement takes its own snapshot, so the read sees everything committed before the lock was
 * granted. The last write may likewise travel with the COMMIT (`db/prepared-batch.ts` prepares
 * the statements once per connection and executes them with quoted literals); the lock key is
 * checked before it is written into the text.
 *
 * Locks are taken in the one order every transaction of Capigram follows
 * (docs/architecture.md#lock-order): the lead lock, then rows (conversions by id, then their sends
 * by id), and last the Idempotency-Key's claim, written with the answer. A transaction PostgreSQL ends for a deadlock or a
 * serialization failure anyway is run again (`retryLockConflicts`): it kept nothing.
 */
export const LEAD_LOCK_CLASS = 4_040_001; // the two-int lock space never collides with single-bigint locks
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export type { LockedClaim, LockedFinish, PreparedCall, SharedRead, SharedWrite };

/** The text the lead lock is taken on: one per (account, Telegram user). */
export function leadLockKey(accountId: string, telegramUserId: number): string {
  if (!UUID.test(accountId) || !Number.isSafeInteger(telegramUserId))
    throw new Error('withLeadLock: malformed lock key');
  return `${accountId}:${telegramUserId}`;
}

/**
 * The statement that takes the lead locks of `keys` (from `leadLockKey`, so safe to quote as they
 * are), in ascending order of the lock's own value: transactions that take several never deadlock
 * on each other. Two keys may hash alike: DISTINCT takes such a lock once; the ordered subquery is
 * not flattened, so the locks are taken in its order.
 */
export function leadLockStatement(keys: readonly string[]): string {
  if (keys.length === 1) return `SELECT pg_advisory_xact_lock(${LEAD_LOCK_CLASS}, hashtext('${keys[0]}'))`;
  const list = keys.map((k) => `'${k}'`).join(', ');
  return `SELECT pg_advisory_xact_lock(${LEAD_LOCK_CLASS}, h) FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest(ARRAY[${list}]::text[]) k ORDER BY 1) ordered`;
}

/** Work for one lead: whose lock, and what runs under it (see `LockedWork`). */
export interface LeadWork<T, R> extends LockedWork<T, R> {
  accountId: string;
  telegramUserId: number;
}

/**
 * The work alone in its transaction. `persist` records the result with the COMMIT (a record the last
 * write carries, `LockedFinish.record`, goes in that write's statement); with a claim (the business
 * API's Idempotency-Key) that record is the claim, and a key another request holds fails it: the
 * work is rolled back and `claim.taken()` thrown. A lone event
 * locks at most one existing conversion (taken by the work itself, conversion then sends), so
 * `locks` matters only to the batches of `event-batches.ts`, which lock all of theirs first.
 */
export async function withLeadLock<T, R>(
  pool: Pool,
  { accountId, telegramUserId, read, fn, persist, claim }: LeadWork<T, R>,
): Promise<T> {
  const key = leadLockKey(accountId, telegramUserId);
  return retryLockConflicts(() =>
    withSession(pool, async (client) => {
      const readCall = read.statement([read.input]);
      await ensurePrepared(client, readCall);
      const lock = leadLockStatement([key]);
      const opened = (await client.query(`BEGIN; ${lock}; ${execute(client, readCall)}`)) as unknown as {
        rows: unknown[];
      }[];
      const finish = await fn(client, read.rowsOf(opened.at(-1)!.rows, 0));
      const commit = async (calls: PreparedCall[]) => {
        for (const call of calls) await ensurePrepared(client, call);
        try {
          return (await client.query(
            [...calls.map((call) => execute(client, call)), 'COMMIT'].join('; '),
          )) as unknown as { rows: never[] }[];
        } catch (error) {
          // The session rolls the work back.
          if (claim !== undefined && isClaimConflict(error)) throw claim.taken();
          throw error;
        }
      };
      if ('last' in finish && persist !== undefined && finish.record === undefined) {
        // The record needs the result, and the result the last write's rows: the write goes
        // alone, then the record travels with the COMMIT (one commit, nothing committed without
        // its record).
        const last = finish.last.statement([finish.last.input]);
        await ensurePrepared(client, last);
        const result = finish.result(
          ((await client.query(execute(client, last))) as unknown as { rows: never[] }).rows,
        );
        const written = persist(result);
        await commit(written === null ? [] : [written.statement([written.input])]);
        return result;
      }
      // The last write, and the record (of the result known already, or carried by the write),
      // go with the COMMIT.
      const record = 'last' in finish ? (finish.record ?? null) : (persist?.(finish.result) ?? null);
      const { calls, callOf } = writeStatements(
        'last' in finish ? [finish.last] : [],
        record === null ? [] : [record],
      );
      const closed = await commit(calls);
      const result = 'last' in finish ? finish.result(closed[callOf[0]!]!.rows) : finish.result;
      return result;
    }),
  );
}
