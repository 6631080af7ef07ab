import ipaddr from 'ipaddr.js';

/**
 * The one rule for every target Capigram posts to on an operator's behalf (outbound webhooks,
 * alert webhooks, a bot's `--forward-url`): only a public unicast address is reachable, so that a
 * URL typed into Capigram cannot make it call the loopback, the private network it runs in, or a
 * cloud's metadata service (server-side request forgery). `OUTBOUND_ALLOW_PRIVATE=1` lifts the rule
 * for on-premise set-ups whose receivers live on the private network.
 *
 * The classification of an address is ipaddr.js's: it knows the IANA special-purpose registries
 * of both families, reads the IPv4 forms a resolver accepts (decimal `2130706433`, hex
 * `0x7f000001`, octal `0177.0.0.1`, short `127.1`) and unwraps IPv4-mapped IPv6, which is where
 * hand-written checks usually leak. Anything but `unicast` (a public address) is refused: that
 * covers loopback, RFC 1918, link-local (and 169.254.169.254 in it), CGNAT, 0.0.0.0/8, unique-local
 * fc00::/7 (and fd00:ec2::254 in it), NAT64 and 6to4 (which embed an IPv4 address), multicast and
 * reserved ranges.
 */

/** Names that never leave the machine or the cloud it runs in, whatever a resolver says. */
const INTERNAL_NAMES = [/^localhost$/, /\.localhost$/, /^metadata\.google\.internal$/, /\.internal$/];

/** Why an address is refused, or null when it is a public unicast address. */
export function internalAddressKind(address: string): string | null {
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    // process() turns an IPv4-mapped IPv6 address into the IPv4 address it carries.
    ip = ipaddr.process(address.replace(/^\[|\]$/g, '').replace(/%.*$/, ''));
  } catch {
    return null;
  }
  const range = ip.range();
  return range === 'unicast' ? null : describeRange(range);
}

function describeRange(range: string): string {
  switch (range) {
    case 'loopback':
      return 'a loopback address';
    case 'private':
      return 'a private (RFC 1918) address';
    case 'linkLocal':
      return 'a link-local address (cloud metadata services live there)';
    case 'carrierGradeNat':
      return 'a carrier-grade NAT (100.64.0.0/10) address';
    case 'uniqueLocal':
      return 'a unique-local (fc00::/7) address';
    case 'unspecified':
      return 'an unspecified (0.0.0.0/8 or ::) address';
    default:
      return `a non-public address (${range})`;
  }
}

/** Whether `host` (a URL's hostname) is written as an IP address in any form a resolver reads. */
export function isIpLiteral(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  return ipaddr.isValid(h);
}

/** Why a host name is refused before any lookup (localhost, metadata names), or null. */
export function internalNameKind(host: string): string | null {
  const h = host.toLowerCase().replace(/\.+$/, '');
  return INTERNAL_NAMES.some((re) => re.test(h)) ? 'a name internal to the machine or its cloud' : null;
}

export class OutboundRefused extends Error {
  override name = 'OutboundRefused';
}

/** The refusal's message, the same for every outbound kind. */
export function refusalMessage(host: string, kind: string, address?: string): string {
  const at = address && address !== host ? ` (${address})` : '';
  return `${host}${at} is ${kind}: Capigram only posts to public addresses (set OUTBOUND_ALLOW_PRIVATE=1 to allow private targets)`;
}
