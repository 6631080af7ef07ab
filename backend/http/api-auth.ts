import type { MiddlewareHandler } from 'hono';
import { apiKeyMatches, apiKeyPrefix, hashApiKey } from '../crypto/api-keys.js';
import type { Deps } from '../deps.js';
import type { ApiCaller } from '../domain/conversions/site-scope.js';
import { ApiError } from './errors.js';

/** Variables of a business API request: the app's request id plus the authenticated caller. */
export type ApiEnv = { Variables: { requestId: string; caller: ApiCaller } };

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
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

/**
 * `Authorization: Bearer <key>` for the business API. The key's public prefix finds the row; the
 * whole key is compared with the stored SHA-256 in constant time. The key itself is never logged
 * or stored, only the caller it stands for.
 */
export function apiAuth(deps: Pick<Deps, 'pool' | 'now' | 'log'>): MiddlewareHandler<ApiEnv> {
  return async (c, next) => {
    const key = BEARER.exec(c.req.header('authorization') ?? '')?.[1];
    const prefix = key === undefined ? null : apiKeyPrefix(key);
    if (key === undefined || prefix === null) throw unauthorized();

    const { rows } = await deps.pool.query<{
      id: string; account_id: string; site_id: string | null; secret_hash: Buffer; revoked_at: Date | null; last_used_at: Date | null;
    }>({
      // Prepared once per connection: it runs on every business request.
      name: 'capigram_api_key_by_prefix',
      text: 'SELECT id, account_id, site_id, secret_hash, revoked_at, last_used_at FROM api_keys WHERE prefix = $1',
      values: [prefix],
    });
    const row = rows[0];
    const matches = apiKeyMatches(key, row?.secret_hash ?? DUMMY_HASH);
    if (!row || !matches || row.revoked_at !== null) throw unauthorized();

    const now = deps.now();
    if (row.last_used_at === null || now.getTime() - row.last_used_at.getTime() > LAST_USED_RESOLUTION_MS) {
      deps.pool
        .query('UPDATE api_keys SET last_used_at = $2 WHERE id = $1', [row.id, now])
        .catch((err: unknown) => deps.log.debug({ err: String(err) }, 'could not record API key use'));
    }
    c.set('caller', { keyId: row.id, accountId: row.account_id, siteId: row.site_id });
    await next();
  };
}
