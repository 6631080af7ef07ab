import { normalizeIp } from '../../../shared/client-ip.js';

/**
 * The end user's IP and User-Agent for a business event. A caller's backend forwards them either
 * as `X-Capigram-Client-IP` / `X-Capigram-Client-User-Agent` headers or as `clientIp` / `userAgent`
 * body fields; a header wins over its body field. Blank values count as absent.
 */
export interface ClientContextSources {
  headerIp?: string | null | undefined;
  headerUserAgent?: string | null | undefined;
  bodyIp?: string | null | undefined;
  bodyUserAgent?: string | null | undefined;
}

export interface ClientContext {
  clientIp: string | null;
  userAgent: string | null;
}

function present(v: string | null | undefined): string | undefined {
  const t = v?.trim();
  return t ? t : undefined;
}

export function clientContext(s: ClientContextSources): ClientContext {
  const ip = present(s.headerIp) ?? present(s.bodyIp);
  return {
    // Validation at the edge has already refused anything that is not an IP address.
    clientIp: ip === undefined ? null : (normalizeIp(ip) ?? null),
    userAgent: present(s.headerUserAgent) ?? present(s.bodyUserAgent) ?? null,
  };
}
