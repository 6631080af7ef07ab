import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import type { Pool } from '../../db/pool.js';

/**
 * Failed dashboard sign-ins per client address, counted in PostgreSQL (the keyless surface's
 * counter table, another key prefix) so every backend process shares the budget. A generated
 * ADMIN_TOKEN cannot be guessed anyway; an operator-chosen one might be weak, and this keeps an
 * online guesser to a handful of tries a quarter-hour.
 */
export const SIGN_IN_FAILURES_ALLOWED = 10;
export const SIGN_IN_WINDOW_SECONDS = 15 * 60;

export interface SignInLimit {
  /** Milliseconds until the address may try again, or 0 when it may try now. */
  blockedFor(ip: string): Promise<number>;
  /** Counts a failed attempt. */
  failed(ip: string): Promise<void>;
}

export function createSignInLimit(pool: Pool): SignInLimit {
  const limiter = new RateLimiterPostgres({
    storeClient: pool,
    storeType: 'pool',
    tableName: 'capigram_rate_limits',
    tableCreated: true,
    keyPrefix: 'dash_sign_in',
    points: SIGN_IN_FAILURES_ALLOWED,
    duration: SIGN_IN_WINDOW_SECONDS,
  });
  return {
    async blockedFor(ip) {
      const res = await limiter.get(ip);
      return res !== null && res.consumedPoints >= SIGN_IN_FAILURES_ALLOWED ? Math.max(1000, res.msBeforeNext) : 0;
    },
    async failed(ip) {
      try {
        await limiter.consume(ip);
      } catch (err) {
        // Over the budget already: the count stays where it is, the answer is the same refusal.
        if (!(err instanceof RateLimiterRes)) throw err;
      }
    },
  };
}
