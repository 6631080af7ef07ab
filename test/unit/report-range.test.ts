// The dashboard's range shortcuts and the period a range is compared with: pure rules on UTC days.
import { describe, expect, it } from 'vitest';
import { previousRange, rangePresets } from '../../backend/domain/reports/range.js';

describe('range shortcuts', () => {
  it.each([
    [
      '2026-11-28T10:00:00Z',
      {
        today: ['2026-11-28', '2026-11-28'],
        yesterday: ['2026-11-27', '2026-11-27'],
        'last 7 days': ['2026-11-22', '2026-11-28'],
        'last 30 days': ['2026-10-30', '2026-11-28'],
        'this month': ['2026-11-01', '2026-11-28'],
        'last month': ['2026-10-01', '2026-10-31'],
      },
    ],
    [
      // The first of a month in a leap year: yesterday and last month are February.
      '2028-03-01T00:00:00Z',
      {
        today: ['2028-03-01', '2028-03-01'],
        yesterday: ['2028-02-29', '2028-02-29'],
        'last 7 days': ['2028-02-24', '2028-03-01'],
        'last 30 days': ['2028-02-01', '2028-03-01'],
        'this month': ['2028-03-01', '2028-03-01'],
        'last month': ['2028-02-01', '2028-02-29'],
      },
    ],
    [
      // January: last month is the year before's December.
      '2027-01-15T23:59:59Z',
      {
        today: ['2027-01-15', '2027-01-15'],
        yesterday: ['2027-01-14', '2027-01-14'],
        'last 7 days': ['2027-01-09', '2027-01-15'],
        'last 30 days': ['2026-12-17', '2027-01-15'],
        'this month': ['2027-01-01', '2027-01-15'],
        'last month': ['2026-12-01', '2026-12-31'],
      },
    ],
  ])('at %s', (now, want) => {
    const got = Object.fromEntries(rangePresets(new Date(now)).map((r) => [r.label, [r.from, r.to]]));
    expect(got).toEqual(want);
  });
});

describe('the period before', () => {
  it.each([
    [
      { from: '2026-11-28', to: '2026-11-28' },
      { from: '2026-11-27', to: '2026-11-27' },
    ],
    [
      { from: '2026-11-01', to: '2026-11-30' },
      { from: '2026-10-02', to: '2026-10-31' },
    ],
    [
      { from: '2026-03-01', to: '2026-03-07' },
      { from: '2026-02-22', to: '2026-02-28' },
    ],
    [
      { from: '0001-01-05', to: '0001-01-06' },
      { from: '0001-01-03', to: '0001-01-04' },
    ],
    [{ from: '0001-01-01', to: '0001-01-03' }, null],
    [{ from: '0001-01-02', to: '0001-01-03' }, null],
  ])('of %j is %j', (range, want) => {
    expect(previousRange(range)).toEqual(want);
  });
});
