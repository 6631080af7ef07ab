import { BurstyRateLimiter, RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { z } from 'zod';
import type { Pool } from '../../db/pool.js';
import { ApiError } from '../../errors.js';

/**
 * Rate limits of the keyless surface, per (site, browser IP) and per group of endpoints. Counters
 * live in PostgreSQL (`capigram_rate_limits`, created by migration 020), so every backend process
 * counts against the same budget. Each group allows N requests a minute, plus a burst allowance
 * of B further requests per ten minutes that is drawn on only once the minute's budget is spent.
 */
export type LimitGroup = 'init' | 'fbp' | 'invite';

/** Environment variables (documented in docs/tracker-api.md); 0 turns a group's limit off. */
export const RATE_LIMIT_ENV = {
  init: 'TRACKER_RATE_LIMIT_INIT',
  fbp: 'TRACKER_RATE_LIMIT_FBP',
  invite: 'TRACKER_RATE_LIMIT_INVITE',
  burst: 'TRACKER_RATE_LIMIT_BURST',
} as const;

const count = (fallback: number) => z.coerce.number().int().min(0).max(1_000_000).default(fallback);

const SettingsSchema = z.object({
  [RATE_LIMIT_ENV.init]: count(120),
  [RATE_LIMIT_ENV.fbp]: count(60),
  [RATE_LIMIT_ENV.invite]: count(30),
  [RATE_LIMIT_ENV.burst]: count(60),
});

export interface RateLimitSettings {
  /** Requests per minute per (site, IP), by group; 0: unlimited. */
  perMinute: Record<LimitGroup, number>;
  /** Extra requests per ten minutes per (site, IP) and group once the minute's budget is spent. */
  burstPerTenMinutes: number;
}

const TABLE = 'capigram_rate_limits';

/** Reads the settings from the environment's variables (strings) or typed config (numbers). */
export function rateLimitSettings(source: object): RateLimitSettings {
  const picked = Object.fromEntries(
    Object.values(RATE_LIMIT_ENV).flatMap((name) => {
      const value = (source as Record<string, unknown>)[name];
      return value === undefined || value === '' ? [] : [[name, value]];
    }),
  );
  const parsed = SettingsSchema.safeParse(picked);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${String(issue?.path[0] ?? 'TRACKER_RATE_LIMIT_*')} must be a whole number between 0 and 1000000`);
  }
  const s = parsed.data;
  return {
    perMinute: { init: s[RATE_LIMIT_ENV.init], fbp: s[RATE_LIMIT_ENV.fbp], invite: s[RATE_LIMIT_ENV.invite] },
    burstPerTenMinutes: s[RATE_LIMIT_ENV.burst],
  };
}

export interface KeylessRateLimiter {
  /** Counts one request; throws RATE_LIMITED (429, with Retry-After) when over the limit. */
  consume(group: LimitGroup, siteId: string, ip: string): Promise<void>;
}

type Limiter = Pick<RateLimiterPostgres, 'consume'>;

export function createRateLimiter(pool: Pool, settings: RateLimitSettings): KeylessRateLimiter {
  const store = (keyPrefix: string, points: number, duration: number) =>
    new RateLimiterPostgres({ storeClient: pool, storeType: 'pool', tableName: TABLE, tableCreated: true, keyPrefix, points, duration });
  const limiters = new Map<LimitGroup, Limiter>();
  for (const group of ['init', 'fbp', 'invite'] as const) {
    const perMinute = settings.perMinute[group];
    if (perMinute === 0) continue;
    const sustained = store(`kl_${group}`, perMinute, 60);
    limiters.set(
      group,
      settings.burstPerTenMinutes > 0 ? new BurstyRateLimiter(sustained, store(`kl_${group}_burst`, settings.burstPerTenMinutes, 600)) : sustained,
    );
  }
  return {
    async consume(group, siteId, ip) {
      const limiter = limiters.get(group);
      if (limiter === undefined) return;
      try {
        await limiter.consume(`${siteId}:${ip}`);
      } catch (err) {
        if (!(err instanceof RateLimiterRes)) throw err;
        const retryAfter = String(Math.max(1, Math.ceil(err.msBeforeNext / 1000)));
        throw new ApiError('RATE_LIMITED', `too many ${group} requests from this address for this site; retry after ${retryAfter} s`, {
          headers: { 'Retry-After': retryAfter },
        });
      }
    },
  };
}
