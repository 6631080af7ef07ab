import { randomUUID } from 'node:crypto';

/**
 * At start, the proxy asks the tracker whether its `--website-id` exists, so that a typo stops
 * the start with a clear message instead of every visit being refused later. The question is a
 * `track/update-fbp` for a browser id nobody has (a fresh UUID): the tracker names an unknown site
 * (404 UNKNOWN_WEBSITE) before anything else, and for a known one there is no visit to patch, so it
 * changes nothing (`{"updated": false}`). A tracker that does not answer is not a reason to stay
 * down: the proxy serves the site anyway and its pages do not wait for the tracker.
 */
export type WebsiteCheck =
  | { kind: 'known' }
  | { kind: 'unknown'; detail: string }
  | { kind: 'unsure'; reason: string };

export async function checkWebsite(
  tracker: string,
  websiteId: string,
  timeoutMs = 3000,
): Promise<WebsiteCheck> {
  let res: Response;
  try {
    res = await fetch(`${tracker.replace(/\/+$/, '')}/backend/track/update-fbp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ websiteId, tempId: randomUUID(), fbp: `fb.1.${Date.now()}.1000000000` }),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    const e = err as { name?: string; cause?: { code?: string; message?: string } };
    return {
      kind: 'unsure',
      reason:
        e.name === 'TimeoutError'
          ? `no answer within ${timeoutMs} ms`
          : (e.cause?.code ?? e.cause?.message ?? String(err)),
    };
  }
  const body = (await res.json().catch(() => ({}))) as { code?: string; detail?: string };
  if (res.status === 200) return { kind: 'known' };
  if (res.status === 404 && body.code === 'UNKNOWN_WEBSITE')
    return { kind: 'unknown', detail: body.detail ?? `websiteId ${websiteId} is not known` };
  return { kind: 'unsure', reason: `HTTP ${res.status}${body.code ? ` ${body.code}` : ''}` };
}
