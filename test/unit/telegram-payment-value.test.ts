import { describe, expect, it } from 'vitest';
import {
  minorUnitDigits,
  parseStarsValue,
  paymentValue,
  UNVALUED_STARS_REASON,
} from '../../backend/domain/telegram/payment-value.js';

describe('paymentValue', () => {
  it.each([
    [1999, 'USD', null, { valued: true, value: 19.99, currency: 'USD' }],
    [1500, 'JPY', null, { valued: true, value: 1500, currency: 'JPY' }],
    [12345, 'KWD', null, { valued: true, value: 12.345, currency: 'KWD' }],
    [100, 'EUR', null, { valued: true, value: 1, currency: 'EUR' }],
    [250, 'XTR', { amount: 0.013, currency: 'USD' }, { valued: true, value: 3.25, currency: 'USD' }],
    [1, 'XTR', { amount: 0.0123456, currency: 'EUR' }, { valued: true, value: 0.0123, currency: 'EUR' }],
    [250, 'XTR', null, { valued: false, reason: UNVALUED_STARS_REASON }],
  ] as const)('%d %s with stars %o', (amount, currency, stars, expected) => {
    expect(paymentValue(amount, currency, stars)).toEqual(expected);
  });

  it.each([
    ['USD', 2],
    ['JPY', 0],
    ['KRW', 0],
    ['CLP', 0],
    ['BHD', 3],
    ['CLF', 4],
    ['IDR', 2],
  ])('%s has %d minor digits', (c, d) => {
    expect(minorUnitDigits(c)).toBe(d);
  });
});

describe('parseStarsValue', () => {
  it.each([
    ['USD=0.013', { amount: 0.013, currency: 'USD' }],
    ['eur=1', { amount: 1, currency: 'EUR' }],
  ])('%s is read', (text, expected) => {
    expect(parseStarsValue(text)).toEqual(expected);
  });
  it.each(['USD', '=1', 'USD=0', 'USD=-1', 'XTR=1', 'USD=1.1234567', 'US=1'])('%s is refused', (text) => {
    expect(typeof parseStarsValue(text)).toBe('string');
  });
});
