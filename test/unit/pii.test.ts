import { describe, expect, it } from 'vitest';
import {
  hashPii,
  isSha256Hex,
  normalizeEmail,
  normalizeExternalId,
  normalizeName,
  normalizePhone,
  sha256Hex,
} from '../../backend/domain/pii/normalize.js';

// Expected digests were computed once outside the code under test: printf %s '<value>' | sha256sum
const H = {
  johnSmithEmail: '62a14e44f765419d10fea99367361a727c12365e2520f32218d505ed9aa0f62f', // john_smith@gmail.com
  us6505551212: 'e323ec626319ca94ee8bff2e4c87cf613be6ea19919ed1364124e16807ab3176', // 16505551212
  us6505551212Plus: '1e231c66011e7a2d867a9cfae267a6aff103cf4913640b6e71a99850fc0ffbc8', // +16505551212
  us6169547888: 'bb2fa2e6d2cea4746530c99686d0c7886ab2019875dca2d7e9e171c0e6ada00d', // 16169547888
  us6169547888Plus: '0a36809ca24463df1133c40c2e2fa2b7f180038fe7d86bd1923a32a1a54dfe58', // +16169547888
  uk2079460958: '35e206e5dec4c89b9e8b71b8c32724a5bb518483ac5a20c6617d738375b3b823', // 442079460958
  uk2079460958Plus: 'f0bf0228144d9fe2bdf1da2d8ca698f17bf1410ee688b075c27062e47b6f0b6d', // +442079460958
  it0612345678: '472e1123cd4e2f66f1df06bd488dc6135dab8f80cbfcc4af144d042c005f0fb2', // 390612345678
  it0612345678Plus: '37b702607839d6dc5fc81d95b52e550e336413bf7ae2e04cafeca79f066ea44b', // +390612345678
  mary: '6915771be1c5aa0c886870b6951b03d7eafc121fea0e80a5ea83beb7c449f4ec', // mary
  smith: '6627835f988e2c5e50533d491163072d3f4f41f5c8b04630150debb3722ca2dd', // smith
  zoe: '2752b88686847fa5c86f47b94ce652b7b3f22a91c37617d451a4db9afa431450', // zoë (NFC, U+00EB)
  lukasz: '974282d5169583fd089607c615244d5495c50f3be4e9e5274ad64a27dc8ee84e', // łukasz
  obriensmith: '16765783f9c8c8a3accf27f1abb877688cb5904c21a4a7afb5f125bcfcb246ba', // obriensmith
  joseMaria: 'a6a9049d39c4dd1cc332a44c64da6e6ce99e4ddbc1e9b6595e7f7bad60ef5ef6', // josémaría
  wangXiaoming: 'acf979cc584e1cf9c18c65bffae9e53cbc18634f90042072cc116bd5b7375bed', // 王小明
  extU123: '50e80268bfa82fe11df25cc47a367503599a6aa203c178ee2cfa31fa13e1603e', // u-123
  extU123Upper: '294e19376912b173787729b04ec2768f462fb08e792dc8ee6a453e8dfd13e39f', // U-123
  test: '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', // test
} as const;

describe('sha256Hex', () => {
  it.each([
    ['test', H.test],
    ['john_smith@gmail.com', H.johnSmithEmail],
    ['zoë', H.zoe],
    ['王小明', H.wangXiaoming],
  ])('sha256(%j) is the known lowercase hex digest', (input, digest) => {
    expect(sha256Hex(input)).toBe(digest);
  });
});

describe('isSha256Hex', () => {
  it.each([
    [H.test, true],
    [H.test.toUpperCase(), true],
    [H.test.slice(1), false],
    [`${H.test}0`, false],
    [`${H.test.slice(0, 63)}g`, false],
    ['', false],
  ])('%j → %s', (input, expected) => {
    expect(isSha256Hex(input)).toBe(expected);
  });
});

describe('normalizeEmail', () => {
  it.each([
    ['John_Smith@gmail.com', 'john_smith@gmail.com'],
    ['  John_Smith@Gmail.COM \n', 'john_smith@gmail.com'],
    ['', undefined],
    ['   ', undefined],
    [null, undefined],
    [undefined, undefined],
  ])('%j → %j', (input, expected) => {
    expect(normalizeEmail(input)).toBe(expected);
  });
});

describe('normalizePhone', () => {
  it.each([
    ['(650)555-1212', 'US', '16505551212'],
    ['+1 (616) 954-78 88', undefined, '16169547888'],
    ['1-616-954-7888', 'US', '16169547888'],
    ['011 1 650 555 1212', 'US', '16505551212'],
    ['0044 20 7946 0958', 'DE', '442079460958'],
    ['0044 20 7946 0958', undefined, '442079460958'],
    ['020 7946 0958', 'GB', '442079460958'],
    ['020 7946 0958', 'gb', '442079460958'],
    ['+44 20 7946 0958', 'US', '442079460958'],
    ['+442079460958 ext. 12', undefined, '442079460958'],
    // Italy keeps the zero after the country code: it is part of the number, not a prefix.
    ['+39 06 1234 5678', undefined, '390612345678'],
    // Digits with a country code and no +: the international reading is the only valid one.
    ['1-616-954-7888', undefined, '16169547888'],
    ['16505551212', undefined, '16505551212'],
    ['44 20 7946 0958', 'US', '442079460958'],
    ['447911123456', 'DE', '447911123456'],
    ['4915123456789', 'DE', '4915123456789'],
    ['tel:+1-650-555-1212', undefined, '16505551212'],
    ['TEL:+44-20-7946-0958;ext=12', undefined, '442079460958'],
  ])('%j (default country %s) → %s', (input, country, digits) => {
    expect(normalizePhone(input, country)).toEqual({ digits, e164: `+${digits}` });
  });

  it.each([
    ['(650)555-1212', undefined],
    // Written nationally without a known country: never guessed (stripping zeros and prefixing + made these Egypt and Texas).
    ['(201) 555-0123', undefined],
    ['01512 3456789', undefined],
    // Only possible, not valid, in the country it is read in.
    ['(650) 555-1212', 'GB'],
    // Valid read in the US and as international digits (+20 15 5501 23, Egypt): ambiguous.
    ['2015550123', 'US'],
    ['+1 555 0100', undefined],
    ['not a phone', 'US'],
    ['', 'US'],
    ['   ', 'US'],
    [null, 'US'],
    ['123', 'XX'],
  ])('%j (default country %s) → undefined, since no country code can be found', (input, country) => {
    expect(normalizePhone(input, country)).toBeUndefined();
  });
});

describe('normalizeName', () => {
  it.each([
    ['Mary', 'mary'],
    ['  SMITH ', 'smith'],
    ['Zoë', 'zoë'],
    ['Zoe\u0308', 'zoë'],
    ['Łukasz', 'łukasz'],
    ["O'Brien-Smith", 'obriensmith'],
    ['José María', 'josémaría'],
    ['王 小明', '王小明'],
    ['Anne-Marie 2nd.', 'annemarie2nd'],
    ['!!! ...', undefined],
    ['', undefined],
    [null, undefined],
  ])('%j → %j', (input, expected) => {
    expect(normalizeName(input)).toBe(expected);
  });

  it('composes to NFC, so decomposed and precomposed input normalise to the same code points', () => {
    expect(normalizeName('Zoe\u0308')).toBe('zo\u00eb');
    expect(normalizeName('Zoe\u0308')?.length).toBe(3);
  });
});

describe('normalizeExternalId', () => {
  it.each([
    [' u-123 ', 'u-123'],
    ['U-123', 'u-123'],
    [' User 123\t', 'user123'],
    ['  ', undefined],
    [null, undefined],
  ])('%j → %j', (input, expected) => {
    expect(normalizeExternalId(input)).toBe(expected);
  });
});

describe('hashPii', () => {
  it('hashes every field after normalising it (Meta published examples)', () => {
    expect(
      hashPii(
        {
          email: ' John_Smith@gmail.com ',
          phone: '(650)555-1212',
          firstName: 'Mary',
          lastName: 'Smith',
          externalId: ' u-123 ',
        },
        { defaultCountry: 'US' },
      ),
    ).toEqual({
      em: H.johnSmithEmail,
      // No dot in the local part: Google's form is the same.
      emGoogle: H.johnSmithEmail,
      ph: H.us6505551212,
      phE164: H.us6505551212Plus,
      fn: H.mary,
      ln: H.smith,
      externalId: H.extU123,
    });
  });

  it.each([
    ['+1 (616) 954-78 88', undefined, H.us6169547888, H.us6169547888Plus],
    ['0044 20 7946 0958', undefined, H.uk2079460958, H.uk2079460958Plus],
    ['020 7946 0958', 'GB', H.uk2079460958, H.uk2079460958Plus],
    ['+39 06 1234 5678', undefined, H.it0612345678, H.it0612345678Plus],
  ])('phone %j (country %s) → ph without + and phE164 with +', (phone, defaultCountry, ph, phE164) => {
    expect(hashPii({ phone }, { defaultCountry })).toEqual({ ph, phE164 });
  });

  it.each([
    ['Zoë', H.zoe],
    ['Zoe\u0308', H.zoe],
    ['Łukasz', H.lukasz],
    ["O'Brien-Smith", H.obriensmith],
    ['José María', H.joseMaria],
    ['王 小明', H.wangXiaoming],
  ])('unicode name %j keeps its letters', (name, digest) => {
    expect(hashPii({ firstName: name, lastName: name })).toEqual({ fn: digest, ln: digest });
  });

  it("lowercases external ids as Meta's parameter builder does, so U-123 and u-123 are one id", () => {
    expect(hashPii({ externalId: 'U-123' })).toEqual({ externalId: H.extU123 });
    expect(H.extU123Upper).not.toBe(H.extU123);
  });

  it('passes an already hashed value through unchanged, only lowercased', () => {
    const upper = H.test.toUpperCase();
    expect(
      hashPii({
        email: H.johnSmithEmail,
        phone: ` ${upper} `,
        firstName: H.mary,
        lastName: upper,
        externalId: H.test,
      }),
    ).toEqual({
      em: H.johnSmithEmail,
      emGoogle: H.johnSmithEmail,
      // A phone digest is taken as the digits' (Meta's form): sent where that form is taken only.
      ph: H.test,
      fn: H.mary,
      ln: H.test,
      externalId: H.test,
    });
  });

  it('leaves out empty, blank and unusable values', () => {
    expect(
      hashPii({ email: '  ', phone: '(650)555-1212', firstName: '', lastName: '...', externalId: null }),
    ).toEqual({});
  });

  it('ignores an unknown default country instead of throwing', () => {
    expect(hashPii({ phone: '+1 (616) 954-78 88' }, { defaultCountry: 'ZZ' })).toEqual({
      ph: H.us6169547888,
      phE164: H.us6169547888Plus,
    });
  });
});
