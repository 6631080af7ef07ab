import { HTTPException } from 'hono/http-exception';
import { z } from 'zod';
import { isDatabaseUnavailable } from '../db/unavailable.js';
import { ApiError, ERROR_CODES, validationError } from '../errors.js';

export { isDatabaseUnavailable } from '../db/unavailable.js';

export { ApiError, validationError } from '../errors.js';

/** Rendering of the service's errors as RFC 9457 problem+json (CONTRACT.md). */

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

/** PostgreSQL's "invalid byte sequence" (22021) and "untranslatable character" (22P05). */
function isUnstorableText(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return code === '22021' || code === '22P05';
}

/** Maps anything thrown in a request to an ApiError; unknown errors become INTERNAL (logged by the caller). */
export function toApiError(err: unknown): { apiError: ApiError; unexpected: boolean } {
  if (err instanceof ApiError) return { apiError: err, unexpected: false };
  if (err instanceof z.ZodError) return { apiError: validationError(err), unexpected: false };
  if (err instanceof HTTPException) {
    if (err.status === 413) return { apiError: new ApiError('PAYLOAD_TOO_LARGE'), unexpected: false };
    if (err.status === 400)
      return {
        apiError: new ApiError('VALIDATION_FAILED', err.message || 'Malformed request'),
        unexpected: false,
      };
    if (err.status === 401)
      return { apiError: new ApiError('UNAUTHORIZED', err.message || undefined), unexpected: false };
    if (err.status === 404) return { apiError: new ApiError('NOT_FOUND'), unexpected: false };
    if (err.status === 415)
      return {
        apiError: new ApiError('VALIDATION_FAILED', 'Content-Type must be application/json'),
        unexpected: false,
      };
    // Any other client error raised by a middleware is still the client's, never a 500.
    if (err.status >= 400 && err.status < 500)
      return {
        apiError: new ApiError('VALIDATION_FAILED', err.message || 'Malformed request'),
        unexpected: false,
      };
  }
  if (isDatabaseUnavailable(err))
    return { apiError: new ApiError('UNAVAILABLE', 'The database is unavailable'), unexpected: false };
  // Text PostgreSQL cannot store (U+0000) that got past the edge's schemas: the client's input, not
  // a bug. The statement failed, so its transaction wrote nothing.
  if (isUnstorableText(err)) {
    return {
      apiError: new ApiError(
        'VALIDATION_FAILED',
        'The request contains a character that cannot be stored (U+0000)',
      ),
      unexpected: false,
    };
  }
  return {
    apiError: new ApiError('INTERNAL', 'An unexpected error occurred; it has been logged'),
    unexpected: true,
  };
}
