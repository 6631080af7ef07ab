/**
 * The ISO 4217 currencies a purchase can be paid in: the active national and regional codes as of
 * 2025. Funds, precious metals and testing codes (XAU, XDR, XTS, XXX, BOV, CLF, …) are left out:
 * no ad platform reports revenue in them, and a typo landing on one would pass silently.
 */
const CODES =
  'AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN BZD ' +
  'CAD CDF CHF CLP CNY COP CRC CUC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP ' +
  'GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD ' +
  'KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK ' +
  'NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS ' +
  'SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD UYU UZS VED VES VND VUV WST ' +
  'XAF XCD XCG XOF XPF YER ZAR ZMW ZWG ZWL';

export const CURRENCIES: ReadonlySet<string> = new Set(CODES.split(' '));

/** Case-insensitive: callers often send `usd`; the stored form is upper case. */
export function normalizeCurrency(code: string): string | undefined {
  const upper = code.trim().toUpperCase();
  return CURRENCIES.has(upper) ? upper : undefined;
}

/**
 * Amounts are stored as `numeric(18,4)`: four decimal places, one more than any currency's minor
 * unit (KWD, BHD, OMR have three). PostgreSQL rounds extra decimals half away from zero
 * (10.00005 → 10.0001), and what is stored is what is shown and sent. A value under 0.0001 would
 * be stored, shown and sent as 0, so it is refused instead: 0.0001 is the smallest non-zero value.
 */
export const VALUE_DECIMALS = 4;
export const MIN_VALUE = 0.0001;
/** The largest value the API and the dashboard accept. */
export const MAX_VALUE = 1_000_000_000_000;

/** Why a value cannot be stored as given, for the request's error; undefined when it can. */
export function valueProblem(value: number, opts: { positive: boolean }): string | undefined {
  if (opts.positive ? value >= MIN_VALUE : value === 0 || value >= MIN_VALUE) return undefined;
  const rule = opts.positive ? `must be at least ${MIN_VALUE}` : `must be 0 or at least ${MIN_VALUE}`;
  return `${rule} (values are kept to ${VALUE_DECIMALS} decimal places)`;
}
