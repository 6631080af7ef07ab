import { describe, expect, it } from 'vitest';
import {
  normalizeIp,
  parseTrustedProxies,
  resolveForwardedChain,
  TrustedProxiesError,
} from '../../../shared/client-ip.js';

describe('normalizeIp', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['::ffff:127.0.0.1', '127.0.0.1'],
    ['::FFFF:10.1.2.3', '10.1.2.3'],
    ['203.0.113.7:5123', '203.0.113.7'],
    ['[2001:db8::1]:443', '2001:db8::1'],
    ['[2001:DB8::1]', '2001:db8::1'],
    ['fe80::1%eth0', 'fe80::1'],
    [' 198.51.100.2 ', '198.51.100.2'],
    ['unknown', undefined],
    ['', undefined],
    ['300.1.1.1', undefined],
  ] as const)('%s → %s', (raw, expected) => {
    expect(normalizeIp(raw)).toBe(expected);
  });
});

describe('parseTrustedProxies', () => {
  it.each([
    ['loopback', '127.0.0.1', true],
    ['loopback', '127.255.0.9', true],
    ['loopback', '::1', true],
    ['loopback', '::ffff:127.0.0.1', true],
    ['loopback', '10.0.0.1', false],
    ['uniquelocal', '172.31.255.255', true],
    ['uniquelocal', '172.32.0.1', false],
    ['uniquelocal', 'fd00::5', true],
    ['linklocal', '169.254.1.1', true],
    ['10.0.0.0/8, 2001:db8::/32', '10.200.0.1', true],
    ['10.0.0.0/8, 2001:db8::/32', '2001:db8:ffff::1', true],
    ['10.0.0.0/8, 2001:db8::/32', '127.0.0.1', false],
    ['203.0.113.5', '203.0.113.5', true],
    ['203.0.113.5', '203.0.113.6', false],
    ['none', '127.0.0.1', false],
    ['', '127.0.0.1', false],
    ['loopback', 'not-an-ip', false],
  ] as const)('%s trusts %s → %s', (spec, address, expected) => {
    expect(parseTrustedProxies(spec).trusts(address)).toBe(expected);
  });

  it('gives the same verdicts when asked again (they are remembered)', () => {
    const trust = parseTrustedProxies('10.0.0.0/8');
    for (let round = 0; round < 2; round += 1) {
      expect(trust.trusts('10.0.0.1')).toBe(true);
      expect(trust.trusts('::ffff:10.0.0.1')).toBe(true);
      expect(trust.trusts('11.0.0.1')).toBe(false);
      expect(trust.trusts('garbage')).toBe(false);
    }
  });

  it.each(['localhost', '10.0.0.0/33', '10.0.0.0/8/1', '::1/129', '10.0.0.0/x'])(
    'refuses %s with a clear message',
    (spec) => {
      expect(() => parseTrustedProxies(spec)).toThrow(TrustedProxiesError);
      expect(() => parseTrustedProxies(spec)).toThrow(/TRUSTED_PROXIES/);
    },
  );
});

describe('resolveForwardedChain', () => {
  const loopback = parseTrustedProxies('loopback');
  const cdn = parseTrustedProxies('loopback,10.0.0.0/8');

  it('believes X-Forwarded-For from a trusted peer', () => {
    expect(resolveForwardedChain('::ffff:127.0.0.1', '203.0.113.9', loopback)).toEqual({
      clientIp: '203.0.113.9',
      hops: ['203.0.113.9', '127.0.0.1'],
      peerTrusted: true,
    });
  });

  it('ignores X-Forwarded-For from an untrusted peer', () => {
    expect(resolveForwardedChain('198.51.100.4', '1.1.1.1', loopback)).toEqual({
      clientIp: '198.51.100.4',
      hops: ['198.51.100.4'],
      peerTrusted: false,
    });
  });

  it('stops at the first hop that is not trusted, dropping what it claimed', () => {
    const chain = resolveForwardedChain('127.0.0.1', ['6.6.6.6, 203.0.113.9', '10.0.0.7'], cdn);
    expect(chain.clientIp).toBe('203.0.113.9');
    expect(chain.hops).toEqual(['203.0.113.9', '10.0.0.7', '127.0.0.1']);
  });

  it('takes the left-most entry when every hop is trusted', () => {
    expect(resolveForwardedChain('127.0.0.1', '10.0.0.1, 10.0.0.2', cdn).clientIp).toBe('10.0.0.1');
  });

  it('stops at garbage in the header', () => {
    expect(resolveForwardedChain('127.0.0.1', '203.0.113.9, unknown', loopback).clientIp).toBe('127.0.0.1');
  });

  it('uses the peer when there is no header', () => {
    expect(resolveForwardedChain('127.0.0.1', undefined, loopback).clientIp).toBe('127.0.0.1');
  });
});
