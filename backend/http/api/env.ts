import type { Context } from 'hono';
import type { ApiCaller } from '../../domain/conversions/site-scope.js';

/** An Idempotency-Key claimed together with the API key look-up, and when. */
export interface EarlyClaim {
  key: string;
  claimedAt: Date;
}

/** What the API key look-up found under an Idempotency-Key (for endpoints that claim it in their own transaction). */
export interface PriorClaim {
  key: string;
  /** The key's row, or null when the key is new. */
  row: {
    createdAt: Date;
    status: number | null;
    body: { contentType: string; text: string } | null;
    endpoint: string | null;
  } | null;
}

/**
 * An Idempotency-Key this request holds, and whether its answer was stored with the work itself.
 * `inWork`: not claimed yet; the work's transaction claims it first (so a request that dies
 * leaves no claim behind), and an answer that is not stored with the work is stored with its claim.
 */
export interface HeldClaim {
  apiKeyId: string;
  key: string;
  claimedAt: Date;
  storedWithWork: boolean;
  inWork: boolean;
  /** The request's endpoint (`endpointOf`), stored with the claim. */
  endpoint: string;
}

/**
 * The endpoint an Idempotency-Key is bound to: the method and the route's pattern
 * (`POST /api/v1/leads/:telegramUserId/events`), not the concrete path. A HEAD is the GET of the
 * same route without its body (RFC 9110), so it counts as that GET.
 */
export function endpointOf(c: Context<ApiEnv>): string {
  const method = c.req.method === 'HEAD' ? 'GET' : c.req.method;
  return `${method} ${c.req.routePath}`;
}

/**
 * Variables of a business API request: the app's request id, the authenticated caller, an
 * Idempotency-Key claimed with the key look-up (or what the look-up found under it), and the claim
 * the request holds.
 */
export type ApiEnv = {
  Variables: {
    requestId: string;
    caller: ApiCaller;
    earlyClaim?: EarlyClaim;
    priorClaim?: PriorClaim;
    heldClaim?: HeldClaim;
  };
};
