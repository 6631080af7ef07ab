import { apiKeyMatches, forwarderKeyPrefix } from '../../crypto/api-keys.js';
import type { Queryable } from '../../db/pool.js';

/**
 * Checking a forwarder key on the keyless surface. A Worker sends one with every tracker call, so
 * verdicts are remembered for a short while (a revocation takes effect within `VERDICT_TTL_MS`),
 * within a bound, rather than cost each call a round trip.
 */
export const VERDICT_TTL_MS = 30_000;
const MAX_VERDICTS = 1_000;

/** The site a valid key belongs to, or null for a malformed, unknown or revoked key. */
export type ForwarderVerdict = { siteId: string } | null;

export interface ForwarderKeys {
  check(key: string): Promise<ForwarderVerdict>;
}

export function createForwarderKeys(db: Queryable, now: () => number = Date.now): ForwarderKeys {
  const verdicts = new Map<string, { verdict: ForwarderVerdict; until: number }>();
  return {
    async check(key) {
      const prefix = forwarderKeyPrefix(key);
      if (prefix === null) return null;
      const known = verdicts.get(key);
      if (known !== undefined && known.until > now()) return known.verdict;
      const { rows } = await db.query<{ site_id: string; secret_hash: Buffer; revoked_at: Date | null }>(
        'SELECT site_id, secret_hash, revoked_at FROM forwarder_keys WHERE prefix = $1',
        [prefix],
      );
      const row = rows[0];
      // The hash is compared in constant time, and a wrong secret under a right prefix is as unknown as a wrong prefix.
      const verdict =
        row !== undefined && apiKeyMatches(key, row.secret_hash) && row.revoked_at === null
          ? { siteId: row.site_id }
          : null;
      if (verdicts.size >= MAX_VERDICTS) verdicts.delete(verdicts.keys().next().value!);
      verdicts.set(key, { verdict, until: now() + VERDICT_TTL_MS });
      return verdict;
    },
  };
}
