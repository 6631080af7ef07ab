import { present } from './precheck.js';
import type { DeliveryEvent, PixelConfig, PixelConfigOf, Platform } from './types.js';

export function toSeconds(ms: number): number {
  return Math.floor(ms / 1000);
}

export function upperCurrency(c: string | null | undefined): string | undefined {
  return present(c) ? c.trim().toUpperCase() : undefined;
}

export function finiteNumber(v: number | null | undefined): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

export function assertBatch(events: readonly DeliveryEvent[], maxBatch: number, platform: string): void {
  if (events.length === 0) throw new RangeError(`${platform}: cannot build a request for an empty batch`);
  if (events.length > maxBatch) {
    throw new RangeError(`${platform}: batch of ${events.length} exceeds the limit of ${maxBatch}`);
  }
}

export function stripTrailingSlash(url: string): string {
  return url.replace(/\/+$/, '');
}

/** Nullable input as an optional value: JSON.stringify then leaves the key out. */
export function opt<T>(v: T | null | undefined): T | undefined {
  if (v == null) return undefined;
  if (typeof v === 'string' && v.trim() === '') return undefined;
  return v;
}

/** The object, or undefined when none of its values is set (so an empty object is not sent). */
export function nonEmptyObject<T extends Record<string, unknown>>(o: T): T | undefined {
  return Object.values(o).some((v) => v !== undefined) ? o : undefined;
}

export function pixelFor<P extends Platform>(pixel: PixelConfig, platform: P): PixelConfigOf<P> {
  if (pixel.platform !== platform) {
    throw new TypeError(`${platform} adapter was given a ${pixel.platform} pixel`);
  }
  return pixel as PixelConfigOf<P>;
}

/** Value and currency as a pair: Meta, TikTok and Snapchat want a currency with every value. */
export function valueAndCurrency(
  e: Pick<DeliveryEvent, 'value' | 'currency'>,
): { value: number; currency: string } | undefined {
  const currency = upperCurrency(e.currency);
  return finiteNumber(e.value) && currency !== undefined ? { value: e.value, currency } : undefined;
}

/** Every external id digest of the event, without repeats; undefined when there is none. */
export function externalIdsOf(e: Pick<DeliveryEvent, 'externalIds' | 'hashed'>): string[] | undefined {
  const ids = [...(e.externalIds ?? []), ...(e.hashed.externalId ? [e.hashed.externalId] : [])];
  const unique = [...new Set(ids)];
  return unique.length > 0 ? unique : undefined;
}

/** A digest as the one-element array Meta and Snapchat take. */
export function one(v: string | undefined): string[] | undefined {
  return v ? [v] : undefined;
}

/**
 * The PII digests as Meta's and Snap's `user_data` both name them (each an array of one digest,
 * absent when unknown): the two platforms took the same field names.
 */
export function hashedUserFields(h: DeliveryEvent['hashed']) {
  return {
    em: one(h.em),
    ph: one(h.ph),
    fn: one(h.fn),
    ln: one(h.ln),
    ct: one(h.ct),
    st: one(h.st),
    zp: one(h.zp),
    country: one(h.country),
    db: one(h.db),
    ge: one(h.ge),
  };
}

/** Whether the event is a website event (the default), which the platforms want with a page URL and a User-Agent. */
export function isWebsite(e: Pick<DeliveryEvent, 'actionSource'>): boolean {
  return (e.actionSource ?? 'website') === 'website';
}
