/**
 * Transactions PostgreSQL ended to break a lock conflict: a deadlock (40P01), or a serialization
 * failure (40001). Nothing of such a transaction was kept, so running it again is safe, and it
 * usually succeeds at once (the other side went on). Capigram takes its locks in one order (see
 * docs/architecture.md#lock-order), so these should not happen; the retry is the second line.
 */
export const LOCK_CONFLICT_CODES = new Set(['40P01', '40001']);

/** How often a transaction ended by a lock conflict is run, the first time included. */
export const LOCK_CONFLICT_TRIES = 4;

export function isLockConflict(err: unknown): boolean {
  return (
    typeof err === 'object' &&
    err !== null &&
    LOCK_CONFLICT_CODES.has((err as { code?: unknown }).code as string)
  );
}

/** A short random pause, so that two transactions that met do not meet again in step. */
export function conflictPause(attempt: number): Promise<void> {
  return new Promise((r) => setTimeout(r, Math.random() * 10 * 2 ** attempt));
}

/**
 * Runs `tx` (a whole transaction, begun and ended inside it) again when PostgreSQL ended it for a
 * lock conflict, up to `LOCK_CONFLICT_TRIES` times; any other error, or the last conflict, is thrown.
 */
export async function retryLockConflicts<T>(tx: () => Promise<T>, tries = LOCK_CONFLICT_TRIES): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await tx();
    } catch (err) {
      if (!isLockConflict(err) || attempt >= tries) throw err;
      await conflictPause(attempt);
    }
  }
}
