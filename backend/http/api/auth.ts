import type { MiddlewareHandler } from 'hono';
import { apiKeyMatches, apiKeyPrefix, hashApiKey } from '../../crypto/api-keys.js';
import { recordKeyUse, type KeyRow as LookedUpKey } from '../../domain/api-key-lookup.js';
import type { Deps } from '../../deps.js';
import { keyLookupAndClaimStatement } from '../../domain/idempotency.js';
import { ApiError } from '../errors.js';
import { bearerToken } from '../request-info.js';
import { endpointOf, type ApiEnv } from './env.js';
import { isIdempotencyKey } from './idempotency.js';

// Compared against when the prefix is unknown, so that a miss costs what a hit costs.
const DUMMY_HASH = hashApiKey('cgk_000000000000_unknown-key-comparison-placeholder');
// last_used_at is a hint for operators, not an audit log: write it at most once a minute per key.
const LAST_USED_RESOLUTION_MS = 60_000;

function unauthorized(): ApiError {
  // One answer for every failure: missing, malformed, unknown and revoked keys look alike.
  return new ApiError('UNAUTHORIZED', 'a valid API key is required: Authorization: Bearer <API_KEY>', {
    headers: { 'www-authenticate': 'Bearer realm="capigram"' },
  });
}

type Prior = 'prior_at' | 'prior_status' | 'prior_body' | 'prior_endpoint';
/** The look-up's row; what is stored under the Idempotency-Key only from the event endpoints' look-up, `claimed` only from the others'. */
type KeyRow = Omit<LookedUpKey, Prior> & Partial<Pick<LookedUpKey, Prior>> & { claimed?: boolean };

/**
 * `Authorization: Bearer <key>` for the business API. The key's public prefix finds the row; the
 * whole key is compared with the stored SHA-256 in constant time. The key itself is never logged
 * or stored, only the caller it stands for.
 *
 * A well-formed Idempotency-Key travels with the look-up, for a key whose hash matches (the digest
 * comparison in SQL only decides that; the caller is still decided by the constant-time comparison
 * below). By default it is claimed there, in the look-up's own round trip, if the key is not revoked;
 * a conflict claims nothing and leaves the key to the idempotency middleware, as does a malformed
 * key. With `claimInWork` (endpoints whose transaction claims the key itself) the look-up only
 * reads what is stored under it, so that a stored answer is replayed without another round trip.
 */
export function apiAuth(
  deps: Pick<Deps, 'pool' | 'now' | 'log' | 'local'>,
  { claimInWork = false } = {},
): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const key = bearerToken(c.req.header('authorization'));
    const prefix = key === undefined ? null : apiKeyPrefix(key);
    if (key === undefined || prefix === null) throw unauthorized();

    const idempotencyKey = c.req.header('idempotency-key');
    const claimKey = idempotencyKey !== undefined && isIdempotencyKey(idempotencyKey) ? idempotencyKey : null;
    const now = deps.now();
    // One of these runs on every business request: the event endpoints' look-up is coalesced with
    // its neighbours' (see domain/api-key-lookup.ts); the others' is prepared once per connection.
    const row: KeyRow | undefined = claimInWork
      ? await deps.local.keyLookups.find({ prefix, claimKey, hash: hashApiKey(key) })
      : (
          await deps.pool.query<KeyRow>(
            keyLookupAndClaimStatement({
              prefix,
              claimKey,
              now,
              hash: hashApiKey(key),
              endpoint: endpointOf(c),
            }),
          )
        ).rows[0];
    const matches = apiKeyMatches(key, row?.secret_hash ?? DUMMY_HASH);
    if (!row || !matches || row.revoked_at !== null) throw unauthorized();

    if (row.last_used_at === null || now.getTime() - row.last_used_at.getTime() > LAST_USED_RESOLUTION_MS) {
      recordKeyUse(deps.pool, row.id, now).catch((err: unknown) =>
        deps.log.debug({ err: String(err) }, 'could not record API key use'),
      );
    }
    c.set('caller', { keyId: row.id, accountId: row.account_id, siteId: row.site_id });
    if (row.claimed === true && claimKey !== null) c.set('earlyClaim', { key: claimKey, claimedAt: now });
    if (claimInWork && claimKey !== null) {
      const prior = row.prior_at
        ? {
            createdAt: row.prior_at,
            status: row.prior_status ?? null,
            body: row.prior_body ?? null,
            endpoint: row.prior_endpoint ?? null,
          }
        : null;
      c.set('priorClaim', { key: claimKey, row: prior });
    }
    await next();
  };
}
