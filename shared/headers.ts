/**
 * Headers that carry the real browser context to Capigram when a server (the reverse proxy, a
 * site's backend) calls it on a visitor's behalf. They win over the `clientIp`/`userAgent` body
 * fields. Node lower-cases incoming header names: compare with `.toLowerCase()`.
 */
export const CLIENT_IP_HEADER = 'X-Capigram-Client-IP';
export const CLIENT_USER_AGENT_HEADER = 'X-Capigram-Client-User-Agent';
/**
 * A forwarder key (`forwarder create`): the caller's proof that the forwarding headers above are
 * its own word, for a caller Capigram cannot trust by its address (a CDN's Worker).
 */
export const FORWARDER_KEY_HEADER = 'X-Capigram-Forwarder-Key';

export interface ClientContext {
  ip?: string | undefined;
  userAgent?: string | undefined;
}

/** The forwarding headers for a visitor; absent values are left out rather than sent empty. */
export function clientContextHeaders(client: ClientContext): Record<string, string> {
  const headers: Record<string, string> = {};
  if (client.ip !== undefined && client.ip !== '') headers[CLIENT_IP_HEADER] = client.ip;
  if (client.userAgent !== undefined && client.userAgent !== '') {
    headers[CLIENT_USER_AGENT_HEADER] = client.userAgent;
  }
  return headers;
}
