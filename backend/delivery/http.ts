import type { HttpRequestSpec, PlatformResponse } from '../platforms/types.js';

/**
 * Performs an adapter's request. Every way of not getting an answer (timeout, refused, reset,
 * DNS) becomes a `networkError`, which the adapters classify as transient; the whole exchange,
 * body included, must finish within `timeoutMs`.
 */
export async function performRequest(spec: HttpRequestSpec, timeoutMs: number): Promise<PlatformResponse> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const res = await fetch(spec.url, {
      method: spec.method,
      headers: spec.headers,
      body: spec.body,
      signal,
    });
    const bodyText = await res.text();
    const headers: Record<string, string> = {};
    res.headers.forEach((value, name) => {
      headers[name] = value;
    });
    return { status: res.status, headers, bodyText };
  } catch (err) {
    return { networkError: describeNetworkError(err, timeoutMs, signal.aborted) };
  }
}

function describeNetworkError(err: unknown, timeoutMs: number, timedOut: boolean): string {
  if (timedOut) return `no answer within ${timeoutMs} ms`;
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  const cause = e.cause;
  if (cause?.code) return `${cause.code}${cause.message ? `: ${cause.message}` : ''}`;
  return cause?.message ?? e.message ?? String(err);
}
