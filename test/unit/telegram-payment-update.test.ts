// message.successful_payment as parseUpdate reads it: a renewal is a subscription payment without
// `is_first_recurring` (the Bot API sends that field only as true).
import { describe, expect, it } from 'vitest';
import { parseUpdate } from '../../backend/domain/telegram/updates.js';

const from = { id: 777, is_bot: false, first_name: 'A' };
const message = (payment: object, extra: object = {}) => ({
  update_id: 1,
  message: {
    message_id: 3,
    date: 1_763_776_800,
    chat: { id: 777, type: 'private' },
    from,
    successful_payment: {
      currency: 'XTR',
      total_amount: 100,
      invoice_payload: 'p',
      telegram_payment_charge_id: 'ch-1',
      provider_payment_charge_id: '',
      ...payment,
    },
    ...extra,
  },
});

describe('parseUpdate: successful_payment', () => {
  it.each([
    ['a one-off payment', {}, false],
    [
      'a first subscription payment',
      { subscription_expiration_date: 1_766_368_800, is_recurring: true, is_first_recurring: true },
      false,
    ],
    ['a renewal', { subscription_expiration_date: 1_766_368_800, is_recurring: true }, true],
    ['a renewal without is_recurring', { subscription_expiration_date: 1_766_368_800 }, true],
  ])('%s', (_name, payment, renewal) => {
    const u = parseUpdate(message(payment));
    expect(u).toEqual({
      kind: 'payment',
      updateId: 1,
      body: {
        userId: 777,
        currency: 'XTR',
        totalAmount: 100,
        chargeId: 'ch-1',
        renewal,
        date: 1_763_776_800,
      },
    });
  });

  it.each([
    ['a fractional amount', { total_amount: 1.5 }],
    ['a zero amount', { total_amount: 0 }],
    ['a lower-case currency', { currency: 'usd' }],
    ['an empty charge id', { telegram_payment_charge_id: '' }],
    ['a charge id with NUL', { telegram_payment_charge_id: 'a\u0000b' }],
  ])('%s is malformed and ignored', (_name, payment) => {
    expect(parseUpdate(message(payment)).kind).toBe('ignored');
  });

  it('a payment reported by a bot is not a payment of a user', () => {
    expect(parseUpdate(message({}, { from: { ...from, is_bot: true } })).kind).toBe('ignored');
  });
});
