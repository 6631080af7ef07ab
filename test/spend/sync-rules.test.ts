import { describe, expect, it } from 'vitest';
import { addDays, backfillWindow, dayIn, isDay, recentWindow } from '../../backend/domain/spend/sync.js';

// 2026-11-28 03:30 UTC: still the 27th in Los Angeles, already the 28th in Tokyo.
const AT = new Date('2026-11-28T03:30:00Z');

describe("an account's days", () => {
  it.each([
    ['America/Los_Angeles', '2026-11-27'],
    ['Asia/Tokyo', '2026-11-28'],
    ['UTC', '2026-11-28'],
    [null, '2026-11-28'],
    ['Not/AZone', '2026-11-28'],
  ])('today in %s is %s', (tz, day) => expect(dayIn(tz, AT)).toBe(day));

  it.each([
    ['America/Los_Angeles', { from: '2026-11-26', to: '2026-11-27' }],
    ['Asia/Tokyo', { from: '2026-11-27', to: '2026-11-28' }],
  ])('the hourly refresh of %s reads yesterday and today', (tz, w) =>
    expect(recentWindow(tz, AT)).toEqual(w),
  );

  it('the backfill is 90 days up to the account’s today', () =>
    expect(backfillWindow('America/Los_Angeles', AT)).toEqual({ from: '2026-08-30', to: '2026-11-27' }));

  it.each([
    ['2026-03-01', -1, '2026-02-28'],
    ['2024-03-01', -1, '2024-02-29'],
    ['2026-12-31', 1, '2027-01-01'],
  ])('%s moved by %i is %s', (d, n, out) => expect(addDays(d, n)).toBe(out));

  it.each([
    ['2026-02-28', true],
    ['2026-02-30', false],
    ['2026-2-28', false],
    ['yesterday', false],
  ])('%s is a day: %s', (d, ok) => expect(isDay(d)).toBe(ok));
});
