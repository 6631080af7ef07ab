import type { Context, MiddlewareHandler } from 'hono';
import { normalizeIp, resolveForwardedChain, type TrustedProxies } from '../../../shared/client-ip.js';
import { CLIENT_IP_HEADER, CLIENT_USER_AGENT_HEADER, FORWARDER_KEY_HEADER } from '../../../shared/headers.js';
import { WIRE_LIMITS } from '../../../shared/tracker-wire.js';
import type { ForwarderKeys } from '../../domain/tracker/forwarders.js';
import { ApiError } from '../../errors.js';
import { socketAddress } from '../request-info.js';
import type { BrowserContext, KeylessEnv } from './env.js';

function clip(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  return trimmed === '' ? undefined : trimmed.slice(0, WIRE_LIMITS.userAgent);
}

function resolveBrowser(
  c: Context,
  trust: TrustedProxies,
  forwarderSiteId: string | undefined,
): BrowserContext {
  const chain = resolveForwardedChain(socketAddress(c), c.req.header('x-forwarded-for'), trust);
  let ip = chain.clientIp;
  // The sender itself is a trusted proxy only when every hop, down to the first, is trusted.
  if (forwarderSiteId !== undefined || trust.trusts(chain.clientIp)) {
    const forwarded = normalizeIp((c.req.header(CLIENT_IP_HEADER) ?? '').slice(0, 64));
    if (forwarded !== undefined) ip = forwarded;
  }
  return {
    ip,
    forwardedUserAgent: clip(c.req.header(CLIENT_USER_AGENT_HEADER)),
    requestUserAgent: clip(c.req.header('user-agent')),
    forwarderSiteId,
  };
}

export function clientContext(
  trust: TrustedProxies,
  forwarders: ForwarderKeys,
): MiddlewareHandler<KeylessEnv> {
  return async (c, next) => {
    const key = c.req.header(FORWARDER_KEY_HEADER);
    let forwarderSiteId: string | undefined;
    if (key !== undefined) {
      // A wrong key is refused, not ignored: the forwarder's operator must learn it at once,
      // rather than from visits that all carry the forwarder's own IP.
      const verdict = await forwarders.check(key.slice(0, 200));
      if (verdict === null)
        throw new ApiError(
          'UNAUTHORIZED',
          `${FORWARDER_KEY_HEADER} is not a valid forwarder key (unknown or revoked)`,
        );
      forwarderSiteId = verdict.siteId;
    }
    c.set('browser', resolveBrowser(c, trust, forwarderSiteId));
    await next();
  };
}

/** The visitor's User-Agent: a proxy's forwarding header, else the body's field, else the request's. */
export function userAgentOf(browser: BrowserContext, bodyUserAgent: string | undefined): string | undefined {
  return (
    browser.forwardedUserAgent ??
    (bodyUserAgent === undefined || bodyUserAgent === '' ? undefined : bodyUserAgent) ??
    browser.requestUserAgent
  );
}
