import type { Context } from 'hono';
import type { z } from 'zod';
import { ApiError, validationError } from './errors.js';

/** Reads and validates a JSON body; malformed JSON and schema failures become VALIDATION_FAILED. */
export async function readJson<S extends z.ZodType>(c: Context, schema: S): Promise<z.infer<S>> {
  const text = await c.req.text();
  let raw: unknown;
  try {
    raw = text === '' ? {} : JSON.parse(text);
  } catch {
    throw new ApiError('VALIDATION_FAILED', 'Request body is not valid JSON');
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw validationError(parsed.error);
  return parsed.data;
}

/** Validates query parameters; a repeated parameter is rejected rather than silently picked. */
export function readQuery<S extends z.ZodType>(c: Context, schema: S): z.infer<S> {
  const all = c.req.queries();
  const flat: Record<string, string> = {};
  for (const [k, v] of Object.entries(all)) {
    if (v.length > 1) throw new ApiError('VALIDATION_FAILED', `query parameter "${k}" is repeated`);
    flat[k] = v[0] ?? '';
  }
  const parsed = schema.safeParse(flat);
  if (!parsed.success) throw validationError(parsed.error, 'query');
  return parsed.data;
}
