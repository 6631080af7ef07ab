import type { PlatformResponse } from '../../platforms/types.js';

/**
 * A GET to a reporting API. Every way of not getting an answer (timeout, refused, reset) becomes a
 * `networkError`, which the importers treat as a reason to pause; the whole exchange, body
 * included, finishes within `timeoutMs`.
 */
export async function getAnswer(
  url: string,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<PlatformResponse> {
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const res = await fetch(url, { headers, signal });
    const bodyText = await res.text();
    const out: Record<string, string> = {};
    res.headers.forEach((value, name) => {
      out[name] = value;
    });
    return { status: res.status, headers: out, bodyText };
  } catch (err) {
    if (signal.aborted) return { networkError: `no answer within ${timeoutMs} ms` };
    const e = err as { message?: string; cause?: { code?: string; message?: string } };
    return { networkError: e.cause?.code ?? e.cause?.message ?? e.message ?? String(err) };
  }
}
