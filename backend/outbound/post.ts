import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import {
  OutboundRefused,
  internalAddressKind,
  internalNameKind,
  isIpLiteral,
  refusalMessage,
} from './address-rule.js';

/**
 * Outbound POSTs under the address rule (`address-rule.ts`), checked at each connection: the
 * socket's own name lookup refuses an internal address, so a name that resolved to a public
 * address when the operator configured it and to 127.0.0.1 now (DNS rebinding) is refused
 * without a byte sent. Redirects are not followed (a 3xx is an answer like any other), so a public
 * target cannot bounce the request inward either.
 */

export interface OutboundOptions {
  allowPrivate: boolean;
}

export interface PostResult {
  status: number;
}

/** Why an http(s) URL is not a reachable outbound target before any lookup, or null. */
function staticRefusal(url: URL): string | null {
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return 'only http:// and https:// URLs can be posted to';
  const host = url.hostname;
  if (isIpLiteral(host)) {
    const kind = internalAddressKind(host);
    return kind ? refusalMessage(host, kind) : null;
  }
  const name = internalNameKind(host);
  return name ? refusalMessage(host, name) : null;
}

/** A lookup that answers as dns.lookup does but refuses when any address of the name is internal. */
export const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
    if (err) return callback(err, '', 4);
    for (const a of addresses) {
      const kind = internalAddressKind(a.address);
      if (kind) {
        const refused = Object.assign(new OutboundRefused(refusalMessage(hostname, kind, a.address)), {
          code: 'EOUTBOUNDREFUSED',
        });
        return callback(refused, '', 4);
      }
    }
    if ((options as { all?: boolean }).all)
      return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
    const first = addresses[0];
    if (!first)
      return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 4);
    return callback(null, first.address, first.family);
  });
};

/**
 * The check at configuration: the URL's host, as written or as it resolves now, must be public.
 * A name that does not resolve yet is let through (its receiver may not be up yet): the check at
 * each connection stands behind it. Throws OutboundRefused with the reason.
 */
export async function checkOutboundTarget(rawUrl: string, opts: OutboundOptions): Promise<void> {
  if (opts.allowPrivate) return;
  const url = new URL(rawUrl);
  const refused = staticRefusal(url);
  if (refused) throw new OutboundRefused(refused);
  if (isIpLiteral(url.hostname)) return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, 2000);
    guardedLookup(url.hostname, { all: true }, (err) => {
      clearTimeout(timer);
      if (err instanceof OutboundRefused) reject(err);
      else resolve();
    });
  });
}

/**
 * POSTs `body` to `rawUrl` with the address rule enforced at connection time; answers the status
 * (the body is read and dropped). Throws OutboundRefused for an internal target, or the network's
 * error (a TimeoutError after `timeoutMs`).
 */
export async function postOutbound(
  rawUrl: string,
  init: { headers: Record<string, string>; body: string; timeoutMs: number },
  opts: OutboundOptions,
): Promise<PostResult> {
  const url = new URL(rawUrl);
  if (!opts.allowPrivate) {
    const refused = staticRefusal(url);
    if (refused) throw new OutboundRefused(refused);
  }
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  const payload = Buffer.from(init.body);
  const options: RequestOptions = {
    method: 'POST',
    headers: { ...init.headers, 'content-length': String(payload.length) },
    ...(opts.allowPrivate ? {} : { lookup: guardedLookup }),
    // One connection per post: a kept-alive socket would skip the lookup of the next one.
    agent: false,
  };
  return await new Promise<PostResult>((resolve, reject) => {
    const req = request(url, options, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
      res.on('error', reject);
    });
    req.setTimeout(init.timeoutMs, () =>
      req.destroy(Object.assign(new Error('timed out'), { name: 'TimeoutError' })),
    );
    req.on('error', (err: Error & { code?: string }) =>
      // The lookup's refusal reaches here wrapped by the socket; it is given back as itself.
      reject(err.code === 'EOUTBOUNDREFUSED' ? new OutboundRefused(err.message) : err),
    );
    req.end(payload);
  });
}

/** A short reason for a failed post, for a delivery log: never the URL's credentials or a secret. */
export function describePostFailure(err: unknown): string {
  if (err instanceof OutboundRefused) return `refused: ${err.message}`;
  const e = err as Error & { code?: string };
  if (e?.name === 'TimeoutError') return 'timed out';
  return e?.code ? `unreachable (${e.code})` : 'unreachable';
}
