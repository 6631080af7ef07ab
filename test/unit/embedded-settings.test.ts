// The embedded PostgreSQL's page cache follows the memory it may use: a quarter of it, between
// PostgreSQL's own default and 8 GB.
import { describe, expect, it } from 'vitest';
import { sharedBuffersFor } from '../../backend/db/embedded.js';

const GB = 2 ** 30;

describe('sharedBuffersFor', () => {
  it.each([
    [256 * 2 ** 20, '128MB'],
    [512 * 2 ** 20, '128MB'],
    [1 * GB, '256MB'],
    [2 * GB, '512MB'],
    [24 * GB, '6144MB'],
    [32 * GB, '8192MB'],
    [256 * GB, '8192MB'],
  ])('%d bytes → %s', (memory, expected) => {
    expect(sharedBuffersFor(memory)).toBe(expected);
  });
});
