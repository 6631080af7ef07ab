import { HTTPException } from 'hono/http-exception';
import { z } from 'zod';
import { ApiError, ERROR_CODES, validationError } from '../errors.js';

export { ApiError, ERROR_CODES, fieldErrors, validationError, type ErrorCode, type FieldError } from '../errors.js';

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

/**
 * SQLSTATE classes and codes that mean the server is not there (or not for us) right now:
 * 08 connection exceptions, 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now
 * (starting up, shutting down, in recovery), 57P04 database_dropped, 57P05 idle_session_timeout,
 * 53 insufficient resources (too many connections, out of memory or disk).
 */
const PG_UNAVAILABLE = /^(08|57P0|53)/;

/** Socket errors of a connection to the database (Node's own codes). */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * node-postgres's own messages when a connection breaks or cannot be made, which carry no code:
 * a client that already saw its connection fail ("…encountered a connection error and is not
 * queryable"), one the server closed ("Connection terminated unexpectedly", "…due to connection
 * timeout"), a pool that could not connect in time, a pool being shut down by our own shutdown.
 */
const PG_CONNECTION_MESSAGES =
  /(timeout exceeded when trying to connect|Connection terminated|encountered a connection error and is not queryable|Client was closed and is not queryable|pool (?:after calling end|is ending)|Cannot use a pool after calling end)/i;

/** True for errors that mean "the database is not there right now", not a bug. */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (typeof err !== 'object' || err === null || depth > 3) return false;
  const e = err as { code?: unknown; message?: unknown; errors?: unknown; cause?: unknown };
  if (typeof e.code === 'string' && (PG_UNAVAILABLE.test(e.code) || SOCKET_CODES.has(e.code))) return true;
  if (typeof e.message === 'string' && PG_CONNECTION_MESSAGES.test(e.message)) return true;
  // Connecting to a name with several addresses fails with an AggregateError of each attempt's error.
  if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every((x) => isDatabaseUnavailable(x, depth + 1))) return true;
  return e.cause !== undefined && isDatabaseUnavailable(e.cause, depth + 1);
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
    if (err.status === 400) return { apiError: new ApiError('VALIDATION_FAILED', err.message || 'Malformed request'), unexpected: false };
    if (err.status === 401) return { apiError: new ApiError('UNAUTHORIZED', err.message || undefined), unexpected: false };
    if (err.status === 404) return { apiError: new ApiError('NOT_FOUND'), unexpected: false };
    if (err.status === 415)
      return { apiError: new ApiError('VALIDATION_FAILED', 'Content-Type must be application/json'), unexpected: false };
    // Any other client error raised by a middleware is still the client's, never a 500.
    if (err.status >= 400 && err.status < 500)
      return { apiError: new ApiError('VALIDATION_FAILED', err.message || 'Malformed request'), unexpected: false };
  }
  if (isDatabaseUnavailable(err)) return { apiError: new ApiError('UNAVAILABLE', 'The database is unavailable'), unexpected: false };
  // Text PostgreSQL cannot store (U+0000) that got past the edge's schemas: the client's input, not
  // a bug. The statement failed, so its transaction wrote nothing.
  if (isUnstorableText(err)) {
    return { apiError: new ApiError('VALIDATION_FAILED', 'The request contains a character that cannot be stored (U+0000)'), unexpected: false };
  }
  return { apiError: new ApiError('INTERNAL', 'An unexpected error occurred; it has been logged'), unexpected: true };
}
