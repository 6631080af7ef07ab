/**
 * Our cookies joined to a response's head, whoever writes it, and the head's status and content
 * type told to the caller: used where the proxy cannot see the upstream's answer (mounted in front
 * of the site's own app) and for the clicks it answers itself.
 */
import type { OutgoingHttpHeader, OutgoingHttpHeaders, ServerResponse } from 'node:http';

/**
 * Appends `cookies` to the response's `Set-Cookie` at the moment its head is written, whoever
 * writes it (http-proxy-3 copying the upstream's headers, the site's app, our own pages), and
 * tells `onHead` the status and content type. Upstream cookies are kept: ours are added after.
 */
export function onResponseHead(
  res: ServerResponse,
  cookies: string[],
  onHead: ((status: number, contentType: string | undefined) => void) | undefined,
): void {
  const writeHead = res.writeHead;
  res.writeHead = function patchedWriteHead(this: ServerResponse, ...args: unknown[]) {
    res.writeHead = writeHead;
    const status = typeof args[0] === 'number' ? args[0] : res.statusCode;
    // writeHead(status[, statusMessage][, headers]); an implicit head (write or end without
    // writeHead) comes with the status alone, and that common case does no header scanning.
    const headersArg = (isObject(args[1]) ? args[1] : isObject(args[2]) ? args[2] : undefined) as
      | OutgoingHttpHeaders
      | OutgoingHttpHeader[]
      | undefined;
    let contentType = res.getHeader('content-type');
    if (headersArg === undefined) {
      if (cookies.length > 0) res.appendHeader('set-cookie', cookies);
    } else if (Array.isArray(headersArg)) {
      for (let i = 0; i + 1 < headersArg.length; i += 2) {
        if (String(headersArg[i]).toLowerCase() === 'content-type') contentType = headersArg[i + 1] as string;
      }
      for (const cookie of cookies) headersArg.push('set-cookie', cookie);
    } else {
      let cookieKey: string | undefined;
      for (const name of Object.keys(headersArg)) {
        const lower = name.toLowerCase();
        if (lower === 'content-type') contentType = headersArg[name];
        else if (lower === 'set-cookie') cookieKey = name;
      }
      if (cookieKey !== undefined) {
        const theirs = headersArg[cookieKey];
        headersArg[cookieKey] = [
          ...(Array.isArray(theirs) ? theirs : theirs === undefined ? [] : [String(theirs)]),
          ...cookies,
        ];
      } else if (cookies.length > 0) {
        res.appendHeader('set-cookie', cookies);
      }
    }
    try {
      onHead?.(status, contentType === undefined ? undefined : String(contentType));
    } catch {
      // Tracking never costs the page; the tracker client logs its own failures.
    }
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as ServerResponse['writeHead'];
}

function isObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}
