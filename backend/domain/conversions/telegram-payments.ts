import type { Deps } from '../../deps.js';
import { ApiError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { skipPendingSendsStatement } from '../outbox/sends.js';
import type { UpdateOutcome } from '../telegram/context.js';
import { paymentValue, type StarsValue } from '../telegram/payment-value.js';
import type { BotPayment } from '../telegram/updates.js';
import { submitBusinessEvent } from './submit-event.js';

/**
 * A payment a user made to the bot (`message.successful_payment`, Stars or fiat) becomes a
 * `Purchase` of that user's lead, through the business-event path (docs/telegram-payments.md):
 * its `orderId` is the payment's `telegram_payment_charge_id`, so a resent update is the same order
 * (reused, never doubled) and every platform gets an order id and an event id derived from it. A
 * subscription's renewal carries its own charge id and so is a purchase of its own.
 */

export type PaymentDeps = Pick<Deps, 'pool' | 'now' | 'local' | 'config'>;

interface PayerSite {
  site_id: string;
  account_id: string;
  stars_value: string | null;
  stars_value_currency: string | null;
}

/**
 * The site a paying user is a lead of among the sites of the bot's channels: the one they were
 * last seen on. A user none of them knows is no lead, and the payment is left alone.
 */
async function payerSite(pool: PaymentDeps['pool'], botId: string, telegramUserId: number) {
  const { rows } = await pool.query<PayerSite>(
    `SELECT l.site_id, s.account_id, s.stars_value::text AS stars_value, s.stars_value_currency
       FROM leads l JOIN sites s ON s.id = l.site_id
      WHERE l.telegram_user_id = $2
        AND l.site_id IN (SELECT site_id FROM channels WHERE bot_id = $1)
      ORDER BY l.last_seen_at DESC, l.site_id
      LIMIT 1`,
    [botId, telegramUserId],
  );
  return rows[0] ?? null;
}

/** Marks the sends of an unvalued Stars purchase skipped, in the transaction that creates them. */
function skipSends(conversionId: string, reason: string) {
  return {
    kind: 'telegram_payment_skip',
    input: { conversionId, reason },
    statement: (inputs: unknown[]) =>
      skipPendingSendsStatement(inputs as { conversionId: string; reason: string }[]),
  };
}

export async function recordPayment(
  deps: PaymentDeps,
  bot: { id: string },
  payment: BotPayment,
  log: Logger,
): Promise<UpdateOutcome> {
  const payer = await payerSite(deps.pool, bot.id, payment.userId);
  if (payer === null) {
    log.info(
      { currency: payment.currency },
      'telegram payment from a user no site of this bot knows: not a conversion',
    );
    return 'payment_unknown_user';
  }
  const stars: StarsValue | null =
    payer.stars_value === null || payer.stars_value_currency === null
      ? null
      : { amount: Number(payer.stars_value), currency: payer.stars_value_currency };
  const valued = paymentValue(payment.totalAmount, payment.currency, stars);
  try {
    const outcome = await submitBusinessEvent(deps, {
      caller: { keyId: `telegram-bot:${bot.id}`, accountId: payer.account_id, siteId: payer.site_id },
      mode: 'conversion',
      event: {
        telegramUserId: payment.userId,
        site: { siteId: payer.site_id },
        channelId: null,
        eventType: 'Purchase',
        customEventName: null,
        orderId: payment.chargeId,
        value: valued.valued ? valued.value : null,
        currency: valued.valued ? valued.currency : null,
        contentName: payment.renewal ? 'renewal' : null,
        pii: {},
        externalUserId: null,
        eventTimeMs: null,
        clickIds: {},
        client: { clientIp: null, userAgent: null },
        eventSourceUrl: null,
      },
      persist: valued.valued
        ? undefined
        : (o) => (o.created ? skipSends(o.result.conversionId, valued.reason) : null),
    });
    if (valued.valued) deps.local.waker.wake();
    log.info(
      { conversionId: outcome.result.conversionId, created: outcome.created, renewal: payment.renewal },
      valued.valued
        ? 'telegram payment recorded as a purchase'
        : `telegram payment recorded, not sent: ${valued.reason}`,
    );
    return 'payment_recorded';
  } catch (error) {
    // A lead without a channel to credit (no join, no entry) is no lead the platforms can use.
    if (error instanceof ApiError && error.status < 500) {
      log.warn({ code: error.code }, 'telegram payment not recorded: %s', error.message);
      return 'payment_unknown_user';
    }
    throw error;
  }
}
