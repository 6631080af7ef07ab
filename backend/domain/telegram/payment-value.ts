/**
 * What a Telegram payment is worth, as pure rules. Telegram gives `total_amount` as an integer in
 * the currency's smallest unit ("the number of digits past the decimal point for each currency",
 * https://core.telegram.org/bots/payments#supported-currencies), and Stars (`XTR`) as a count of
 * Stars, which have no value in money until the site names one.
 */

export const STARS_CURRENCY = 'XTR';

/** ISO 4217's currencies whose minor unit is not the hundredth (list one, minor unit column). */
const ZERO_DECIMALS = new Set(
  'BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF'.split(' '),
);
const THREE_DECIMALS = new Set('BHD IQD JOD KWD LYD OMR TND'.split(' '));
const FOUR_DECIMALS = new Set(['CLF', 'UYW']);

/** Digits past the decimal point of a currency's `total_amount`, by ISO 4217 (2 unless listed). */
export function minorUnitDigits(currency: string): number {
  if (ZERO_DECIMALS.has(currency)) return 0;
  if (THREE_DECIMALS.has(currency)) return 3;
  if (FOUR_DECIMALS.has(currency)) return 4;
  return 2;
}

export interface StarsValue {
  /** The value of one Star, in `currency`. */
  amount: number;
  currency: string;
}

export type PaymentValue =
  | { valued: true; value: number; currency: string }
  /** A Stars payment on a site without a Stars value: recorded, sent nowhere. */
  | { valued: false; reason: string };

export const UNVALUED_STARS_REASON =
  "a Stars payment (XTR) and the site has no Stars value: set one with 'site update --stars-value CUR=AMOUNT'";

/** The value of a payment of `totalAmount` (Telegram's integer) in `currency`. */
export function paymentValue(totalAmount: number, currency: string, stars: StarsValue | null): PaymentValue {
  if (currency === STARS_CURRENCY) {
    if (stars === null) return { valued: false, reason: UNVALUED_STARS_REASON };
    return { valued: true, value: round4(totalAmount * stars.amount), currency: stars.currency };
  }
  return { valued: true, value: round4(totalAmount / 10 ** minorUnitDigits(currency)), currency };
}

/** Conversions keep four decimals (numeric(18,4)). */
function round4(n: number): number {
  return Math.round(n * 10_000) / 10_000;
}

/** `CUR=AMOUNT` of `--stars-value`: an ISO 4217 code and a positive amount of at most 6 decimals. */
export function parseStarsValue(text: string): StarsValue | string {
  const m = /^([A-Za-z]{3})=(\d{1,12}(?:\.\d{1,6})?)$/.exec(text.trim());
  if (!m) return 'must be CUR=AMOUNT, the value of one Star, e.g. USD=0.013';
  const currency = m[1]!.toUpperCase();
  if (currency === STARS_CURRENCY) return 'must be a currency of money, not XTR';
  const amount = Number(m[2]);
  if (!(amount > 0)) return 'the amount must be greater than 0';
  return { amount, currency };
}
