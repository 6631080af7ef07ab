// The phone table: libphonenumber's own example mobile numbers of 40 countries, each written in
// every common form, read with and without a country. Every expected outcome comes from
// libphonenumber (its full metadata's validity and its own readings of the text), under the rule
// of CONTRACT.md ("Phones"), never from Capigram's code:
// - `+`, `00` or a `tel:` URI: the number it states, when valid;
// - digits without a prefix: read in the country (as the country writes its numbers: with its
//   trunk prefix where its national form has one) and as international digits (unless a
//   parenthesised area code says it is national); exactly one valid number → sent, two → dropped
//   as ambiguous, none → dropped.
import examples from 'libphonenumber-js/mobile/examples';
import {
  type CountryCode,
  getCountryCallingCode,
  getExampleNumber,
  parsePhoneNumberFromString,
  type PhoneNumber,
} from 'libphonenumber-js/max';
import { describe, expect, it } from 'vitest';
import { parsePhone } from '../../backend/domain/pii/normalize.js';

const COUNTRIES: CountryCode[] = [
  'US',
  'CA',
  'GB',
  'DE',
  'FR',
  'IT',
  'ES',
  'NL',
  'BE',
  'CH',
  'AT',
  'SE',
  'NO',
  'DK',
  'FI',
  'PL',
  'CZ',
  'PT',
  'IE',
  'GR',
  'TR',
  'RU',
  'UA',
  'IN',
  'CN',
  'JP',
  'KR',
  'BR',
  'MX',
  'AR',
  'AU',
  'NZ',
  'ZA',
  'NG',
  'EG',
  'AE',
  'IL',
  'SG',
  'ID',
  'TH',
];

type Expected = { e164: string } | { dropped: 'ambiguous' | 'invalid' | 'no-country' };

interface Row {
  country: CountryCode;
  form: string;
  text: string;
  /** The event's or site's country the text is read in (none: null). */
  readIn: CountryCode | null;
  expected: Expected;
}

const valid = (p: PhoneNumber | undefined): p is PhoneNumber => p?.isValid() === true;

/** libphonenumber's reading of digits in `country`, when written as that country writes them. */
function nationalReading(text: string, digits: string, country: CountryCode): PhoneNumber | undefined {
  const p = parsePhoneNumberFromString(text, country);
  if (!valid(p)) return undefined;
  if (p.countryCallingCode !== getCountryCallingCode(country)) return p; // its exit code
  const national = p.formatNational().replace(/\D/g, '');
  const trunk = national.slice(0, national.length - p.nationalNumber.length);
  const asWritten =
    trunk === '' || digits.startsWith(trunk) || digits === `${p.countryCallingCode}${p.nationalNumber}`;
  return asWritten ? p : undefined;
}

/** The contract's outcome for digits written without a prefix, from libphonenumber's readings. */
function expectedForDigits(text: string, readIn: CountryCode | null): Expected {
  const digits = text.replace(/\D/g, '');
  const readings = new Set<string>();
  const national = readIn === null ? undefined : nationalReading(text, digits, readIn);
  if (national !== undefined) {
    if (national.countryCallingCode !== getCountryCallingCode(readIn!)) return { e164: national.number };
    readings.add(national.number);
  }
  if (!text.includes('(')) {
    const international = parsePhoneNumberFromString(`+${digits}`);
    if (valid(international)) readings.add(international.number);
  }
  if (readings.size === 1) return { e164: [...readings][0]! };
  if (readings.size > 1) return { dropped: 'ambiguous' };
  return { dropped: readIn === null ? 'no-country' : 'invalid' };
}

/** A country other than `c` to read national forms in, as a foreign site's default would. */
const foreign = (c: CountryCode): CountryCode => (c === 'DE' ? 'GB' : 'DE');

function rowsOf(country: CountryCode): Row[] {
  const example = getExampleNumber(country, examples)!;
  const e164 = example.number;
  const cc = example.countryCallingCode;
  const stated: Expected = { e164 };
  const national = example.formatNational();
  const ccDigits = `${cc}${example.nationalNumber}`;
  const international = example.formatInternational();
  const rows: Row[] = [
    { form: 'E.164', text: e164, readIn: null, expected: stated },
    { form: 'E.164, foreign site', text: e164, readIn: foreign(country), expected: stated },
    { form: '00 prefix', text: `00${ccDigits}`, readIn: null, expected: stated },
    { form: 'spaced international', text: international, readIn: null, expected: stated },
    {
      form: 'dashed international',
      text: international.replaceAll(' ', '-'),
      readIn: null,
      expected: stated,
    },
    { form: 'tel: URI', text: example.getURI(), readIn: null, expected: stated },
    { form: 'tel: URI (RFC 3966)', text: example.format('RFC3966'), readIn: null, expected: stated },
    {
      form: 'national, its country',
      text: national,
      readIn: country,
      expected: expectedForDigits(national, country),
    },
    {
      form: 'national, dashed, its country',
      text: national.replace(/[\s()]+/g, '-').replace(/^-|-$/g, ''),
      readIn: country,
      expected: expectedForDigits(national.replace(/[\s()]+/g, '-').replace(/^-|-$/g, ''), country),
    },
    {
      form: 'national, foreign site',
      text: national,
      readIn: foreign(country),
      expected: expectedForDigits(national, foreign(country)),
    },
    {
      form: 'national, no country',
      text: national,
      readIn: null,
      expected: expectedForDigits(national, null),
    },
    {
      form: 'country code without +, no country',
      text: ccDigits,
      readIn: null,
      expected: expectedForDigits(ccDigits, null),
    },
    {
      form: 'country code without +, its country',
      text: ccDigits,
      readIn: country,
      expected: expectedForDigits(ccDigits, country),
    },
    {
      form: 'country code without +, foreign site',
      text: ccDigits,
      readIn: foreign(country),
      expected: expectedForDigits(ccDigits, foreign(country)),
    },
    {
      form: 'country code without +, spaced, foreign site',
      text: international.slice(1),
      readIn: foreign(country),
      expected: expectedForDigits(international.slice(1), foreign(country)),
    },
  ].map((r) => ({ ...r, country }));
  return rows;
}

const TABLE = COUNTRIES.flatMap(rowsOf);

function outcomeOf(text: string, readIn: CountryCode | null): Expected | undefined {
  const r = parsePhone(text, readIn);
  if (r === undefined) return undefined;
  return 'ok' in r ? { e164: r.ok.e164 } : { dropped: r.dropped };
}

describe('the phone table (libphonenumber example numbers in every written form)', () => {
  it('covers at least 200 numbers from 30 countries, and every example is valid', () => {
    expect(TABLE.length).toBeGreaterThanOrEqual(200);
    expect(new Set(TABLE.map((r) => r.country)).size).toBeGreaterThanOrEqual(30);
    for (const c of COUNTRIES) expect(getExampleNumber(c, examples)!.isValid()).toBe(true);
  });

  it.each(TABLE.map((r) => [r.country, r.form, r.text, r.readIn ?? '-', r.expected] as const))(
    '%s %s: %j read in %s → %j',
    (_country, _form, text, readIn, expected) => {
      expect(outcomeOf(text, readIn === '-' ? null : readIn)).toEqual(expected);
    },
  );

  it('sends what is stated, and drops some national forms for a reason', () => {
    const sent = TABLE.filter((r) => 'e164' in r.expected).length;
    const dropped = TABLE.length - sent;
    // Every international form is sent; some national and bare-digit forms are not.
    expect(sent).toBeGreaterThan(TABLE.length / 2);
    expect(dropped).toBeGreaterThan(0);
    const reasons = new Set(TABLE.flatMap((r) => ('dropped' in r.expected ? [r.expected.dropped] : [])));
    expect(reasons).toEqual(new Set(['ambiguous', 'invalid', 'no-country']));
  });
});

describe('the cases that were wrong', () => {
  it.each([
    ['447911123456', 'DE', { e164: '+447911123456' }],
    ['4915123456789', 'DE', { e164: '+4915123456789' }],
    ['(650) 555-1212', 'GB', { dropped: 'invalid' }],
    ['16505551212', null, { e164: '+16505551212' }],
    ['tel:+1-650-555-1212', null, { e164: '+16505551212' }],
    ['011 44 7911 123456', 'US', { e164: '+447911123456' }],
  ] as const)('%j read in %s → %j', (text, readIn, expected) => {
    expect(outcomeOf(text, readIn)).toEqual(expected);
  });
});
