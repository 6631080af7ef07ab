import { describe, expect, it } from 'vitest';
import {
  MAX_ERROR_LENGTH,
  headerValue,
  parseRetryAfterMs,
  truncateError,
} from '../../../backend/platforms/response.js';
import { NOW } from './fixtures.js';

describe('parseRetryAfterMs', () => {
  it.each([
    ['120', 120_000],
    [' 0 ', 0],
    ['7', 7_000],
    ['Sat, 22 Nov 2025 02:02:00 GMT', 120_000],
    ['Sat, 22 Nov 2025 02:00:00 GMT', 0],
    ['Fri, 21 Nov 2025 23:00:00 GMT', 0],
    ['Saturday, 22-Nov-25 02:00:10 GMT', 10_000],
    ['Sat Nov 22 02:00:10 2025', 10_000],
    ['Sat Nov 22 02:00:10', undefined],
    ['-5', undefined],
    ['1.5', undefined],
    ['soon', undefined],
    ['2025-11-22T02:02:00Z', undefined],
    ['Sat, 99 Nov 2025 99:00:00 GMT', undefined],
    ['', undefined],
    [null, undefined],
    [undefined, undefined],
  ])('%j → %s', (value, expected) => {
    expect(parseRetryAfterMs(value, NOW)).toBe(expected);
  });
});

describe('headerValue', () => {
  it('finds a header whatever the case of its name', () => {
    expect(headerValue({ 'Retry-After': '3' }, 'retry-after')).toBe('3');
    expect(headerValue({ 'retry-after': '4' }, 'Retry-After')).toBe('4');
    expect(headerValue({ 'x-other': '5' }, 'retry-after')).toBeUndefined();
  });
});

describe('truncateError', () => {
  it('keeps short text on one line and cuts long text to the limit', () => {
    expect(truncateError('  a\n  b\tc ')).toBe('a b c');
    const cut = truncateError('y'.repeat(MAX_ERROR_LENGTH + 10));
    expect(cut).toHaveLength(MAX_ERROR_LENGTH);
    expect(cut.endsWith('…')).toBe(true);
    expect(truncateError('z'.repeat(MAX_ERROR_LENGTH))).toBe('z'.repeat(MAX_ERROR_LENGTH));
  });
});
