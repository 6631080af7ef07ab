// Raw PII is normalised and hashed the moment it arrives; only these digests are stored or sent.
import { createHash } from 'node:crypto';
import { type CountryCode, isSupportedCountry, parsePhoneNumberFromString } from 'libphonenumber-js';
import type { HashedPii } from '../platforms/types.js';

export type { HashedPii };

export interface RawPii {
  email?: string | null;
  phone?: string | null;
  firstName?: string | null;
  lastName?: string | null;
  externalId?: string | null;
}

export interface HashPiiOptions {
  /** ISO 3166-1 alpha-2 country for phone numbers written without a country code (e.g. the site's). */
  defaultCountry?: string | null;
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

export function normalizeEmail(raw: string | null | undefined): string | undefined {
  return blankToUndefined(raw)?.toLowerCase();
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
  if (at <= 0) return email;
  const domain = email.slice(at + 1);
  return GOOGLE_MAIL_DOMAINS.has(domain) ? `${email.slice(0, at).replaceAll('.', '')}@${domain}` : email;
}

export interface NormalizedPhone {
  /** Country code and number, digits only, no `+`: what Meta and Snapchat hash. */
  digits: string;
  /** E.164 with the `+`: what TikTok and Google hash. */
  e164: string;
}

function supportedCountry(country: string | null | undefined): CountryCode | undefined {
  const c = country?.trim().toUpperCase();
  return c && isSupportedCountry(c) ? c : undefined;
}

/**
 * Parses with the default country (which also understands its international prefix, e.g. `00`
 * or `011`). A number that is not valid that way is tried as already carrying a country code
 * after any leading zeros (`0044…`, `1-616-…`). A number that yields no country code is
 * dropped: hashed without one it could never match.
 */
export function normalizePhone(raw: string | null | undefined, defaultCountry?: string | null): NormalizedPhone | undefined {
  const text = blankToUndefined(raw);
  if (text === undefined) return undefined;
  const asWritten = parsePhoneNumberFromString(text, supportedCountry(defaultCountry));
  let chosen = asWritten?.isValid() ? asWritten : undefined;
  if (chosen === undefined) {
    const digits = text.replace(/\D/g, '').replace(/^0+/, '');
    const international = digits === '' ? undefined : parsePhoneNumberFromString(`+${digits}`);
    if (international?.isValid()) chosen = international;
  }
  // Valid means "matches the known number ranges"; a merely possible number may be a new range.
  chosen ??= asWritten?.isPossible() ? asWritten : undefined;
  if (chosen === undefined) return undefined;
  return { digits: chosen.number.slice(1), e164: chosen.number };
}

/** Lowercase, NFC, letters and combining marks only (no spaces, punctuation or digits); UTF-8 kept. */
export function normalizeName(raw: string | null | undefined): string | undefined {
  const text = blankToUndefined(raw);
  if (text === undefined) return undefined;
  const name = text.toLowerCase().normalize('NFC').replace(/[^\p{L}\p{M}]/gu, '');
  return name === '' ? undefined : name;
}

/** External ids are case-sensitive: only surrounding whitespace goes. */
export function normalizeExternalId(raw: string | null | undefined): string | undefined {
  return blankToUndefined(raw);
}

/** A digest passed in stays as it is (lowercased); anything else is normalised, then hashed. */
function hashWith(raw: string | null | undefined, normalize: (v: string) => string | undefined): string | undefined {
  const text = blankToUndefined(raw);
  if (text === undefined) return undefined;
  if (isSha256Hex(text)) return text.toLowerCase();
  const normalized = normalize(text);
  return normalized === undefined ? undefined : sha256Hex(normalized);
}

/**
 * Normalises and hashes whatever PII is present, once per platform rule where the rules differ
 * (`em` / `emGoogle`, `ph` / `phE164`): the raw value is gone once this returns. A phone given already hashed fills `ph` only:
 * which of the two forms it was hashed from cannot be known, and `ph` (digits, no `+`) is the
 * form Meta documents.
 */
export function hashPii(raw: RawPii, opts: HashPiiOptions = {}): HashedPii {
  const out: HashedPii = {};
  const em = hashWith(raw.email, normalizeEmail);
  if (em) out.em = em;
  // Google normalises e-mails its own way. A digest given as such is the caller's best for every
  // platform (its normal form is unknown); setting both keeps a later merge from pairing one
  // address's digest with another's.
  const emGoogle = hashWith(raw.email, normalizeGoogleEmail);
  if (emGoogle) out.emGoogle = emGoogle;

  const phone = blankToUndefined(raw.phone);
  if (phone !== undefined && isSha256Hex(phone)) {
    out.ph = phone.toLowerCase();
  } else {
    const p = normalizePhone(phone, opts.defaultCountry);
    if (p) {
      out.ph = sha256Hex(p.digits);
      out.phE164 = sha256Hex(p.e164);
    }
  }

  const fn = hashWith(raw.firstName, normalizeName);
  if (fn) out.fn = fn;
  const ln = hashWith(raw.lastName, normalizeName);
  if (ln) out.ln = ln;
  const externalId = hashWith(raw.externalId, normalizeExternalId);
  if (externalId) out.externalId = externalId;
  return out;
}
