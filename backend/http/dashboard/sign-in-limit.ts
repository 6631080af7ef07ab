import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { clientBudgetKey } from '../../../shared/client-ip.js';
import type { Pool } from '../../db/pool.js';

/**
 * Failed dashboard sign-ins per client address, counted in PostgreSQL (the keyless surface's
 * counter table, another key prefix) so every backend process shares the budget. A generated
 * ADMIN_TOKEN cannot be guessed anyway; an operator-chosen one might be weak, and this keeps an
 * online guesser to a handful of tries a quarter-hour.
 */
export const SIGN_IN_FAILURES_ALLOWED = 10;
const SIGN_IN_WINDOW_SECONDS = 15 * 60;

export interface SignInLimit {
  /**
   * Takes one try from the address's budget, before the token is looked at: 0 when the try may
   * go ahead, else the milliseconds until the address may try again. One atomic upsert, so
   * parallel guesses (from any process) cannot all pass a check made before any of them counted.
   */
  take(ip: string): Promise<number>;
  /** Gives a taken try back: the token was right, and right tokens never use up the budget. */
  giveBack(ip: string): Promise<void>;
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
    async take(ip) {
      try {
        await limiter.consume(clientBudgetKey(ip));
        return 0;
      } catch (err) {
        // Over the budget: the try was not granted.
        if (err instanceof RateLimiterRes) return Math.max(1000, err.msBeforeNext);
        throw err;
      }
    },
    async giveBack(ip) {
      await limiter.reward(clientBudgetKey(ip), 1);
    },
  };
}
