import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { ApiError } from '../errors.js';

/** Body limits: JSON APIs get small bodies; Telegram updates can carry long messages. */
export const BODY_LIMIT_BYTES = 64 * 1024;
export const WEBHOOK_BODY_LIMIT_BYTES = 1024 * 1024;

/** The answer to a body over its limit (`limitBody`'s `onError`). */
export function payloadTooLarge(): never {
  throw new ApiError('PAYLOAD_TOO_LARGE', 'Request body exceeds the limit');
}

/**
 * A request body size limit that costs nothing when the request declares its length.
 *
 * hono's `bodyLimit` starts by reading `c.req.raw.body`. Under @hono/node-server that one property
 * turns the light request object into a full web `Request`, with a `ReadableStream` over the socket
 * and an `AbortSignal`, on every request, GETs included. Avoiding it took the server's CPU per
 * business event from about 810 to 613–697 µs (docs/benchmarks.md). Here:
 * - a GET or HEAD passes: its body, if any, is never read;
 * - a body framed by `Content-Length` is judged on the header alone. Node's parser never hands
 *   over more bytes than the header declares, and the body is later read straight from the socket;
 * - anything else (chunked, or no length) goes through hono's `bodyLimit`, which counts the bytes
 *   as they arrive.
 */
export function limitBody(maxSize: number, onError: () => never): MiddlewareHandler {
  const counting = bodyLimit({ maxSize, onError });
  return async (c, next) => {
    const method = c.req.method;
    if (method === 'GET' || method === 'HEAD') return next();
    const length = c.req.header('content-length');
    if (length !== undefined && /^\d+$/.test(length) && c.req.header('transfer-encoding') === undefined) {
      if (Number(length) > maxSize) onError();
      return next();
    }
    return counting(c, next);
  };
}
