import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { parseSetCookie } from 'cookie';

export interface SimpleResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
  text: string;
  /** Each `Set-Cookie` line as received. */
  setCookies: string[];
  /** Milliseconds until the response head arrived. */
  headMs: number;
}

/** One request on a fresh connection, nothing followed, nothing decoded. */
export function send(
  url: string,
  options: { method?: string; headers?: Record<string, string | string[]>; body?: Buffer | string } = {},
): Promise<SimpleResponse> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const headers = { ...options.headers };
    const framed = Object.keys(headers).some((name) => /^(content-length|transfer-encoding)$/i.test(name));
    if (options.body !== undefined && !framed)
      headers['content-length'] = String(Buffer.byteLength(options.body));
    const req = httpRequest(url, { method: options.method ?? 'GET', headers, agent: false }, (res) => {
      const headMs = performance.now() - started;
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body,
          text: body.toString('utf8'),
          setCookies: res.headers['set-cookie'] ?? [],
          headMs,
        });
      });
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** A browser-navigation `Accept` header (Chromium's). */
export const NAVIGATION_ACCEPT =
  'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';

export function cookieNamed(
  setCookies: string[],
  name: string,
): ReturnType<typeof parseSetCookie> | undefined {
  return setCookies
    .map((line) => parseSetCookie(line, { decode: (raw) => raw }))
    .find((cookie) => cookie.name === name);
}

/**
 * A cookie jar that expires cookies the way a browser does, but on the test's clock, so that
 * "30 idle minutes" can pass without waiting.
 */
export class ClockedCookieJar {
  private readonly cookies = new Map<string, { value: string; expiresAt: number }>();

  constructor(private readonly now: () => number) {}

  store(setCookies: string[]): void {
    for (const line of setCookies) {
      const cookie = parseSetCookie(line, { decode: (raw) => raw });
      const expiresAt =
        cookie.maxAge !== undefined
          ? this.now() + cookie.maxAge * 1000
          : (cookie.expires?.getTime() ?? Number.POSITIVE_INFINITY);
      if (cookie.value === undefined || expiresAt <= this.now()) this.cookies.delete(cookie.name);
      else this.cookies.set(cookie.name, { value: cookie.value, expiresAt });
    }
  }

  set(name: string, value: string): void {
    this.cookies.set(name, { value, expiresAt: Number.POSITIVE_INFINITY });
  }

  get(name: string): string | undefined {
    const cookie = this.cookies.get(name);
    return cookie !== undefined && cookie.expiresAt > this.now() ? cookie.value : undefined;
  }

  header(): string {
    return [...this.cookies]
      .filter(([, cookie]) => cookie.expiresAt > this.now())
      .map(([name, cookie]) => `${name}=${cookie.value}`)
      .join('; ');
  }
}
