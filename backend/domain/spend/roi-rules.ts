/**
 * The ROI report's arithmetic (docs/spend.md), kept pure: money is summed per currency and never
 * across currencies, a cost is a spend divided in its own currency, and ROAS (value / spend) is
 * given only when the spend and the value of a row are each in one and the same currency.
 */
export type Money = Record<string, number>;

export interface RoiSums {
  spend: Money;
  clicks: number;
  visits: number;
  joins: number;
  /** Joins still members 7 and 30 days after joining (null: not that old yet). */
  retained: { d7: number | null; d30: number | null };
  conversions: number;
  value: Money;
}

export interface RoiFigures {
  costPerJoin: Money;
  costPerRetained: { d7: Money; d30: Money };
  roas: number | null;
}

/** Money is numeric(18,4) in the database; sums and costs are rounded back to that. */
export function money(n: number): number {
  return Math.round(n * 10_000) / 10_000;
}

/**
 * Adds `amount` to `into`'s currency. The currencies stay in alphabetical order, so that a report
 * lists them the same way whatever order its rows were read in.
 */
export function addMoney(into: Money, currency: string, amount: number): void {
  const known = currency in into;
  into[currency] = money((into[currency] ?? 0) + amount);
  if (known) return;
  const entries = Object.entries(into).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [c] of entries) delete into[c];
  for (const [c, n] of entries) into[c] = n;
}

/** Each currency's spend divided by `count`; nothing when the count is 0 or unknown. */
export function costPer(spend: Money, count: number | null): Money {
  const out: Money = {};
  if (count === null || count <= 0) return out;
  for (const [cur, amount] of Object.entries(spend)) out[cur] = money(amount / count);
  return out;
}

/** value / spend when both are in one currency, the same one, and the spend is not zero. */
export function roas(spend: Money, value: Money): number | null {
  const s = Object.entries(spend).filter(([, n]) => n !== 0);
  const v = Object.entries(value).filter(([, n]) => n !== 0);
  if (s.length !== 1 || v.length > 1) return null;
  const [cur, amount] = s[0]!;
  if (v.length === 1 && v[0]![0] !== cur) return null;
  return Math.round(((v[0]?.[1] ?? 0) / amount) * 10_000) / 10_000;
}

export function roiFigures(s: RoiSums): RoiFigures {
  return {
    costPerJoin: costPer(s.spend, s.joins),
    costPerRetained: { d7: costPer(s.spend, s.retained.d7), d30: costPer(s.spend, s.retained.d30) },
    roas: roas(s.spend, s.value),
  };
}
