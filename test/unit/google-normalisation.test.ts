// Google's normalisation for enhanced conversions, row by row: each expected digest is SHA-256 of
// the normal form written out by hand from Google's documented rules (trim, lowercase; for
// gmail.com and googlemail.com every "." of the local part removed; phones in E.164 with the "+").
// Names are not here: the click-conversion upload refuses them (UNSUPPORTED_USER_IDENTIFIER), so
// Capigram stores no Google name digest.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { hashPii, normalizeGoogleEmail } from '../../backend/domain/pii/normalize.js';

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

describe("Google's e-mail rule", () => {
  it.each([
    ['John.Smith@Gmail.com', 'johnsmith@gmail.com'],
    ['  john.smith@gmail.com  ', 'johnsmith@gmail.com'],
    ['JOHNSMITH@GMAIL.COM', 'johnsmith@gmail.com'],
    ['j.o.h.n.s.m.i.t.h@gmail.com', 'johnsmith@gmail.com'],
    ['john.smith@googlemail.com', 'johnsmith@googlemail.com'],
    ['John.Smith+ads@gmail.com', 'johnsmith+ads@gmail.com'],
    ['jane.doe+news.letter@gmail.com', 'janedoe+newsletter@gmail.com'],
    ['john_smith@gmail.com', 'john_smith@gmail.com'],
    ['john-smith@gmail.com', 'john-smith@gmail.com'],
    ['.dot.first.@gmail.com', 'dotfirst@gmail.com'],
    ['John.Smith@example.com', 'john.smith@example.com'],
    ['john.smith@gmail.co.uk', 'john.smith@gmail.co.uk'],
    ['john.smith@mail.gmail.com', 'john.smith@mail.gmail.com'],
    ['John.Smith@Outlook.COM', 'john.smith@outlook.com'],
    ['first.last@sub.example.org', 'first.last@sub.example.org'],
    ['a.b@yahoo.com', 'a.b@yahoo.com'],
    ['Élodie.Dupont@gmail.com', 'élodiedupont@gmail.com'],
    ['\tmary.ann@GoogleMail.com\n', 'maryann@googlemail.com'],
  ])('%j → %s', (raw, normal) => {
    expect(normalizeGoogleEmail(raw)).toBe(normal);
    expect(hashPii({ email: raw }).emGoogle).toBe(sha256(normal));
  });

  it('keeps the common digest beside it: the other platforms do not drop Gmail dots', () => {
    const h = hashPii({ email: 'John.Smith@Gmail.com' });
    expect(h.em).toBe(sha256('john.smith@gmail.com'));
    expect(h.emGoogle).toBe(sha256('johnsmith@gmail.com'));
  });

  it('a digest given as such is sent as it is to every platform (its normal form is unknown)', () => {
    const digest = sha256('someone@example.com');
    expect(hashPii({ email: digest.toUpperCase() })).toEqual({ em: digest, emGoogle: digest });
  });
});

describe("Google's phone rule: E.164 with the +", () => {
  it.each<[string, string | undefined, string]>([
    ['+1 (650) 555-1212', undefined, '+16505551212'],
    ['(650) 555-1212', 'US', '+16505551212'],
    ['650.555.1212', 'US', '+16505551212'],
    ['1-650-555-1212', 'US', '+16505551212'],
    ['+44 20 7946 0958', undefined, '+442079460958'],
    ['020 7946 0958', 'GB', '+442079460958'],
    ['0044 20 7946 0958', undefined, '+442079460958'],
    ['+49 30 901820', undefined, '+4930901820'],
    ['030 901820', 'DE', '+4930901820'],
    ['+33 1 42 68 53 00', undefined, '+33142685300'],
    ['01 42 68 53 00', 'FR', '+33142685300'],
    ['+39 06 1234 5678', undefined, '+390612345678'],
    ['+7 495 123-45-67', undefined, '+74951234567'],
    ['8 (495) 123-45-67', 'RU', '+74951234567'],
    ['+91 98765 43210', undefined, '+919876543210'],
    ['+61 2 9374 4000', undefined, '+61293744000'],
  ])('%j (default country %s) → %s', (raw, country, e164) => {
    expect(hashPii({ phone: raw }, { defaultCountry: country }).phE164).toBe(sha256(e164));
  });

  it('drops a phone with no country rather than guess one', () => {
    expect(hashPii({ phone: '020 7946 0958' })).toEqual({});
  });
});
