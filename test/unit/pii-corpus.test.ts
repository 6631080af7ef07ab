import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { hashPiiChecked, type RawPii } from '../../backend/domain/pii/normalize.js';

/**
 * A corpus of PII as CRMs and forms really send it, each with the normal form every platform
 * documents and the digest each one receives (sha256 of that normal form, computed here with
 * node:crypto from the literal). What goes to whom:
 * - Meta `em`, TikTok `email`, Snapchat `em`: the e-mail trimmed and lowercased; Google's
 *   `hashedEmail` also drops the dots of a gmail.com/googlemail.com local part (Google's rule).
 * - Meta `ph`, Snapchat `ph`: country code and number, digits only; TikTok `phone`, Google
 *   `hashedPhoneNumber`: E.164 with the `+`.
 * - Names (`fn`/`ln`; TikTok `first_name`/`last_name`): lowercase, no spaces or punctuation, digits
 *   and any script kept (Meta's documentation and its parameter builder agree).
 * - External ids: lowercase, no whitespace (Meta's parameter builder, StringUtils
 *   getNormalizedExternalID). Meta's documentation only says "hashing recommended"; the builder's
 *   form is followed so an id typed `U-123` by one system and `u-123` by another is one person.
 * - Where Meta's SDK or builder and its documentation differ, the documentation is followed and the
 *   row says so: the Node SDK lowercases names but keeps their punctuation; the builder cuts every
 *   state to two letters and strips non-Latin city names; the SDK strips leading zeros from any
 *   digit string (which made national numbers foreign): a national number is read here only in
 *   its stated country.
 */

const sha = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

type Row = [
  input: RawPii,
  country: string | null,
  expected: Partial<
    Record<
      | 'email'
      | 'emailGoogle'
      | 'phone'
      | 'fn'
      | 'ln'
      | 'externalId'
      | 'ct'
      | 'st'
      | 'zp'
      | 'country'
      | 'db'
      | 'ge',
      string | null
    >
  >,
  note?: string,
];

const EMAILS: Row[] = [
  [
    { email: 'John_Smith@gmail.com' },
    null,
    { email: 'john_smith@gmail.com', emailGoogle: 'john_smith@gmail.com' },
  ],
  [
    { email: '  Jane.Doe@Example.COM ' },
    null,
    { email: 'jane.doe@example.com', emailGoogle: 'jane.doe@example.com' },
    'dots kept outside Gmail',
  ],
  [
    { email: '\tjane.doe@gmail.com\n' },
    null,
    { email: 'jane.doe@gmail.com', emailGoogle: 'janedoe@gmail.com' },
    'tab and newline around it are trimmed',
  ],
  [
    { email: 'J.A.N.E@GoogleMail.com' },
    null,
    { email: 'j.a.n.e@googlemail.com', emailGoogle: 'jane@googlemail.com' },
  ],
  [
    { email: 'user+promo@gmail.com' },
    null,
    { email: 'user+promo@gmail.com', emailGoogle: 'user+promo@gmail.com' },
    'a +tag is part of the address for every platform',
  ],
  [
    { email: 'USER+Tag@Outlook.com' },
    null,
    { email: 'user+tag@outlook.com', emailGoogle: 'user+tag@outlook.com' },
  ],
  [
    { email: 'müller@bücher.de' },
    null,
    { email: 'müller@bücher.de', emailGoogle: 'müller@bücher.de' },
    'IDN kept in UTF-8, not punycode',
  ],
  [{ email: 'ÄRGER@Bücher.DE' }, null, { email: 'ärger@bücher.de', emailGoogle: 'ärger@bücher.de' }],
  [{ email: 'иван@почта.рф' }, null, { email: 'иван@почта.рф', emailGoogle: 'иван@почта.рф' }],
  [{ email: 'a@b.co' }, null, { email: 'a@b.co', emailGoogle: 'a@b.co' }],
  [
    { email: 'first.last@sub.example.co.uk' },
    null,
    { email: 'first.last@sub.example.co.uk', emailGoogle: 'first.last@sub.example.co.uk' },
  ],
  [{ email: 'not-an-email' }, null, { email: null }, 'invalid: dropped, not hashed'],
  [{ email: 'two@@example.com' }, null, { email: null }],
  [{ email: 'no-domain@' }, null, { email: null }],
  [{ email: 'spaces in@example.com' }, null, { email: null }],
  [{ email: 'user@localhost' }, null, { email: null }, 'no dot in the domain'],
  [{ email: '   ' }, null, { email: null }],
];

// Phones: 15+ countries, national with and without a known country, and international.
const PHONES: Row[] = [
  [{ phone: '(201) 555-0123' }, 'US', { phone: '12015550123' }],
  [{ phone: '(201) 555-0123' }, null, { phone: null }, 'once +20 (Egypt): now dropped'],
  [{ phone: '+1 (616) 954-78 88' }, null, { phone: '16169547888' }],
  [{ phone: '011 44 20 7946 0958' }, 'US', { phone: '442079460958' }, 'the US exit code'],
  [{ phone: '01512 3456789' }, 'DE', { phone: '4915123456789' }],
  [{ phone: '01512 3456789' }, null, { phone: null }, 'once +1 512 (Texas): now dropped'],
  [
    { phone: '+49 1512 3456789' },
    'US',
    { phone: '4915123456789' },
    'international wins over the site country',
  ],
  [{ phone: '0049 1512 3456789' }, null, { phone: '4915123456789' }],
  [
    { phone: '131 2345 6789' },
    'CN',
    { phone: null },
    'ambiguous: valid in China and as international digits (+1 312 345 6789)',
  ],
  [
    { phone: '131 2345 6789' },
    null,
    { phone: '13123456789' },
    'no country: the international reading (+1 312 345 6789) is the only one',
  ],
  [{ phone: '020 7946 0958' }, 'GB', { phone: '442079460958' }],
  [{ phone: '07911 123456' }, 'GB', { phone: '447911123456' }],
  [
    { phone: '447911123456' },
    'GB',
    { phone: '447911123456' },
    "digits that start with the known country's code",
  ],
  [{ phone: '06 12 34 56 78' }, 'FR', { phone: '33612345678' }],
  [{ phone: '+33 6 12 34 56 78' }, null, { phone: '33612345678' }],
  [{ phone: '06 1234 5678' }, 'IT', { phone: '390612345678' }, 'Italy keeps its leading zero'],
  [{ phone: '612 34 56 78' }, 'ES', { phone: '34612345678' }],
  [{ phone: '8 (912) 345-67-89' }, 'RU', { phone: '79123456789' }, 'Russian trunk prefix 8'],
  [{ phone: '+7 912 345-67-89' }, null, { phone: '79123456789' }],
  [{ phone: '050 123 4567' }, 'UA', { phone: '380501234567' }],
  [{ phone: '+91 98765 43210' }, null, { phone: '919876543210' }],
  [{ phone: '98765 43210' }, 'IN', { phone: null }, 'ambiguous: also valid as +98 (Iran)'],
  [{ phone: '(11) 91234-5678' }, 'BR', { phone: '5511912345678' }],
  [{ phone: '090-1234-5678' }, 'JP', { phone: '819012345678' }],
  [{ phone: '0412 345 678' }, 'AU', { phone: '61412345678' }],
  [{ phone: '0532 123 45 67' }, 'TR', { phone: '905321234567' }],
  [{ phone: '0803 123 4567' }, 'NG', { phone: '2348031234567' }],
  [{ phone: '050-123-4567' }, 'IL', { phone: null }, 'only possible: not in an assigned range'],
  [{ phone: '55 1234 5678' }, 'MX', { phone: '525512345678' }],
  [{ phone: '0612345678' }, 'NL', { phone: '31612345678' }],
  [{ phone: '+971 50 123 4567' }, null, { phone: '971501234567' }],
  [{ phone: 'call me' }, 'US', { phone: null }],
  [{ phone: '123' }, 'US', { phone: null }],
];

// The event's own country wins over the site's for a national number.
const PHONES_WITH_EVENT_COUNTRY: Row[] = [
  [{ phone: '01512 3456789', country: 'DE' }, 'US', { phone: '4915123456789', country: 'de' }],
  [{ phone: '(201) 555-0123', country: 'us' }, null, { phone: '12015550123', country: 'us' }],
];

const NAMES: Row[] = [
  [{ firstName: 'Mary', lastName: 'Smith' }, null, { fn: 'mary', ln: 'smith' }],
  [
    { firstName: '  JOHN ', lastName: "O'Brien-Smith" },
    null,
    { fn: 'john', ln: 'obriensmith' },
    "the Node SDK would keep o'brien-smith: the documentation (no punctuation) is followed",
  ],
  [{ firstName: 'John2' }, null, { fn: 'john2' }, 'digits kept (once john)'],
  [{ firstName: 'Zoë' }, null, { fn: 'zoë' }],
  [{ firstName: 'Zoe\u0308' }, null, { fn: 'zoë' }, 'NFC'],
  [{ firstName: 'José María', lastName: 'Núñez' }, null, { fn: 'josémaría', ln: 'núñez' }],
  [{ firstName: 'Łukasz', lastName: 'Wróbel' }, null, { fn: 'łukasz', ln: 'wróbel' }],
  [{ firstName: 'François' }, null, { fn: 'françois' }],
  [{ firstName: 'Jean-Luc' }, null, { fn: 'jeanluc' }],
  [{ firstName: 'Dr. Anna', lastName: 'Müller, Jr.' }, null, { fn: 'dranna', ln: 'müllerjr' }],
  [{ firstName: '王', lastName: '小明' }, null, { fn: '王', ln: '小明' }],
  [{ firstName: 'Владимир', lastName: 'Петров' }, null, { fn: 'владимир', ln: 'петров' }],
  [{ firstName: 'محمد' }, null, { fn: 'محمد' }],
  [{ firstName: 'Ἀλέξανδρος' }, null, { fn: 'ἀλέξανδρος' }],
  [{ firstName: '!!!' }, null, { fn: null }],
];

const EXTERNAL_IDS: Row[] = [
  [{ externalId: 'CRM-7001' }, null, { externalId: 'crm-7001' }],
  [{ externalId: '  user 123  ' }, null, { externalId: 'user123' }],
  [
    { externalId: '550E8400-E29B-41D4-A716-446655440000' },
    null,
    { externalId: '550e8400-e29b-41d4-a716-446655440000' },
  ],
  [{ externalId: 'User@Example.COM' }, null, { externalId: 'user@example.com' }],
  [{ externalId: '777000111' }, null, { externalId: '777000111' }],
  [{ externalId: 'Frédéric123' }, null, { externalId: 'frédéric123' }],
];

const ADDRESSES: Row[] = [
  [{ city: 'New York' }, null, { ct: 'newyork' }],
  [
    { city: 'São Paulo' },
    null,
    { ct: 'sãopaulo' },
    "the builder strips non-Latin letters; Meta's documentation keeps UTF-8",
  ],
  [{ city: 'St. Louis' }, null, { ct: 'stlouis' }],
  [{ city: 'Москва' }, null, { ct: 'москва' }],
  [{ state: 'California', country: 'US' }, null, { st: 'ca', country: 'us' }],
  [{ state: 'NY' }, null, { st: 'ny' }],
  [{ state: 'Ontario', country: 'CA' }, null, { st: 'on', country: 'ca' }],
  [
    { state: 'Bavaria', country: 'DE' },
    null,
    { st: 'bavaria', country: 'de' },
    'the builder would cut it to "ba"; the documentation keeps the name',
  ],
  [{ state: 'Île-de-France', country: 'FR' }, null, { st: 'îledefrance', country: 'fr' }],
  [{ zip: '94035-1234' }, null, { zp: '94035' }],
  [{ zip: 'M1 1AE' }, null, { zp: 'm11ae' }],
  [{ zip: '10115' }, null, { zp: '10115' }],
  [{ zip: '1' }, null, { zp: null }],
  [{ country: 'gb' }, null, { country: 'gb' }],
  // Countries as people write them, read as Meta's parameter builder reads them (and alpha-3).
  [{ country: 'Germany' }, null, { country: 'de' }],
  [{ country: 'United States' }, null, { country: 'us' }],
  [{ country: '  united   states of america ' }, null, { country: 'us' }],
  [{ country: 'U.S.A.' }, null, { country: 'us' }],
  [{ country: 'DEU' }, null, { country: 'de' }],
  [{ country: 'de' }, null, { country: 'de' }],
  [{ country: 'United Kingdom' }, null, { country: 'gb' }],
  [{ country: 'UK' }, null, { country: 'gb' }],
  [{ country: 'Ivory Coast' }, null, { country: 'ci' }],
  [{ country: 'South Korea' }, null, { country: 'kr' }],
  [{ country: 'InvalidCountry' }, null, { country: null }, 'the builder cuts it to "in": not a country'],
  [{ country: 'XX' }, null, { country: null }],
  // A country written out is the country of a national phone number too.
  [{ phone: '0151 23456789', country: 'Germany' }, null, { phone: '4915123456789', country: 'de' }],
  // Dates of birth in the common written forms (Meta's DOBUtils), unambiguous ones only.
  [{ dateOfBirth: '1990-02-28' }, null, { db: '19900228' }],
  [{ dateOfBirth: '1990-02-30' }, null, { db: null }],
  [{ dateOfBirth: '28/02/1990' }, null, { db: '19900228' }],
  [{ dateOfBirth: '31/01/1990' }, null, { db: '19900131' }],
  [{ dateOfBirth: '01/31/1990' }, null, { db: '19900131' }],
  [{ dateOfBirth: '31.01.1990' }, null, { db: '19900131' }],
  [{ dateOfBirth: '1990/01/31' }, null, { db: '19900131' }],
  [{ dateOfBirth: '19900131' }, null, { db: '19900131' }],
  [{ dateOfBirth: '05/05/1990' }, null, { db: '19900505' }],
  [{ dateOfBirth: '02/03/1990' }, null, { db: null }, 'day and month could be either'],
  [{ dateOfBirth: '31/02/1990' }, null, { db: null }, 'no such day'],
  [{ dateOfBirth: '31/01/90' }, null, { db: null }, 'a two-digit year'],
  [{ gender: 'F' }, null, { ge: 'f' }],
  [{ gender: 'male' }, null, { ge: 'm' }],
  [{ gender: 'x' }, null, { ge: null }],
];

const CORPUS: Row[] = [
  ...EMAILS,
  ...PHONES,
  ...PHONES_WITH_EVENT_COUNTRY,
  ...NAMES,
  ...EXTERNAL_IDS,
  ...ADDRESSES,
];

/** What each platform receives for a row's expected normal forms. */
function perPlatform(expected: Row[2]) {
  const d = (v: string | null | undefined) => (v === null || v === undefined ? undefined : sha(v));
  const out: Record<string, string | undefined> = {};
  if ('email' in expected) {
    out.em = d(expected.email); // Meta em, TikTok email, Snapchat em
    out.emGoogle = d(expected.emailGoogle ?? expected.email); // Google hashedEmail
  }
  if ('phone' in expected) {
    out.ph = d(expected.phone); // Meta ph, Snapchat ph: digits only
    out.phE164 = d(expected.phone === null || expected.phone === undefined ? null : `+${expected.phone}`); // TikTok phone, Google hashedPhoneNumber
  }
  for (const k of ['fn', 'ln', 'externalId', 'ct', 'st', 'zp', 'country', 'db', 'ge'] as const)
    if (k in expected) out[k] = d(expected[k]);
  return out;
}

describe('PII corpus: normal forms and digests per platform', () => {
  it('has at least 80 inputs', () => {
    expect(CORPUS.length).toBeGreaterThanOrEqual(80);
  });

  it.each(CORPUS.map((r) => [JSON.stringify(r[0]), r[1] ?? '-', r] as const))(
    '%s (site country %s)',
    (_label, _c, row) => {
      const [input, country, expected] = row;
      const { hashed } = hashPiiChecked(input, { defaultCountry: country });
      const want = perPlatform(expected);
      for (const [key, digest] of Object.entries(want)) {
        expect(hashed[key as keyof typeof hashed], `${key} of ${JSON.stringify(input)}`).toBe(digest);
      }
    },
  );

  it('a dropped phone says why, without its value', () => {
    const noCountry = hashPiiChecked({ phone: '(201) 555-0123' });
    expect(noCountry.hashed.ph).toBeUndefined();
    expect(noCountry.warnings).toEqual([expect.stringMatching(/pii\.phone was dropped: .*default country/)]);
    expect(noCountry.warnings.join()).not.toContain('555');
    expect(hashPiiChecked({ phone: 'call me' }, { defaultCountry: 'US' }).warnings).toEqual([
      expect.stringMatching(/not a valid phone number/),
    ]);
    expect(hashPiiChecked({ email: 'not-an-email' }).warnings).toEqual([
      'pii.email was dropped: it is not an e-mail address',
    ]);
  });

  it('a phone given hashed is sent only in the form it was hashed in: the digits (Meta, Snapchat)', () => {
    const digest = sha('12015550123');
    const r = hashPiiChecked({ phone: digest.toUpperCase() });
    expect(r.hashed).toEqual({ ph: digest });
    expect(r.warnings).toEqual([expect.stringMatching(/TikTok and Google hash the E\.164 form/)]);
  });
});
