// What the fakes' own tests use to call them: plain fetch, like the service's adapters.
import { createHash } from 'node:crypto';

export interface HttpResult {
  status: number;
  headers: Headers;
  /** Parsed JSON, or the raw text when the answer is not JSON (gateway pages). */
  body: any;
}

export async function call(
  url: string,
  init: {
    method?: string;
    json?: unknown;
    form?: Record<string, string>;
    headers?: Record<string, string>;
    timeoutMs?: number;
  } = {},
): Promise<HttpResult> {
  const headers: Record<string, string> = { ...init.headers };
  let body: string | undefined;
  if (init.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(init.json);
  } else if (init.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(init.form).toString();
  }
  const res = await fetch(url, {
    method: init.method ?? (body === undefined ? 'GET' : 'POST'),
    headers,
    body,
    signal: AbortSignal.timeout(init.timeoutMs ?? 5000),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

export function sha256(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

export function nowSec(): number {
  return Math.floor(Date.now() / 1000);
}
