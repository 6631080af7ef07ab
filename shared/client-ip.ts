/**
 * Finding a browser's IP behind reverse proxies (`TRUSTED_PROXIES`, default `loopback`).
 *
 * `X-Forwarded-For` is only as good as the hop that wrote it: walking from the socket's peer
 * towards the browser, each entry is believed only while the hop that handed it over is trusted.
 * The first address reached through an untrusted hop (or the left-most one) is the client.
 */
import { BlockList, isIP } from 'node:net';

type Family = 'ipv4' | 'ipv6';
type Subnet = readonly [address: string, prefix: number, family: Family];

const KEYWORDS: Record<string, readonly Subnet[]> = {
  loopback: [
    ['127.0.0.0', 8, 'ipv4'],
    ['::1', 128, 'ipv6'],
  ],
  linklocal: [
    ['169.254.0.0', 16, 'ipv4'],
    ['fe80::', 10, 'ipv6'],
  ],
  uniquelocal: [
    ['10.0.0.0', 8, 'ipv4'],
    ['172.16.0.0', 12, 'ipv4'],
    ['192.168.0.0', 16, 'ipv4'],
    ['fc00::', 7, 'ipv6'],
  ],
};

export interface TrustedProxies {
  /** Whether a hop at this address may tell us who connected to it. */
  trusts(address: string): boolean;
  /** The specification it was parsed from, for logs. */
  readonly description: string;
}

export class TrustedProxiesError extends Error {
  override readonly name = 'TrustedProxiesError';
}

/**
 * Parses a comma-separated list of keywords (`loopback`, `linklocal`, `uniquelocal`, `none`),
 * addresses and CIDR ranges, e.g. `loopback,10.0.0.0/8,2001:db8::/32`.
 */
export function parseTrustedProxies(spec: string): TrustedProxies {
  const list = new BlockList();
  const entries = spec
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  for (const entry of entries) {
    const keyword = KEYWORDS[entry.toLowerCase()];
    if (keyword !== undefined) {
      for (const [address, prefix, family] of keyword) list.addSubnet(address, prefix, family);
      continue;
    }
    if (entry.toLowerCase() === 'none') continue;
    const [rawAddress, rawPrefix, extra] = entry.split('/');
    const address = normalizeIp(rawAddress ?? '');
    if (address === undefined || extra !== undefined) {
      throw new TrustedProxiesError(
        `TRUSTED_PROXIES: "${entry}" is neither an IP address, a CIDR range nor one of loopback, linklocal, uniquelocal, none`,
      );
    }
    const family: Family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    const maxPrefix = family === 'ipv6' ? 128 : 32;
    if (rawPrefix === undefined) {
      list.addAddress(address, family);
      continue;
    }
    const prefix = /^\d{1,3}$/.test(rawPrefix) ? Number(rawPrefix) : Number.NaN;
    if (!(prefix >= 0 && prefix <= maxPrefix)) {
      throw new TrustedProxiesError(
        `TRUSTED_PROXIES: "${entry}" has a prefix length outside 0..${maxPrefix}`,
      );
    }
    list.addSubnet(address, prefix, family);
  }
  // Most requests come from a handful of peers (a load balancer, a CDN's edge): remember the
  // verdicts, within a bound, rather than consult the BlockList every time.
  const verdicts = new Map<string, boolean>();
  return {
    description: entries.join(',') || 'none',
    trusts(candidate: string): boolean {
      const known = verdicts.get(candidate);
      if (known !== undefined) return known;
      const address = normalizeIp(candidate);
      const verdict = address !== undefined && list.check(address, isIP(address) === 6 ? 'ipv6' : 'ipv4');
      if (verdicts.size >= 1_024) verdicts.clear();
      verdicts.set(candidate, verdict);
      return verdict;
    },
  };
}

/**
 * A bare IP from a socket address or an `X-Forwarded-For` entry: strips brackets, ports, zone ids
 * and the IPv4-mapped IPv6 prefix. Undefined when it is not an IP at all.
 */
export function normalizeIp(raw: string): string | undefined {
  let value = raw.trim();
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(value);
  if (bracketed?.[1] !== undefined) value = bracketed[1];
  else if (/^[\d.]+:\d+$/.test(value)) value = value.slice(0, value.lastIndexOf(':'));
  const zone = value.indexOf('%');
  if (zone !== -1) value = value.slice(0, zone);
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(value);
  if (mapped?.[1] !== undefined) value = mapped[1];
  return isIP(value) === 0 ? undefined : value.toLowerCase();
}

export interface ForwardedChain {
  /** The browser's IP as far as trusted hops vouch for it. */
  clientIp: string;
  /**
   * The believable part of the path, the client first and the socket's peer last: what an honest
   * `X-Forwarded-For` for the next hop holds.
   */
  hops: string[];
  /** Whether the socket's peer is a trusted proxy (so its other `X-Forwarded-*` headers count). */
  peerTrusted: boolean;
}

/** Resolves the client IP from the socket peer and the `X-Forwarded-For` values it sent. */
export function resolveForwardedChain(
  remoteAddress: string | undefined,
  forwardedFor: string | readonly string[] | undefined,
  trust: TrustedProxies,
): ForwardedChain {
  const peer = normalizeIp(remoteAddress ?? '') ?? '0.0.0.0';
  const peerTrusted = trust.trusts(peer);
  const hops = [peer];
  if (!peerTrusted) return { clientIp: peer, hops, peerTrusted };
  const listed = (typeof forwardedFor === 'string' ? [forwardedFor] : (forwardedFor ?? []))
    .flatMap((value) => value.split(','))
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  for (let i = listed.length - 1; i >= 0; i -= 1) {
    const address = normalizeIp(listed[i] ?? '');
    if (address === undefined) break;
    hops.unshift(address);
    if (!trust.trusts(address)) break;
  }
  return { clientIp: hops[0] ?? peer, hops, peerTrusted };
}

/**
 * Whose budget a request is counted against (rate limits, sign-in tries): an IPv4 address, or an
 * IPv6 address's /64. One host (any VPS, any home connection) holds a whole /64 and can pick a
 * fresh address for every request, so counting IPv6 addresses one by one would let it go on
 * without end.
 */
export function clientBudgetKey(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  let text = ip.split('%')[0]!.toLowerCase();
  // An IPv4 client seen through an IPv6 socket is that IPv4 address.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (mapped) return mapped[1]!;
  // A dotted IPv4 tail (::ffff:1.2.3.4) as its two groups.
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups =
    tail === undefined
      ? left
      : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
