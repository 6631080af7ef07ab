import { describe, expect, it } from 'vitest';
import {
  FBP_PATCHED_COOKIE,
  isCookieSafe,
  isUuid,
  readCookies,
  serializeTrackingCookie,
  SESSION_ID_COOKIE,
  SESSION_ID_MAX_AGE_SECONDS,
  TEMP_ID_COOKIE,
  TEMP_ID_MAX_AGE_SECONDS,
} from '../../../shared/cookies.js';

describe('cookie names and lifetimes', () => {
  it('match the contract', () => {
    expect(TEMP_ID_COOKIE).toBe('capigram_tid');
    expect(SESSION_ID_COOKIE).toBe('capigram_sid');
    expect(TEMP_ID_MAX_AGE_SECONDS).toBe(31_536_000);
    expect(SESSION_ID_MAX_AGE_SECONDS).toBe(1_800);
    expect(FBP_PATCHED_COOKIE).toMatch(/^capigram_/);
    expect(new Set([TEMP_ID_COOKIE, SESSION_ID_COOKIE, FBP_PATCHED_COOKIE]).size).toBe(3);
  });
});

describe('serializeTrackingCookie', () => {
  const now = Date.UTC(2025, 0, 1, 12, 0, 0);

  it('sets Path=/, SameSite=Lax, Max-Age and a matching Expires, without Secure on HTTP', () => {
    const header = serializeTrackingCookie('capigram_sid', 'abc', 1800, now, { secure: false });
    expect(header).toBe(
      'capigram_sid=abc; Max-Age=1800; Path=/; Expires=Wed, 01 Jan 2025 12:30:00 GMT; SameSite=Lax',
    );
  });

  it('adds Secure on HTTPS and Domain only when asked', () => {
    const header = serializeTrackingCookie('capigram_tid', 'v', 10, now, {
      secure: true,
      domain: 'example.com',
    });
    expect(header).toContain('; Secure');
    expect(header).toContain('; Domain=example.com');
    expect(header).not.toMatch(/HttpOnly/i);
  });

  it('refuses a value that would break the header', () => {
    expect(() =>
      serializeTrackingCookie('_fbc', 'a; Domain=evil.example', 1, now, { secure: false }),
    ).toThrow(TypeError);
  });

  it('keeps Expires exact to the second however the calls interleave (the dates are cached per second)', () => {
    const expires = (maxAge: number, at: number) =>
      /Expires=([^;]+)/.exec(
        serializeTrackingCookie('capigram_sid', 'v', maxAge, at, { secure: false }),
      )?.[1];
    for (const at of [now, now + 999, now + 1000, now - 1, now + 1000, now]) {
      for (const maxAge of [SESSION_ID_MAX_AGE_SECONDS, TEMP_ID_MAX_AGE_SECONDS, 0]) {
        expect(expires(maxAge, at)).toBe(new Date(at + maxAge * 1000).toUTCString());
      }
    }
    expect(expires(0, now + 999)).toBe('Wed, 01 Jan 2025 12:00:00 GMT');
    expect(expires(0, now + 1000)).toBe('Wed, 01 Jan 2025 12:00:01 GMT');
    expect(expires(0, 8.64e15)).toBe('Sat, 13 Sep 275760 00:00:00 GMT');
    expect(expires(0, 8.64e15 + 1)).toBe('Invalid Date');
  });

  it('writes the value verbatim', () => {
    expect(serializeTrackingCookie('_fbc', 'fb.1.5.a%2Bb', 1, now, { secure: false })).toMatch(
      /^_fbc=fb\.1\.5\.a%2Bb;/,
    );
  });
});

describe('readCookies', () => {
  it('reads values verbatim (no percent-decoding, no unquoting) and keeps the first of duplicate names', () => {
    expect(readCookies('_fbc=fb.1.5.a%2Bb; capigram_tid=one; capigram_tid=two; other="q"')).toEqual({
      _fbc: 'fb.1.5.a%2Bb',
      capigram_tid: 'one',
      other: '"q"',
    });
  });

  it('returns a plain object, the same whatever was parsed before', () => {
    const first = readCookies('capigram_tid=one');
    const second = readCookies('capigram_sid=two');
    expect(Object.getPrototypeOf(first)).toBe(Object.prototype);
    expect(first).toEqual({ capigram_tid: 'one' });
    expect(second).toEqual({ capigram_sid: 'two' });
  });

  it('copes with missing or empty headers', () => {
    expect(readCookies(undefined)).toEqual({});
    expect(readCookies('')).toEqual({});
  });
});

describe('isCookieSafe', () => {
  it.each([
    ['fb.1.5.AbC-_~%2B', true],
    ['with space', false],
    ['semi;colon', false],
    ['comma,', false],
    ['quote"', false],
    ['back\\slash', false],
    ['é', false],
  ] as const)('%s → %s', (value, expected) => {
    expect(isCookieSafe(value)).toBe(expected);
  });
});

describe('isUuid', () => {
  it.each([
    ['0f8fad5b-d9cb-469f-a165-70867728950e', true],
    ['0F8FAD5B-D9CB-469F-A165-70867728950E', true],
    ['0f8fad5b-d9cb-069f-a165-70867728950e', false],
    ['0f8fad5b-d9cb-469f-c165-70867728950e', false],
    ['not-a-uuid', false],
    [undefined, false],
  ] as const)('%s → %s', (value, expected) => {
    expect(isUuid(value)).toBe(expected);
  });
});
