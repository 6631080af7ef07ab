import { BurstyRateLimiter, RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { clientBudgetKey } from '../../shared/client-ip.js';
import type { Config } from '../config.js';
import type { Pool } from '../db/pool.js';
import type { SqlFragment } from './outbox/sends.js';
import type { VisitAdmission } from './tracker/visits.js';
import { ApiError } from '../errors.js';

/**
 * Rate limits of the keyless surface, per (site, browser IP) and per group of endpoints. Counters
 * live in PostgreSQL (`capigram_rate_limits`, created by migration 020), so every backend process
 * counts against the same budget. Each group allows N requests a minute, plus a burst allowance
 * of B further requests per ten minutes that is drawn on only once the minute's budget is spent.
 */
export type LimitGroup = 'init' | 'fbp' | 'invite';

/** Environment variables (documented in docs/tracker-api.md; parsed in config.ts); 0 turns a group's limit off. */
export const RATE_LIMIT_ENV = {
  init: 'TRACKER_RATE_LIMIT_INIT',
  fbp: 'TRACKER_RATE_LIMIT_FBP',
  invite: 'TRACKER_RATE_LIMIT_INVITE',
  burst: 'TRACKER_RATE_LIMIT_BURST',
} as const;

export interface RateLimitSettings {
  /** Requests per minute per (site, IP), by group; 0: unlimited. */
  perMinute: Record<LimitGroup, number>;
  /** Extra requests per ten minutes per (site, IP) and group once the minute's budget is spent. */
  burstPerTenMinutes: number;
}

const TABLE = 'capigram_rate_limits';

/** The settings of the process's config, where the variables are parsed with the others. */
export function rateLimitSettings(
  config: Pick<Config, (typeof RATE_LIMIT_ENV)[keyof typeof RATE_LIMIT_ENV]>,
): RateLimitSettings {
  return {
    perMinute: {
      init: config.TRACKER_RATE_LIMIT_INIT,
      fbp: config.TRACKER_RATE_LIMIT_FBP,
      invite: config.TRACKER_RATE_LIMIT_INVITE,
    },
    burstPerTenMinutes: config.TRACKER_RATE_LIMIT_BURST,
  };
}

export interface KeylessRateLimiter {
  /** Counts one request; throws RATE_LIMITED (429, with Retry-After) when over the limit. */
  consume(group: LimitGroup, siteId: string, ip: string): Promise<void>;
  /**
   * The same count, made by the statement that records the visit (`recordVisit`), so that
   * track/init costs one round trip: a refused request writes nothing but its count and gets the
   * same RATE_LIMITED.
   */
  visitAdmission(group: LimitGroup, siteId: string, ip: string): VisitAdmission;
}

const SUSTAINED_SECONDS = 60;
const BURST_SECONDS = 600;
const prefixOf = (group: LimitGroup) => `kl_${group}`;
const burstPrefixOf = (group: LimitGroup) => `kl_${group}_burst`;

function rateLimited(group: LimitGroup, msBeforeNext: number): ApiError {
  const retryAfter = String(Math.max(1, Math.ceil(msBeforeNext / 1000)));
  return new ApiError(
    'RATE_LIMITED',
    `too many ${group} requests from this address for this site; retry after ${retryAfter} s`,
    {
      headers: { 'Retry-After': retryAfter },
    },
  );
}

/**
 * One counter's upsert, exactly as rate-limiter-flexible's RateLimiterPostgres makes it (its row
 * layout, its `prefix:key` keys, its window that restarts once expired), so both count against
 * the same budget: `source` decides whether the row is counted at all.
 */
function counterUpsert(key: string, seconds: string, now: string, source: string): string {
  return `INSERT INTO ${TABLE} AS t (key, points, expire) SELECT ${key}, 1, ${now} + ${seconds} * 1000 ${source}
    ON CONFLICT (key) DO UPDATE SET
      points = CASE WHEN t.expire <= ${now} THEN 1 ELSE t.points + 1 END,
      expire = CASE WHEN t.expire <= ${now} THEN ${now} + ${seconds} * 1000 ELSE t.expire END
    RETURNING points, expire`;
}

/**
 * BurstyRateLimiter's rule in SQL: the minute's counter first; only once it is spent, the burst
 * counter. Allowed while either is within its budget; otherwise retry when the sooner one resets.
 */
function counterSql(
  settings: RateLimitSettings,
  group: LimitGroup,
  key: string,
  firstParam: number,
): SqlFragment {
  const perMinute = settings.perMinute[group];
  if (perMinute === 0)
    return { text: 'admission AS (SELECT true AS allowed, 0::bigint AS retry_ms)', params: [] };
  const [k, now, limit, bk, burst] = [0, 1, 2, 3, 4].map((i) => `$${firstParam + i}`);
  const nowMs = `${now}::bigint`;
  const sustained = [`${prefixOf(group)}:${key}`, Date.now(), perMinute];
  if (settings.burstPerTenMinutes === 0) {
    return {
      text: `counted AS (${counterUpsert(`${k}::varchar`, String(SUSTAINED_SECONDS), nowMs, '')}),
        admission AS (SELECT c.points <= ${limit}::int AS allowed, c.expire - ${nowMs} AS retry_ms FROM counted c)`,
      params: sustained,
    };
  }
  return {
    text: `counted AS (${counterUpsert(`${k}::varchar`, String(SUSTAINED_SECONDS), nowMs, '')}),
      burst_counted AS (${counterUpsert(`${bk}::varchar`, String(BURST_SECONDS), nowMs, `FROM counted WHERE points > ${limit}::int`)}),
      admission AS (
        SELECT c.points <= ${limit}::int OR coalesce(b.points <= ${burst}::int, false) AS allowed,
               least(c.expire, b.expire) - ${nowMs} AS retry_ms
        FROM counted c LEFT JOIN burst_counted b ON true)`,
    params: [...sustained, `${burstPrefixOf(group)}:${key}`, settings.burstPerTenMinutes],
  };
}

type Limiter = Pick<RateLimiterPostgres, 'consume'>;

export function createRateLimiter(pool: Pool, settings: RateLimitSettings): KeylessRateLimiter {
  const store = (keyPrefix: string, points: number, duration: number) =>
    new RateLimiterPostgres({
      storeClient: pool,
      storeType: 'pool',
      tableName: TABLE,
      tableCreated: true,
      keyPrefix,
      points,
      duration,
    });
  const limiters = new Map<LimitGroup, Limiter>();
  for (const group of ['init', 'fbp', 'invite'] as const) {
    const perMinute = settings.perMinute[group];
    if (perMinute === 0) continue;
    const sustained = store(prefixOf(group), perMinute, SUSTAINED_SECONDS);
    limiters.set(
      group,
      settings.burstPerTenMinutes > 0
        ? new BurstyRateLimiter(
            sustained,
            store(burstPrefixOf(group), settings.burstPerTenMinutes, BURST_SECONDS),
          )
        : sustained,
    );
  }
  return {
    async consume(group, siteId, ip) {
      const limiter = limiters.get(group);
      if (limiter === undefined) return;
      try {
        await limiter.consume(`${siteId}:${clientBudgetKey(ip)}`);
      } catch (err) {
        if (!(err instanceof RateLimiterRes)) throw err;
        throw rateLimited(group, err.msBeforeNext);
      }
    },
    visitAdmission(group, siteId, ip) {
      const key = `${siteId}:${clientBudgetKey(ip)}`;
      const perMinute = settings.perMinute[group];
      return {
        sql: (firstParam) => counterSql(settings, group, key, firstParam),
        counter:
          perMinute === 0
            ? null
            : {
                key: `${prefixOf(group)}:${key}`,
                limit: perMinute,
                burstKey: settings.burstPerTenMinutes === 0 ? null : `${burstPrefixOf(group)}:${key}`,
                burstLimit: settings.burstPerTenMinutes,
                nowMs: Date.now(),
                seconds: SUSTAINED_SECONDS,
                burstSeconds: BURST_SECONDS,
              },
        refusal: (ms) => rateLimited(group, ms),
        key: `${group}:${key}`,
      };
    },
  };
}
