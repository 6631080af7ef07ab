import type { Pool } from '../../db/pool.js';
import { ApiError } from '../../errors.js';
import { parseStarsValue } from '../telegram/payment-value.js';
import { findSite } from './sites.js';

/** A site's value of one Telegram Star (`site update --stars-value CUR=AMOUNT`, docs/telegram-payments.md). */
export interface SiteStarsValue {
  siteId: string;
  starsValue: { currency: string; amount: number };
}

export async function setSiteStarsValue(pool: Pool, siteRef: string, text: string): Promise<SiteStarsValue> {
  const parsed = parseStarsValue(text);
  if (typeof parsed === 'string')
    throw new ApiError('VALIDATION_FAILED', `site: starsValue: ${parsed}`, {
      errors: [{ path: 'starsValue', message: parsed }],
    });
  const site = await findSite(pool, siteRef);
  if (!site) throw new ApiError('NOT_FOUND', `site ${siteRef} does not exist`);
  await pool.query('UPDATE sites SET stars_value = $2, stars_value_currency = $3 WHERE id = $1', [
    site.id,
    parsed.amount,
    parsed.currency,
  ]);
  return { siteId: site.id, starsValue: parsed };
}
