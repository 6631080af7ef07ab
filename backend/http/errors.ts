import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { z } from 'zod';

/**
 * The one error shape of the service: RFC 9457 problem+json with a stable `code` (CONTRACT.md).
 * Throw an ApiError anywhere below the HTTP layer's handlers; `problemResponse` renders it.
 */
export const ERROR_CODES = {
  UNAUTHORIZED: { status: 401, title: 'Authentication required' },
  FORBIDDEN: { status: 403, title: 'Not allowed for this key' },
  VALIDATION_FAILED: { status: 400, title: 'Request is invalid' },
  REQUEST_ID_MISMATCH: { status: 400, title: 'visitRequestId and gatewayRequestId differ' },
  VISIT_IDENTITY_MISMATCH: { status: 409, title: 'Visit identity does not match the original visit' },
  SITE_REQUIRED: { status: 400, title: 'A site is required for a cold lead' },
  CHANNEL_REQUIRED: { status: 400, title: 'A channel is required for a cold lead' },
  LEAD_NOT_FOUND: { status: 404, title: 'Lead not found on the resolved site' },
  CONVERSION_NOT_FOUND: { status: 404, title: 'Conversion not found' },
  NOT_AWAITING_VALUE: { status: 409, title: 'Conversion is not awaiting a value' },
  UNKNOWN_WEBSITE: { status: 404, title: 'Unknown website' },
  DOMAIN_NOT_ALLOWED: { status: 403, title: "Request origin is not one of the site's domains" },
  RATE_LIMITED: { status: 429, title: 'Too many requests' },
  IDEMPOTENCY_KEY_INVALID: { status: 400, title: 'Idempotency-Key is invalid' },
  IDEMPOTENCY_IN_PROGRESS: { status: 409, title: 'A request with this Idempotency-Key is still executing' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Request body is too large' },
  NOT_FOUND: { status: 404, title: 'Not found' },
  UNAVAILABLE: { status: 503, title: 'Service temporarily unavailable' },
  INTERNAL: { status: 500, title: 'Internal error' },
} as const satisfies Record<string, { status: ContentfulStatusCode; title: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface FieldError {
  path: string;
  message: string;
}

export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: ContentfulStatusCode;
  constructor(
    readonly code: ErrorCode,
    readonly detail?: string,
    readonly extra: { errors?: FieldError[]; headers?: Record<string, string> } = {},
  ) {
    super(detail ?? ERROR_CODES[code].title);
    this.status = ERROR_CODES[code].status;
  }
}

export function fieldErrors(err: z.ZodError): FieldError[] {
  return err.issues.slice(0, 50).map((i) => ({ path: i.path.join('.') || '(root)', message: i.message }));
}

export function validationError(err: z.ZodError, where = 'body'): ApiError {
  const errors = fieldErrors(err);
  const first = errors[0];
  const detail = first ? `${where}: ${first.path === '(root)' ? '' : first.path + ': '}${first.message}` : `${where} is invalid`;
  return new ApiError('VALIDATION_FAILED', detail, { errors });
}

export function problemBody(err: ApiError, instance?: string) {
  const slug = err.code.toLowerCase().replace(/_/g, '-');
  return {
    type: `https://capigram.dev/errors/${slug}`,
    title: ERROR_CODES[err.code].title,
    status: err.status,
    code: err.code,
    ...(err.detail ? { detail: err.detail } : {}),
    ...(err.extra.errors ? { errors: err.extra.errors } : {}),
    ...(instance ? { instance } : {}),
  };
}

export function problemResponse(err: ApiError, requestId?: string): Response {
  const headers = new Headers({ 'content-type': 'application/problem+json', ...err.extra.headers });
  if (requestId) headers.set('x-request-id', requestId);
  return new Response(JSON.stringify(problemBody(err, requestId ? `urn:request:${requestId}` : undefined)), {
    status: err.status,
    headers,
  });
}

const PG_UNAVAILABLE = /^(08|57P0|53)/; // connection exceptions, admin shutdown, insufficient resources

/** True for errors that mean "the database is not there right now", not a bug. */
export function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  if (typeof e?.code === 'string' && (PG_UNAVAILABLE.test(e.code) || ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT'].includes(e.code)))
    return true;
  return typeof e?.message === 'string' && /(timeout exceeded when trying to connect|Connection terminated|pool (?:after calling end|is ending))/i.test(e.message);
}

/** Maps anything thrown in a request to an ApiError; unknown errors become INTERNAL (logged by the caller). */
export function toApiError(err: unknown): { apiError: ApiError; unexpected: boolean } {
  if (err instanceof ApiError) return { apiError: err, unexpected: false };
  if (err instanceof z.ZodError) return { apiError: validationError(err), unexpected: false };
  if (err instanceof HTTPException) {
    if (err.status === 413) return { apiError: new ApiError('PAYLOAD_TOO_LARGE'), unexpected: false };
    if (err.status === 400) return { apiError: new ApiError('VALIDATION_FAILED', err.message || 'Malformed request'), unexpected: false };
    if (err.status === 401) return { apiError: new ApiError('UNAUTHORIZED', err.message || undefined), unexpected: false };
    if (err.status === 404) return { apiError: new ApiError('NOT_FOUND'), unexpected: false };
  }
  if (isDatabaseUnavailable(err)) return { apiError: new ApiError('UNAVAILABLE', 'The database is unavailable'), unexpected: false };
  return { apiError: new ApiError('INTERNAL', 'An unexpected error occurred; it has been logged'), unexpected: true };
}
