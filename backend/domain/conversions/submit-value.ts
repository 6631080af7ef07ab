import type { Deps } from '../../deps.js';
import { retryLockConflicts } from '../../db/lock-conflict.js';
import { withTx } from '../../db/pool.js';
import { ApiError } from '../../errors.js';
import { hashPii, type RawPii } from '../pii/normalize.js';
import { redispatchConversion } from './redispatch.js';
import type { ApiCaller } from './site-scope.js';

/**
 * The value of a Purchase that waited for one (`awaitingManualInput`, a join on a manual-value
 * channel): sets it, clears the wait and dispatches, like the dashboard's "Submit value".
 */
export interface ValueSubmission {
  telegramUserId: number;
  conversionId: string;
  value: number;
  /** Upper-case ISO 4217, already checked. */
  currency: string;
  pii: Omit<RawPii, 'externalId'>;
}

export async function submitConversionValue(
  deps: Pick<Deps, 'pool' | 'now' | 'local'>,
  caller: ApiCaller,
  v: ValueSubmission,
): Promise<void> {
  // One conversion, then its sends (docs/architecture.md#lock-order); a transaction PostgreSQL
  // ends for a lock conflict anyway is run again rather than answered 500.
  await retryLockConflicts(() =>
    withTx(deps.pool, async (tx) => {
      // Another account's conversion, another site's (for a site-scoped key) or another user's all
      // answer like a missing one: nothing here tells the caller it exists.
      const { rows } = await tx.query<{
        id: string;
        site_id: string;
        awaiting_manual_input: boolean;
        default_country: string | null;
      }>(
        `SELECT c.id, c.site_id, c.awaiting_manual_input, s.default_country FROM conversions c JOIN sites s ON s.id = c.site_id
       WHERE c.id = $1 AND c.telegram_user_id = $2 AND s.account_id = $3 AND ($4::uuid IS NULL OR c.site_id = $4)
       FOR UPDATE OF c`,
        [v.conversionId, v.telegramUserId, caller.accountId, caller.siteId],
      );
      const c = rows[0];
      if (!c) throw new ApiError('CONVERSION_NOT_FOUND', 'no such conversion for this lead');
      if (!c.awaiting_manual_input)
        throw new ApiError('NOT_AWAITING_VALUE', 'this conversion is not awaiting a value');
      const piiHashed = hashPii(v.pii, { defaultCountry: c.default_country });
      await tx.query(
        `UPDATE conversions SET value = $2, currency = $3, pii_hashed = pii_hashed || $4::jsonb, awaiting_manual_input = false, updated_at = $5
       WHERE id = $1`,
        [c.id, v.value, v.currency, JSON.stringify(piiHashed), deps.now()],
      );
      await redispatchConversion(tx, c.id, c.site_id);
    }),
  );
  deps.local.waker.wake();
}
