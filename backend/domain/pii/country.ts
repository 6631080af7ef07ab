import countries from 'i18n-iso-countries';
import en from 'i18n-iso-countries/langs/en.json' with { type: 'json' };

/**
 * A country as people write it, read as Meta's parameter builder reads it (its `CountryUtils`:
 * the ISO code, or the country's name in any case, spacing or punctuation, `United States`,
 * `U.S.A.`), and further the ISO 3166-1 alpha-3 code (`DEU`) and the English names and aliases
 * of i18n-iso-countries (`Ivory Coast`, `UK`, `Türkiye`). Where the builder would cut an unknown
 * name to its first two letters (`InvalidCountry` → `in`), nothing is read: a wrong country
 * digest lowers the match the event gets, an absent one does not.
 */
countries.registerLocale(en);

/** ISO 3166-1 alpha-2 (upper case) of `raw`, or undefined when it names no country. */
export function countryCodeOf(raw: string | null | undefined): string | undefined {
  const text = raw?.trim().normalize('NFC');
  if (!text) return undefined;
  const letters = text.replace(/[^\p{L}]/gu, '');
  if (/^[A-Za-z]{2}$/.test(letters) && countries.isValid(letters.toUpperCase())) return letters.toUpperCase();
  if (/^[A-Za-z]{3}$/.test(letters)) {
    const alpha2 = countries.alpha3ToAlpha2(letters.toUpperCase());
    if (alpha2 !== undefined) return alpha2;
  }
  const spaced = text.replace(/[\s_\-.]+/gu, ' ').trim();
  return countries.getAlpha2Code(spaced, 'en') ?? countries.getAlpha2Code(letters, 'en') ?? undefined;
}
