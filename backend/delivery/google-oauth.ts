import { createHash } from 'node:crypto';
import {
  allFailed,
  allRetry,
  isRecord,
  parseJsonObject,
  retryAfterMs,
  stringField,
  truncateError,
} from '../platforms/response.js';
import type {
  DeliveryEvent,
  EventOutcome,
  PixelConfig,
  PixelConfigOf,
  PlatformResponse,
} from '../platforms/types.js';
import { performRequest } from './http.js';

/**
 * Google Ads access tokens expire about an hour after they are issued, so a Google pixel may hold
 * OAuth client credentials and a refresh token instead: before a request the pipeline asks
 * `authorize` for the pixel as it should be sent, and this module exchanges the refresh token at
 * `{GOOGLE_OAUTH_URL}/token` when it holds no access token that is still good.
 *
 * Access tokens are cached in this process only, keyed by a digest of the credentials: another
 * process, or this one after a restart, simply refreshes again (Google issues as many as asked).
 */

export interface RefreshCredentials {
  clientId: string;
  clientSecret: string;
  refreshToken: string;
}

/** The pixel ready to be sent, or why it cannot be (`retry`: the token endpoint may answer later). */
export type Authorized =
  | { pixel: PixelConfig; refreshed?: RefreshedToken }
  | { error: string; retry: boolean; delayMs?: number; configuration?: true };

/** Which cached token a request used, so a 401 discards that token and not a newer one. */
export interface RefreshedToken {
  key: string;
  accessToken: string;
}

interface CachedToken {
  accessToken: string;
  expiresAtMs: number;
}

/** Refresh this long before Google's `expires_in` runs out (or after half the lifetime, for short-lived tokens). */
const EXPIRY_MARGIN_MS = 60_000;
/** What Google documents when a token answer carries no `expires_in`. */
const DEFAULT_LIFETIME_SEC = 3600;
/** The token endpoint's own error codes that no retry can fix (RFC 6749 §5.2). */
const PERMANENT_OAUTH_ERRORS: ReadonlySet<string> = new Set([
  'invalid_grant',
  'invalid_client',
  'unauthorized_client',
  'invalid_request',
  'unsupported_grant_type',
  'invalid_scope',
]);

/** Google access tokens, cached until they run out: held by the process (`process-state.ts`). */
export class GoogleTokens {
  readonly cache = new Map<string, CachedToken>();
  /** One exchange at a time per credentials: concurrent jobs of one pixel share its answer. */
  readonly inFlight = new Map<string, Promise<TokenAnswer>>();

  /** Drops a token Google refused (401), unless a newer one has replaced it in the meantime. */
  forget(t: RefreshedToken): void {
    if (this.cache.get(t.key)?.accessToken === t.accessToken) this.cache.delete(t.key);
  }

  clear(): void {
    this.cache.clear();
  }
}

type TokenAnswer =
  | { ok: true; accessToken: string; expiresAtMs: number }
  | { ok: false; error: string; retry: boolean; delayMs?: number; configuration?: true };

export function refreshCredentialsOf(pixel: PixelConfig): RefreshCredentials | undefined {
  if (pixel.platform !== 'google') return undefined;
  const { clientId, clientSecret, refreshToken } = pixel;
  return clientId && clientSecret && refreshToken ? { clientId, clientSecret, refreshToken } : undefined;
}

function cacheKey(tokenUrl: string, c: RefreshCredentials): string {
  return createHash('sha256')
    .update(`${tokenUrl}\n${c.clientId}\n${c.clientSecret}\n${c.refreshToken}`)
    .digest('hex');
}

/**
 * The pixel with a usable access token. Pixels without refresh credentials (every other platform,
 * and Google pixels given a plain access token) are returned as they are. `nowMs` is the
 * pipeline's clock, which decides when a cached token is too old. Without `tokens` (a one-off
 * check) the token is fetched and kept nowhere.
 */
export async function authorize(
  pixel: PixelConfig,
  o: { oauthUrl: string; timeoutMs: number; nowMs: number; tokens?: GoogleTokens },
): Promise<Authorized> {
  const { cache, inFlight } = o.tokens ?? new GoogleTokens();
  const creds = refreshCredentialsOf(pixel);
  if (!creds) return { pixel };
  const tokenUrl = `${o.oauthUrl.replace(/\/+$/, '')}/token`;
  const key = cacheKey(tokenUrl, creds);
  const cached = cache.get(key);
  let accessToken: string;
  if (cached && cached.expiresAtMs > o.nowMs) {
    accessToken = cached.accessToken;
  } else {
    let pending = inFlight.get(key);
    if (!pending) {
      pending = exchange(tokenUrl, creds, o.timeoutMs, o.nowMs).finally(() => inFlight.delete(key));
      inFlight.set(key, pending);
    }
    const answer = await pending;
    if (!answer.ok)
      return {
        error: answer.error,
        retry: answer.retry,
        ...(answer.delayMs === undefined ? {} : { delayMs: answer.delayMs }),
        ...(answer.configuration ? { configuration: true as const } : {}),
      };
    // Rotated credentials leave their old entries behind: drop whatever has run out meanwhile.
    for (const [k, t] of cache) if (t.expiresAtMs <= o.nowMs) cache.delete(k);
    cache.set(key, { accessToken: answer.accessToken, expiresAtMs: answer.expiresAtMs });
    accessToken = answer.accessToken;
  }
  return {
    pixel: { ...(pixel as PixelConfigOf<'google'>), oauthToken: accessToken },
    refreshed: { key, accessToken },
  };
}

/** Google Ads' answer to an expired or revoked access token. */
export function isUnauthenticated(res: PlatformResponse): boolean {
  return !('networkError' in res) && res.status === 401;
}

/** Every event of the batch gets the token endpoint's verdict. */
export function authFailureOutcomes(
  events: readonly DeliveryEvent[],
  a: { error: string; retry: boolean; delayMs?: number },
): EventOutcome[] {
  return a.retry ? allRetry(events, a.error, a.delayMs) : allFailed(events, a.error);
}

/** One `grant_type=refresh_token` exchange (RFC 6749 §6), classified. */
async function exchange(
  tokenUrl: string,
  c: RefreshCredentials,
  timeoutMs: number,
  nowMs: number,
): Promise<TokenAnswer> {
  const body = new URLSearchParams({
    grant_type: 'refresh_token',
    refresh_token: c.refreshToken,
    client_id: c.clientId,
    client_secret: c.clientSecret,
  });
  const res = await performRequest(
    {
      method: 'POST',
      url: tokenUrl,
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: body.toString(),
    },
    timeoutMs,
  );
  return classifyTokenResponse(res, nowMs, tokenUrl);
}

/** Pure: what a token endpoint answer means. Exported for table-driven tests. */
export function classifyTokenResponse(res: PlatformResponse, nowMs: number, tokenUrl: string): TokenAnswer {
  if ('networkError' in res)
    return {
      ok: false,
      retry: true,
      error: `Google OAuth token refresh: network error: ${res.networkError}`,
    };
  const json = parseJsonObject(res.bodyText);
  if (res.status >= 200 && res.status < 300) {
    const accessToken = stringField(json, 'access_token');
    // A success without a token is not the credentials' fault: most likely not a token endpoint.
    if (!accessToken)
      return {
        ok: false,
        retry: true,
        configuration: true,
        error: truncateError(
          `configuration error: ${tokenUrl} answered HTTP ${res.status} without an access_token: ` +
            "check GOOGLE_OAUTH_URL (Google's is https://oauth2.googleapis.com)",
        ),
      };
    const expiresIn = json?.expires_in;
    const lifetimeMs =
      (typeof expiresIn === 'number' && Number.isFinite(expiresIn) && expiresIn > 0
        ? expiresIn
        : DEFAULT_LIFETIME_SEC) * 1000;
    return {
      ok: true,
      accessToken,
      expiresAtMs: nowMs + lifetimeMs - Math.min(EXPIRY_MARGIN_MS, lifetimeMs / 2),
    };
  }
  const code = isRecord(json) ? stringField(json, 'error') : undefined;
  const description = isRecord(json) ? stringField(json, 'error_description') : undefined;
  const what = code ? `${code}${description ? ` (${description})` : ''}` : `HTTP ${res.status}`;
  const transient = res.status >= 500 || res.status === 429 || res.status === 408;
  // A refusal of the credentials is an OAuth error answer (RFC 6749 §5.2: JSON with an `error`
  // code). Any other answer, such as a 404 page, comes from something that is not a token
  // endpoint: GOOGLE_OAUTH_URL is wrong, whatever the pixel holds. It is retried, so that the
  // sends go once the server is set right.
  if (code === undefined && !transient)
    return {
      ok: false,
      retry: true,
      configuration: true,
      error: truncateError(
        `configuration error: ${tokenUrl} answered HTTP ${res.status}, which is not an OAuth token endpoint's answer: ` +
          "check GOOGLE_OAUTH_URL (Google's is https://oauth2.googleapis.com)",
      ),
    };
  if (transient && !(code !== undefined && PERMANENT_OAUTH_ERRORS.has(code))) {
    const delayMs = retryAfterMs(res, nowMs);
    return {
      ok: false,
      retry: true,
      error: truncateError(`Google OAuth token refresh failed: ${what}`),
      ...(delayMs === undefined ? {} : { delayMs }),
    };
  }
  const hint =
    code === 'invalid_grant'
      ? 'the refresh token was revoked or has expired; give the pixel a new one (pixel update --refresh-token)'
      : code === 'invalid_client' || code === 'unauthorized_client'
        ? 'the OAuth client id or secret is wrong; correct them (pixel update --client-id --client-secret)'
        : "correct the pixel's OAuth credentials (pixel update)";
  return {
    ok: false,
    retry: false,
    error: truncateError(`Google OAuth token refresh failed: ${what}: ${hint}`),
  };
}
