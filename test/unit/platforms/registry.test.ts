import { describe, expect, it } from 'vitest';
import {
  adapters,
  parseRetryAfterMs,
  pixelConfigSchema,
  PLATFORMS,
} from '../../../backend/platforms/index.js';

const DAY = 24 * 60 * 60 * 1000;

describe('adapters registry', () => {
  it.each([
    ['meta', 1000, 7 * DAY],
    ['tiktok', 1000, 7 * DAY],
    ['snapchat', 2000, 37 * DAY],
    ['google', 2000, 90 * DAY],
  ] as const)('%s: batches of %i, events up to %i ms old', (platform, maxBatch, maxEventAgeMs) => {
    const a = adapters[platform];
    expect(a.platform).toBe(platform);
    expect(a.maxBatch).toBe(maxBatch);
    expect(a.maxEventAgeMs).toBe(maxEventAgeMs);
  });

  it('has exactly one adapter per platform', () => {
    expect(Object.keys(adapters).sort()).toEqual([...PLATFORMS].sort());
  });

  it('re-exports the Retry-After parser', () => {
    expect(parseRetryAfterMs('2', 0)).toBe(2000);
  });
});

describe('pixelConfigSchema', () => {
  it.each([
    [{ platform: 'meta', pixelId: '1', accessToken: 't', testEventCode: 'TEST1' }],
    [{ platform: 'tiktok', pixelCode: 'C1', accessToken: 't' }],
    [{ platform: 'snapchat', pixelId: 's', accessToken: 't' }],
    [
      {
        platform: 'google',
        customerId: '123-456-7890',
        conversionActions: { '*': '9', Purchase: '10' },
        developerToken: 'd',
        oauthToken: 'o',
        loginCustomerId: null,
      },
    ],
  ])('accepts %j', (config) => {
    expect(pixelConfigSchema.parse(config)).toEqual(config);
  });

  it.each([
    [{ platform: 'meta', pixelId: '', accessToken: 't' }],
    [{ platform: 'meta', pixelId: '1' }],
    [{ platform: 'tiktok', pixelId: '1', accessToken: 't' }],
    [{ platform: 'bing', pixelId: '1', accessToken: 't' }],
    [{ platform: 'google', customerId: '1', conversionActions: { '*': '9' }, developerToken: 'd' }],
    [{ platform: 'google', customerId: '1', conversionActions: {}, developerToken: 'd', oauthToken: 'o' }],
  ])('rejects %j', (config) => {
    expect(pixelConfigSchema.safeParse(config).success).toBe(false);
  });
});
