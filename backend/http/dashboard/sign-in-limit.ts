import { isIP } from 'node:net';
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
        await limiter.consume(clientKey(ip));
        return 0;
      } catch (err) {
        // Over the budget: the try was not granted.
        if (err instanceof RateLimiterRes) return Math.max(1000, err.msBeforeNext);
        throw err;
      }
    },
    async giveBack(ip) {
      await limiter.reward(clientKey(ip), 1);
    },
  };
}

/**
 * Whose budget a try is taken from: an IPv4 address, or an IPv6 address's /64. One host (any
 * VPS, any home connection) holds a whole /64 and can pick a fresh address for every request, so
 * counting IPv6 addresses one by one would let a guesser try without end.
 */
export function clientKey(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  let text = ip.split('%')[0]!.toLowerCase();
  // An IPv4 client seen through an IPv6 socket is that IPv4 address.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (mapped) return mapped[1]!;
  // A dotted IPv4 tail (::ffff:1.2.3.4) as its two groups.
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}
