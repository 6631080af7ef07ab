import { describe, expect, it } from 'vitest';
import {
  buildFbc,
  decideFbc,
  fbcMatchesFbclid,
  MAX_FBC_LENGTH,
  parseFbc,
  rawQueryParam,
} from '../../../shared/fbc.js';

describe('buildFbc', () => {
  it('writes fb.1.<ms>.<fbclid> with the fbclid byte for byte', () => {
    expect(buildFbc('IwAR2xYz-_AbC', 1_700_000_000_123)).toBe('fb.1.1700000000123.IwAR2xYz-_AbC');
    expect(buildFbc('a%2Bb~c', 5)).toBe('fb.1.5.a%2Bb~c');
  });

  it('drops fractions of a millisecond', () => {
    expect(buildFbc('x', 12.9)).toBe('fb.1.12.x');
  });
});

describe('parseFbc', () => {
  it.each([
    ['fb.1.1700000000123.IwAR', { subdomainIndex: 1, createdAtMs: 1700000000123, fbclid: 'IwAR' }],
    ['fb.2.5.with.dots.inside', { subdomainIndex: 2, createdAtMs: 5, fbclid: 'with.dots.inside' }],
  ])('splits %s', (value, parsed) => {
    expect(parseFbc(value)).toEqual(parsed);
  });

  it.each([undefined, '', 'fb.1.123.', 'fb.x.123.abc', 'fc.1.123.abc', 'fb.1.abc.def', 'IwAR-bare-fbclid'])(
    'refuses %s',
    (value) => {
      expect(parseFbc(value)).toBeUndefined();
    },
  );
});

describe('fbcMatchesFbclid', () => {
  it.each([
    ['fb.1.1.ABC', 'ABC', true],
    ['fb.1.1.ABC', 'abc', false],
    ['fb.1.1.ABC', 'ABCD', false],
    ['fb.1.1.ABCD', 'ABC', false],
    // Meta's newer pixel appends `.<appendix>` after the fbclid: the same click.
    ['fb.1.1.ABC.AQZ-appendix_1', 'ABC', true],
    ['fb.1.1.ABCD.AQZ', 'ABC', false],
    ['fb.1.1.XABC.AQZ', 'ABC', false],
    [undefined, 'ABC', false],
    ['garbage', 'garbage', false],
  ] as const)('%s vs %s → %s', (fbc, fbclid, expected) => {
    expect(fbcMatchesFbclid(fbc, fbclid)).toBe(expected);
  });
});

describe('rawQueryParam', () => {
  it.each([
    ['?fbclid=IwAR%2Bx+y', 'fbclid', 'IwAR%2Bx+y'],
    ['a=1&fbclid=abc&fbclid=def', 'fbclid', 'abc'],
    ['?fbclid=&fbclid=second', 'fbclid', 'second'],
    ['?xfbclid=no', 'fbclid', undefined],
    ['?fbclid', 'fbclid', undefined],
    ['', 'fbclid', undefined],
  ] as const)('%s → %s', (search, name, expected) => {
    expect(rawQueryParam(search, name)).toBe(expected);
  });
});

describe('decideFbc', () => {
  const now = 1_700_000_000_000;

  it.each([
    ['no cookie, no fbclid', undefined, undefined, { fbc: undefined, built: false }],
    ['cookie only', 'fb.1.1.OLD', undefined, { fbc: 'fb.1.1.OLD', built: false }],
    ['matching cookie is kept', 'fb.1.1.SAME', 'SAME', { fbc: 'fb.1.1.SAME', built: false }],
    [
      "a cookie with Meta's appendix keeps its click time",
      'fb.1.1.SAME.AQxyz',
      'SAME',
      { fbc: 'fb.1.1.SAME.AQxyz', built: false },
    ],
    ['other click replaces cookie', 'fb.1.1.OLD', 'NEW', { fbc: `fb.1.${now}.NEW`, built: true }],
    ['fbclid without cookie', undefined, 'NEW', { fbc: `fb.1.${now}.NEW`, built: true }],
    ['malformed cookie is not a match', 'NEW', 'NEW', { fbc: `fb.1.${now}.NEW`, built: true }],
    ['empty cookie is ignored', '', undefined, { fbc: undefined, built: false }],
  ] as const)('%s', (_name, cookie, fbclid, expected) => {
    expect(decideFbc(cookie, fbclid, now)).toEqual(expected);
  });

  it('never reports an fbc longer than the wire allows', () => {
    const long = 'x'.repeat(MAX_FBC_LENGTH);
    expect(decideFbc(undefined, long, now)).toEqual({ fbc: undefined, built: false });
    expect(decideFbc(`fb.1.1.${long}`, undefined, now)).toEqual({ fbc: undefined, built: false });
    expect(decideFbc('fb.1.1.KEEP', long, now)).toEqual({ fbc: 'fb.1.1.KEEP', built: false });
  });
});
