// The pure rules of the keyless surface, table by table.
import { describe, expect, it } from 'vitest';
import { fallbackUrl, handoutCutoff, linkName, linkRequest } from '../../backend/domain/invites/links.js';
import { checkDomains, hostAllowed, hostAndParents, hostOf } from '../../backend/http/tracker/domains.js';
import { loadConfig } from '../../backend/config.js';
import { rateLimitSettings } from '../../backend/domain/rate-limits.js';
import { clickRequestId, redirectClick } from '../../backend/http/tracker/redirect-click.js';

describe('domain validation', () => {
  it.each([
    ['https://example.com/x', 'example.com'],
    ['https://Shop.EXAMPLE.com:8443/', 'shop.example.com'],
    ['https://example.com./', 'example.com'],
    ['https://bücher.example/', 'xn--bcher-kva.example'],
    ['http://[::1]:3000/', '::1'],
    ['ftp://example.com/', null],
    ['null', null],
    ['/relative', null],
    ['', null],
  ])('hostOf(%j) = %j', (url, host) => {
    expect(hostOf(url)).toBe(host);
  });

  it.each([
    ['example.com', true],
    ['shop.example.com', true],
    ['a.b.example.com', true],
    ['evil-example.com', false],
    ['example.com.evil.net', false],
    ['xample.com', false],
    ['com', false],
    ['localhost', true],
  ])('%s allowed by [example.com, localhost]: %s', (host, allowed) => {
    expect(hostAllowed(host, ['example.com', 'localhost'])).toBe(allowed);
  });

  it('lists a host with its parent domains', () => {
    expect(hostAndParents('a.shop.example.com')).toEqual([
      'a.shop.example.com',
      'shop.example.com',
      'example.com',
      'com',
    ]);
  });

  const domains = ['example.com'];
  it.each([
    [{ origin: 'https://shop.example.com' }, { ok: true, corsOrigin: 'https://shop.example.com' }],
    [{ origin: 'https://evil-example.com' }, { ok: false, code: 'DOMAIN_NOT_ALLOWED' }],
    [{ origin: 'null' }, { ok: false, code: 'DOMAIN_NOT_ALLOWED' }],
    // Origin wins over Referer when both are present.
    [
      { origin: 'https://example.com', referer: 'https://evil.net/' },
      { ok: true, corsOrigin: 'https://example.com' },
    ],
    [{ referer: 'https://example.com/page' }, { ok: true, corsOrigin: undefined }],
    [{ referer: 'https://evil.net/page' }, { ok: false, code: 'DOMAIN_NOT_ALLOWED' }],
    [{}, { ok: true, corsOrigin: undefined }],
    [{ href: 'https://shop.example.com/landing' }, { ok: true, corsOrigin: undefined }],
    [
      { origin: 'https://example.com', href: 'https://evil.net/landing' },
      { ok: false, code: 'DOMAIN_NOT_ALLOWED' },
    ],
    [{ href: 'landing.html' }, { ok: false, code: 'VALIDATION_FAILED' }],
  ])('checkDomains(%j)', (req, verdict) => {
    expect(checkDomains(req, domains)).toMatchObject(verdict);
  });
});

describe('invite links', () => {
  it('names fit Telegram’s 32 characters and identify the invitation', () => {
    const name = linkName('7f3a9c1b-2d4e-4f60-8a1b-0c2d3e4f5a6b');
    expect(name).toBe('cg-7f3a9c1b2d4e4f608a1b0c2d3e4f5');
    expect(name.length).toBeLessThanOrEqual(32);
  });

  it.each(['member_limit', 'join_request'] as const)(
    'a %s link never asks for both member_limit and creates_join_request',
    (inviteMode) => {
      const r = linkRequest(
        { telegramChatId: -100123, inviteMode, inviteTtlSeconds: 3600 },
        'cg-x',
        new Date(1_700_000_000_000),
      );
      expect(r.expire_date).toBe(1_700_000_000 + 3600);
      expect('member_limit' in r && 'creates_join_request' in r).toBe(false);
      expect(inviteMode === 'join_request' ? r.creates_join_request : r.member_limit).toBe(
        inviteMode === 'join_request' ? true : 1,
      );
    },
  );

  it('hands out pooled links only with half their life left', () => {
    expect(handoutCutoff(new Date(0), 86_400).getTime()).toBe(43_200_000);
  });

  it.each([
    [{ publicInviteUrl: 'https://t.me/+public', username: 'chan' }, 'https://t.me/+public'],
    [{ publicInviteUrl: null, username: 'chan' }, 'https://t.me/chan'],
    [{ publicInviteUrl: null, username: null }, null],
  ])('fallback of %j is %j', (channel, url) => {
    expect(fallbackUrl(channel)).toBe(url);
  });
});

describe('rate-limit settings', () => {
  it('defaults, environment strings and 0 (off), read through the one config schema', () => {
    expect(rateLimitSettings(loadConfig({}))).toEqual({
      perMinute: { init: 120, fbp: 60, invite: 30 },
      burstPerTenMinutes: 60,
    });
    expect(
      rateLimitSettings(
        loadConfig({
          TRACKER_RATE_LIMIT_INIT: '10',
          TRACKER_RATE_LIMIT_BURST: '0',
        }),
      ),
    ).toEqual({
      perMinute: { init: 10, fbp: 60, invite: 30 },
      burstPerTenMinutes: 0,
    });
  });

  it.each(['-1', '1.5', 'lots'])('refuses %j', (value) => {
    expect(() => loadConfig({ TRACKER_RATE_LIMIT_FBP: value })).toThrow(/TRACKER_RATE_LIMIT_FBP/);
  });
});

describe('redirect clicks', () => {
  it('builds fbc from the raw fbclid and reads click ids and UTM parameters', () => {
    const search = '?fbclid=IwAR%2BX_y&gclid=G1&ScCid=S1&utm_source=fb&utm_term=a%20b';
    const q = new URLSearchParams(search);
    const click = redirectClick(search, (n) => q.get(n) ?? undefined, undefined, 1_700_000_000_123);
    expect(click.attribution).toMatchObject({
      fbc: 'fb.1.1700000000123.IwAR%2BX_y',
      gclid: 'G1',
      sccid: 'S1',
      utmSource: 'fb',
      utmTerm: 'a b',
    });
    expect(click.clickId).toBe('IwAR%2BX_y');
  });

  it('keeps an _fbc that records this fbclid, and drops overlong values', () => {
    const search = `?fbclid=abc&gclid=${'g'.repeat(600)}`;
    const q = new URLSearchParams(search);
    const click = redirectClick(search, (n) => q.get(n) ?? undefined, 'fb.1.5.abc', 9);
    expect(click.attribution.fbc).toBe('fb.1.5.abc');
    expect(click.attribution.gclid).toBeUndefined();
  });

  it('the same click in the same session has one visitRequestId; anything else a fresh one', () => {
    const base = { siteId: 's', channelId: 'c', tempId: 'T', sessionId: 'S', clickId: 'fbclid-1' };
    const id = clickRequestId(base);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(clickRequestId(base)).toBe(id);
    expect(clickRequestId({ ...base, sessionId: 'S2' })).not.toBe(id);
    expect(clickRequestId({ ...base, clickId: 'fbclid-2' })).not.toBe(id);
    expect(clickRequestId({ ...base, clickId: undefined })).not.toBe(
      clickRequestId({ ...base, clickId: undefined }),
    );
  });
});
