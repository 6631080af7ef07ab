import { z, type OpenAPIHono } from '@hono/zod-openapi';
import type { MiddlewareHandler } from 'hono';
import type { Deps } from '../../deps.js';
import { ERROR_CODES, type ErrorCode } from '../../errors.js';
import { apiAuth } from './auth.js';
import type { ApiEnv } from './env.js';
import { ApiError } from '../errors.js';
import { idempotency } from './idempotency.js';

/** Shared pieces of the business API's endpoint files: the sub-app type, middleware, schemas. */
export type ApiApp = OpenAPIHono<ApiEnv>;
export type ApiDeps = Pick<Deps, 'pool' | 'now' | 'log' | 'config' | 'local'>;

export const SECURITY = [{ bearerAuth: [] }];

/**
 * The zod-openapi body validator answers a non-JSON Content-Type with a bare 415; the business
 * API says what is wrong in its own error shape instead.
 */
const requireJson: MiddlewareHandler<ApiEnv> = async (c, next) => {
  const type = c.req.header('content-type') ?? '';
  if (!/^application\/(?:[\w.+-]+\+)?json\s*(?:;.*)?$/i.test(type)) {
    throw new ApiError('VALIDATION_FAILED', 'Content-Type must be application/json', {
      errors: [{ path: 'Content-Type', message: 'must be application/json' }],
    });
  }
  await next();
};

/** Every business endpoint: the API key first, then the Idempotency-Key scoped to it. */
export function keyed(deps: ApiDeps): MiddlewareHandler<ApiEnv>[] {
  return [apiAuth(deps), idempotency(deps)];
}

/** Business endpoints with a JSON body also require a JSON Content-Type (checked after the idempotency replay). */
export function keyedJson(deps: ApiDeps): MiddlewareHandler<ApiEnv>[] {
  return [apiAuth(deps), idempotency(deps), requireJson];
}

/**
 * The two event endpoints: as `keyedJson`, but a new Idempotency-Key is claimed inside the event's
 * own transaction (`submitEvent`), which also stores its answer.
 */
export function eventJson(deps: ApiDeps): MiddlewareHandler<ApiEnv>[] {
  return [apiAuth(deps, { claimInWork: true }), idempotency(deps, { claimInWork: true }), requireJson];
}

// Control characters are never meaningful in these fields, NUL breaks PostgreSQL text and a lone
// surrogate breaks its JSON: refusing them here keeps every such input a 400, never a 500.
export const UNSAFE_CHARS = /[\p{Cc}\p{Cs}]/u;

export function text(max: number) {
  return z
    .string()
    .max(max, `must be at most ${max} characters`)
    .refine((s) => !UNSAFE_CHARS.test(s), 'must not contain control characters');
}

/** Trimmed, blank as absent. */
export function orNull(v: string | null | undefined): string | null {
  const t = v?.trim();
  return t ? t : null;
}

export const TelegramUserIdParam = z
  .string()
  .regex(/^[1-9][0-9]{0,15}$/, 'must be a positive integer')
  .refine((s) => Number.isSafeInteger(Number(s)), 'is too large')
  .openapi({
    param: { name: 'telegramUserId', in: 'path' },
    example: '123456789',
    description: 'Telegram user id',
  });

export const SiteQuery = z.object({
  siteId: text(100)
    .optional()
    .openapi({ description: 'site id (or websiteId); account-scoped keys only need it to choose a site' }),
  websiteId: text(100).optional().openapi({ description: 'public website id, alternative to siteId' }),
});

export const IdempotencyHeaders = z.object({
  'idempotency-key': z.string().optional().openapi({
    description:
      '1–128 printable ASCII characters; replays the stored response for 24 h; bound to the endpoint it was first used on (elsewhere: 422 IDEMPOTENCY_KEY_REUSED)',
    example: 'order-1042',
  }),
});

const Problem = z
  .object({
    type: z.string().openapi({ example: 'https://capigram.dev/errors/validation-failed' }),
    title: z.string(),
    status: z.number().int(),
    code: z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]),
    detail: z.string().optional(),
    errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
    instance: z.string().optional(),
  })
  .openapi('Problem', { description: 'RFC 9457 problem details with a stable `code`' });

const problemContent = { 'application/problem+json': { schema: Problem } };

/** OpenAPI responses for the error codes an endpoint can answer, grouped by status. */
export function problems(...codes: ErrorCode[]) {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes)
    byStatus.set(ERROR_CODES[code].status, [...(byStatus.get(ERROR_CODES[code].status) ?? []), code]);
  return Object.fromEntries(
    [...byStatus].map(([status, list]) => [
      status,
      { description: list.join(', '), content: problemContent },
    ]),
  ) as Record<
    400 | 401 | 403 | 404 | 409 | 413 | 422 | 503,
    { description: string; content: typeof problemContent }
  >;
}

/** What every business endpoint can answer besides its own errors. */
export const COMMON_ERRORS: ErrorCode[] = [
  'UNAUTHORIZED',
  'VALIDATION_FAILED',
  'IDEMPOTENCY_KEY_INVALID',
  'IDEMPOTENCY_IN_PROGRESS',
  'IDEMPOTENCY_KEY_REUSED',
  'UNAVAILABLE',
];
