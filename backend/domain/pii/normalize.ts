// Raw PII is normalised and hashed the moment it arrives; only these digests are stored or sent.
import { createHash } from 'node:crypto';
// The full ("max") metadata: with the default ("min") one `isValid()` checks a number against its
// country's general pattern and lengths only, and took 3,905 of 49,000 random numbers over every
// country (29 % of those it called valid) that the full patterns refuse (docs/api.md, "How phone numbers are read").
import {
  type CountryCode,
  getCountryCallingCode,
  isSupportedCountry,
  parsePhoneNumberFromString,
  type PhoneNumber,
} from 'libphonenumber-js/max';
import type { HashedPii } from '../../platforms/types.js';
import { normalizeState } from './address.js';
import { countryCodeOf } from './country.js';

export type { HashedPii };

export interface RawPii {
  email?: string | null;
  phone?: string | null;
  firstName?: string | null;
  lastName?: string | null;
  externalId?: string | null;
  /** ISO 3166-1 alpha-2 or alpha-3, or the name; also the country of a phone number written nationally. */
  country?: string | null;
  city?: string | null;
  state?: string | null;
  zip?: string | null;
  /** `YYYY-MM-DD`, or another common written form (`normalizeDateOfBirth`). */
  dateOfBirth?: string | null;
  /** `f` or `m`. */
  gender?: string | null;
}

export interface HashPiiOptions {
  /**
   * ISO 3166-1 alpha-2 country for phone numbers written without an international prefix when
   * the PII names no `country` of its own (the site's `--default-country`).
   */
  defaultCountry?: string | null;
}

export interface HashedPiiResult {
  hashed: HashedPii;
  /** What was given but could not be used, said without the value itself (it is PII). */
  warnings: string[];
}

const SHA256_HEX = /^[0-9a-f]{64}$/i;

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/** A value that already is a SHA-256 digest; hashing it again would make it unmatchable. */
export function isSha256Hex(text: string): boolean {
  return SHA256_HEX.test(text);
}

function blankToUndefined(raw: string | null | undefined): string | undefined {
  const t = raw?.trim();
  return t ? t : undefined;
}

// One `@`, no whitespace, a dot in the domain that neither starts nor ends it. Deliberately loose
// (an IDN domain or a `+tag` is fine): it only keeps what can never be an address from being sent.
const EMAIL_SHAPE = /^[^\s@]+@[^\s@.][^\s@]*\.[^\s@]*[^\s@.]$/u;

/**
 * Trimmed (tabs and newlines too), lowercase, NFC. Something that cannot be an address is dropped:
 * its digest would match no one and only lower the event's match quality.
 */
export function normalizeEmail(raw: string | null | undefined): string | undefined {
  const email = blankToUndefined(raw)?.toLowerCase().normalize('NFC');
  return email !== undefined && EMAIL_SHAPE.test(email) ? email : undefined;
}

const GOOGLE_MAIL_DOMAINS: ReadonlySet<string> = new Set(['gmail.com', 'googlemail.com']);

/**
 * Google's rule for enhanced conversions: trimmed, lowercase, and for gmail.com and googlemail.com
 * addresses every `.` of the local part removed (Gmail ignores them, so Google matches without
 * them). Nothing else changes: a `+tag` stays, other domains keep their dots.
 */
export function normalizeGoogleEmail(raw: string | null | undefined): string | undefined {
  const email = normalizeEmail(raw);
  if (email === undefined) return undefined;
  const at = email.lastIndexOf('@');
  const domain = email.slice(at + 1);
  return GOOGLE_MAIL_DOMAINS.has(domain) ? `${email.slice(0, at).replaceAll('.', '')}@${domain}` : email;
}

export interface NormalizedPhone {
  /** Country code and number, digits only, no `+`: what Meta and Snapchat hash. */
  digits: string;
  /** E.164 with the `+`: what TikTok and Google hash. */
  e164: string;
}

export function supportedCountry(country: string | null | undefined): CountryCode | undefined {
  const c = country?.trim().toUpperCase();
  return c && /^[A-Z]{2}$/.test(c) && isSupportedCountry(c) ? c : undefined;
}

/** Separators people write numbers with: spaces, dashes (any), dots, slashes, parentheses. */
const SEPARATORS = /[\s()./\u2010-\u2015-]/gu;

/**
 * A `tel:` URI (RFC 3966) is read as its number: the scheme and any parameters (`;ext=`,
 * `;phone-context=`) go, percent-escapes are decoded.
 */
function telNumber(text: string): string {
  if (!/^tel:/i.test(text)) return text;
  const number = text.slice(4).split(';')[0]!;
  try {
    return decodeURIComponent(number);
  } catch {
    return number;
  }
}

/** A number libphonenumber's full metadata holds valid (in the ranges its country assigns). */
function valid(p: PhoneNumber | undefined): p is PhoneNumber {
  return p?.isValid() === true;
}

/**
 * Whether digits read in a country are written as that country writes its numbers: with its
 * trunk prefix where its national form has one (`0151 …` in DE, not `151 …`), so that `49151…`
 * on a German site is not also read as a number of the 0491 area. Digits that begin with the
 * country's own calling code are read so by libphonenumber, and agree with the international reading.
 */
function writtenNationally(p: PhoneNumber, digits: string): boolean {
  const national = p.formatNational().replace(/\D/g, '');
  const trunk = national.endsWith(p.nationalNumber) ? national.slice(0, -p.nationalNumber.length) : '';
  return trunk === '' || digits.startsWith(trunk) || digits === `${p.countryCallingCode}${p.nationalNumber}`;
}

const ok = (p: PhoneNumber): PhoneOutcome => ({ ok: { digits: p.number.slice(1), e164: p.number } });

export type PhoneDrop = 'no-country' | 'invalid' | 'ambiguous';
export type PhoneOutcome = { ok: NormalizedPhone } | { dropped: PhoneDrop };

/**
 * A phone number is sent only as a valid number of the country it is read in, and is never given
 * a country it does not state or that two readings dispute:
 * - written internationally (`+`, `00`, or the known country's own exit code such as `011` in
 *   the US, which libphonenumber reads with the country), it is that number;
 * - written as digits without a prefix (and without a parenthesised area code), it is read twice, in `country` (the event's, else the
 *   site's; as that country writes its numbers, see `writtenNationally`) and as international digits (a leading country code, as Meta's documentation writes
 *   `16505551212`): exactly one valid reading is sent; two valid readings of different numbers
 *   are ambiguous, and none valid is no number: both are dropped, with the reason.
 * A number that is only *possible* (the right length) is not valid: `(650) 555-1212` read in GB.
 */
export function parsePhone(
  raw: string | null | undefined,
  country?: string | null,
): PhoneOutcome | undefined {
  const text = blankToUndefined(raw);
  if (text === undefined) return undefined;
  const written = telNumber(text).trim();
  const compact = written.replace(SEPARATORS, '');
  if (!/\d/.test(compact)) return { dropped: 'invalid' };
  const cc = supportedCountry(country);
  if (/^(\+|00)/.test(compact)) {
    const p = parsePhoneNumberFromString(written.replace(/^[\s(]*(\+|00)/, '+'));
    return valid(p) ? ok(p) : { dropped: 'invalid' };
  }
  // With a country, libphonenumber reads its exit code (`011 44 …` in the US) and digits that
  // start with its own calling code (`49 151 …` in DE); another calling code came through the former.
  const national = cc === undefined ? undefined : parsePhoneNumberFromString(written, cc);
  if (cc !== undefined && national !== undefined && national.countryCallingCode !== getCountryCallingCode(cc))
    return valid(national) ? ok(national) : { dropped: 'invalid' };
  // A parenthesised group is a national area code (`(201) 555-0123`, `8 (495) …`): such a number
  // is not also read as international digits (+20 1555 0123 in Egypt, +84 … in Viet Nam).
  const international =
    /^\d+$/.test(compact) && !written.includes('(') ? parsePhoneNumberFromString(`+${compact}`) : undefined;
  const readings = new Map<string, PhoneNumber>();
  if (valid(national) && writtenNationally(national, compact)) readings.set(national.number, national);
  if (valid(international)) readings.set(international.number, international);
  if (readings.size === 1) return ok([...readings.values()][0]!);
  if (readings.size > 1) return { dropped: 'ambiguous' };
  return { dropped: cc === undefined ? 'no-country' : 'invalid' };
}

export function normalizePhone(
  raw: string | null | undefined,
  country?: string | null,
): NormalizedPhone | undefined {
  const r = parsePhone(raw, country);
  return r !== undefined && 'ok' in r ? r.ok : undefined;
}

/**
 * Lowercase, NFC, letters, combining marks and digits only: spaces and punctuation go (Meta's
 * documentation and its parameter builder agree; `John2` stays `john2`). Any script is kept in UTF-8.
 */
export function normalizeName(raw: string | null | undefined): string | undefined {
  const text = blankToUndefined(raw);
  if (text === undefined) return undefined;
  const name = text
    .toLowerCase()
    .normalize('NFC')
    .replace(/[^\p{L}\p{M}\p{N}]/gu, '');
  return name === '' ? undefined : name;
}

/**
 * Meta's parameter builder: lowercase with every whitespace removed (`  User 123 ` → `user123`),
 * nothing else changed. The same normal form goes to every platform, so one id always has one digest.
 */
export function normalizeExternalId(raw: string | null | undefined): string | undefined {
  const id = raw?.replace(/\s+/gu, '').toLowerCase().normalize('NFC');
  return id ? id : undefined;
}

/** Lowercase, no spaces, punctuation or digits; any script kept (Meta `ct`, Snap `ct`). */
export function normalizeCity(raw: string | null | undefined): string | undefined {
  const city = blankToUndefined(raw)
    ?.toLowerCase()
    .normalize('NFC')
    .replace(/[^\p{L}\p{M}]/gu, '');
  return city ? city : undefined;
}

export { normalizeState };

/** Lowercase, no spaces or dash; a US ZIP+4 keeps its first five digits (Meta `zp`). */
export function normalizeZip(raw: string | null | undefined): string | undefined {
  const text = blankToUndefined(raw)?.toLowerCase().replace(/\s+/g, '');
  if (text === undefined) return undefined;
  const us = /^(\d{5})-\d{4}$/.exec(text);
  const zip = us ? us[1]! : text.replace(/-/g, '');
  return /^[\p{L}\p{N}]{2,}$/u.test(zip) ? zip : undefined;
}

/** ISO 3166-1 alpha-2, lowercase (`country`), from a code or a name (`country.ts`). */
export function normalizeCountry(raw: string | null | undefined): string | undefined {
  return countryCodeOf(raw)?.toLowerCase();
}

/** A real calendar day from 1900 to next year as `YYYYMMDD`, else undefined. */
function calendarDay(y: number, m: number, d: number): string | undefined {
  const date = new Date(Date.UTC(y, m - 1, d));
  if (date.getUTCFullYear() !== y || date.getUTCMonth() !== m - 1 || date.getUTCDate() !== d)
    return undefined;
  if (y < 1900 || y > new Date().getUTCFullYear() + 1) return undefined;
  return `${String(y).padStart(4, '0')}${String(m).padStart(2, '0')}${String(d).padStart(2, '0')}`;
}

/**
 * A date of birth in the common written forms → `YYYYMMDD` (Meta, Snap `db`), read as Meta's
 * parameter builder reads it (its `DOBUtils`): the first three groups of digits, whatever
 * separates them; a group above 31 is the year, first (`1990-01-31`, year, month, day) or last
 * (`31/01/1990`, `01/31/1990`: the group above 12 is the day); eight digits alone are `YYYYMMDD`.
 * Unlike the builder, a year-last date whose day and month could be either (`02/03/1990`) is not
 * read (the builder takes the US order; half the world writes the other), and the day must exist.
 */
export function normalizeDateOfBirth(raw: string | null | undefined): string | undefined {
  const groups = (blankToUndefined(raw) ?? '').split(/\D+/).filter((g) => g !== '');
  if (groups.length === 1 && groups[0]!.length === 8) {
    const g = groups[0]!;
    return calendarDay(Number(g.slice(0, 4)), Number(g.slice(4, 6)), Number(g.slice(6)));
  }
  if (groups.length < 3) return undefined;
  const [a, b, c] = groups.slice(0, 3).map(Number) as [number, number, number];
  if (a > 31) return b > 12 ? calendarDay(a, c, b) : calendarDay(a, b, c);
  if (b > 31) return undefined;
  if (a > 12) return calendarDay(c, b, a);
  if (b > 12) return calendarDay(c, a, b);
  return a === b ? calendarDay(c, a, b) : undefined;
}

/** `f` or `m` (`female`/`male` are read too). */
export function normalizeGender(raw: string | null | undefined): string | undefined {
  const g = blankToUndefined(raw)?.toLowerCase();
  if (g === 'f' || g === 'female') return 'f';
  if (g === 'm' || g === 'male') return 'm';
  return undefined;
}

/** A digest passed in stays as it is (lowercased); anything else is normalised, then hashed. */
function hashWith(
  raw: string | null | undefined,
  normalize: (v: string) => string | undefined,
): string | undefined {
  const text = blankToUndefined(raw);
  if (text === undefined) return undefined;
  if (isSha256Hex(text)) return text.toLowerCase();
  const normalized = normalize(text);
  return normalized === undefined ? undefined : sha256Hex(normalized);
}

const PHONE_WARNINGS: Record<PhoneDrop, string> = {
  'no-country':
    "pii.phone was dropped: it is written without an international prefix (+ or 00), is not a valid number read as international digits, and neither pii.country nor the site's default country says which country to read it in",
  invalid: 'pii.phone was dropped: it is not a valid phone number of the country it was read in',
  ambiguous:
    "pii.phone was dropped: written without an international prefix, it is a valid number both in pii.country (else the site's default country) and read as international digits, and these are different numbers; write it with + and its country code",
};

/** Said when a phone comes as a digest: it can only be sent where the form it was hashed in is taken. */
const HASHED_PHONE_WARNING =
  'pii.phone came as a SHA-256 digest, taken as the digest of the digits with country code and no + (the form Meta and Snapchat hash): sent to them only; TikTok and Google hash the E.164 form with its +, so send the phone unhashed for them';

/**
 * Normalises and hashes whatever PII is present, once per platform rule where the rules differ
 * (`em` / `emGoogle`, `ph` / `phE164`): the raw value is gone once this returns. A phone given
 * already hashed is sent only in the form it was hashed in: taken as Meta's form (the digits,
 * which Meta and Snapchat hash), it fills `ph` alone; the same digest as TikTok's or Google's
 * (the E.164 form with its `+`) would match no one there.
 */
export function hashPiiChecked(raw: RawPii, opts: HashPiiOptions = {}): HashedPiiResult {
  const out: HashedPii = {};
  const warnings: string[] = [];
  const em = hashWith(raw.email, normalizeEmail);
  if (em) out.em = em;
  else if (blankToUndefined(raw.email) !== undefined)
    warnings.push('pii.email was dropped: it is not an e-mail address');
  // Google normalises e-mails its own way. A digest given as such is the caller's best for every
  // platform (its normal form is unknown); setting both keeps a later merge from pairing one
  // address's digest with another's.
  const emGoogle = hashWith(raw.email, normalizeGoogleEmail);
  if (emGoogle) out.emGoogle = emGoogle;

  const phone = blankToUndefined(raw.phone);
  if (phone !== undefined && isSha256Hex(phone)) {
    out.ph = phone.toLowerCase();
    warnings.push(HASHED_PHONE_WARNING);
  } else {
    const p = parsePhone(phone, countryCodeOf(raw.country) ?? opts.defaultCountry);
    if (p !== undefined && 'ok' in p) {
      out.ph = sha256Hex(p.ok.digits);
      out.phE164 = sha256Hex(p.ok.e164);
    } else if (p !== undefined) {
      warnings.push(PHONE_WARNINGS[p.dropped]);
    }
  }

  const fields = [
    ['fn', raw.firstName, normalizeName],
    ['ln', raw.lastName, normalizeName],
    ['externalId', raw.externalId, normalizeExternalId],
    ['ct', raw.city, normalizeCity],
    ['st', raw.state, (v: string) => normalizeState(v, countryCodeOf(raw.country) ?? raw.country)],
    ['zp', raw.zip, normalizeZip],
    ['country', raw.country, normalizeCountry],
    ['db', raw.dateOfBirth, normalizeDateOfBirth],
    ['ge', raw.gender, normalizeGender],
  ] as const;
  for (const [key, value, normalize] of fields) {
    const digest = hashWith(value, normalize);
    if (digest) out[key] = digest;
  }
  return { hashed: out, warnings };
}

/** `hashPiiChecked` without its warnings. */
export function hashPii(raw: RawPii, opts: HashPiiOptions = {}): HashedPii {
  return hashPiiChecked(raw, opts).hashed;
}
