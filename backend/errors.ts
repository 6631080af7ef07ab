import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { z } from 'zod';

/**
 * The one error shape of the service: RFC 9457 problem+json with a stable `code` (CONTRACT.md).
 * Throw an ApiError anywhere below the HTTP layer's handlers; `problemResponse` renders it.
 */
export const ERROR_CODES = {
  UNAUTHORIZED: { status: 401, title: 'Authentication required' },
  INIT_DATA_INVALID: { status: 401, title: 'Telegram Mini App initData is invalid' },
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
  IDEMPOTENCY_KEY_REUSED: { status: 422, title: 'Idempotency-Key was first used on another endpoint' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Request body is too large' },
  HEADERS_TOO_LARGE: { status: 431, title: 'Request headers are too large' },
  NOT_FOUND: { status: 404, title: 'Not found' },
  UNAVAILABLE: { status: 503, title: 'Service temporarily unavailable' },
  INTERNAL: { status: 500, title: 'Internal error' },
} as const satisfies Record<string, { status: ContentfulStatusCode; title: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface FieldError {
  path: string;
  message: string;
}

/** Thrown by any layer; the HTTP layer renders it, the CLI prints its detail. */
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
  const detail = first
    ? `${where}: ${first.path === '(root)' ? '' : `${first.path}: `}${first.message}`
    : `${where} is invalid`;
  return new ApiError('VALIDATION_FAILED', detail, { errors });
}
