import type { EventTypeName } from '../outbox/conversion-record.js';
import { paymentValue, STARS_CURRENCY, type StarsValue } from './payment-value.js';
import type { ChannelRow } from './queries.js';

export interface JoinConversionTerms {
  eventType: EventTypeName;
  customEventName: string | null;
  value: number | null;
  currency: string | null;
  awaitingManualInput: boolean;
}

/**
 * What an attributed join of a channel converts into: the channel's event type (its custom name for
 * `Custom`) and its fixed value and currency. A Purchase needs a value, so a Purchase channel
 * without a fixed one waits for the value to be submitted instead of being sent without it.
 */
export function joinConversionTerms(
  c: Pick<ChannelRow, 'event_type' | 'custom_event_name' | 'fixed_value' | 'fixed_currency' | 'manual_value'>,
): JoinConversionTerms {
  const hasFixed = c.fixed_value !== null && c.fixed_currency !== null;
  const awaitingManualInput = c.manual_value || (c.event_type === 'Purchase' && !hasFixed);
  return {
    eventType: c.event_type,
    customEventName: c.event_type === 'Custom' ? c.custom_event_name : null,
    value: !awaitingManualInput && hasFixed ? c.fixed_value : null,
    currency: !awaitingManualInput && hasFixed ? c.fixed_currency : null,
    awaitingManualInput,
  };
}

/**
 * A paid join (through a Stars subscription link, `channel update --subscription-price`) is worth
 * what the user paid for the first period, valued with the site's Stars value as a Stars payment
 * is. Without a Stars value the channel's own terms stand.
 */
export function paidJoinTerms(
  terms: JoinConversionTerms,
  paidStars: number | null,
  stars: StarsValue | null,
): JoinConversionTerms {
  if (paidStars === null || stars === null) return terms;
  const valued = paymentValue(paidStars, STARS_CURRENCY, stars);
  if (!valued.valued) return terms;
  return { ...terms, value: valued.value, currency: valued.currency, awaitingManualInput: false };
}
