import { describe, expect, it } from 'vitest';
import { call } from './client.js';
import { startFakes } from './index.js';

describe('startFakes', () => {
  it('starts all six on distinct loopback ports, exposes the env, and closes them all', async () => {
    const fakes = await startFakes({ meta: { accessTokens: ['t1'] } });
    // The fakes live on loopback: the outbound rule must let Capigram reach them.
    const { OUTBOUND_ALLOW_PRIVATE, ...urlEnv } = fakes.env;
    expect(OUTBOUND_ALLOW_PRIVATE).toBe('1');
    const urls = Object.values(urlEnv);
    expect(Object.keys(urlEnv).sort()).toEqual([
      'GOOGLE_ADS_API_URL',
      'GOOGLE_DATA_MANAGER_URL',
      'GOOGLE_OAUTH_URL',
      'META_GRAPH_URL',
      'SNAPCHAT_API_URL',
      'TELEGRAM_API_URL',
      'TIKTOK_API_URL',
    ]);
    expect(urls.every((u) => /^http:\/\/127\.0\.0\.1:\d+$/.test(u))).toBe(true);
    expect(new Set(urls).size).toBe(6);
    expect(fakes.env.GOOGLE_DATA_MANAGER_URL).toBe(fakes.googleDataManager.url);
    expect(fakes.env.META_GRAPH_URL).toBe(fakes.meta.url);
    // Google's token endpoint is served by the fake Google itself.
    expect(fakes.env.GOOGLE_OAUTH_URL).toBe(fakes.google.url);
    expect([...fakes.meta.accessTokens]).toEqual(['t1']);

    await call(`${fakes.env.TELEGRAM_API_URL}/bot1:x/getMe`);
    expect(fakes.telegram.received).toHaveLength(1);
    fakes.resetAll();
    expect(fakes.telegram.received).toHaveLength(0);

    await fakes.closeAll();
    await expect(call(`${fakes.env.TIKTOK_API_URL}/open_api/v1.3/event/track/`)).rejects.toThrow(
      /fetch failed/,
    );
  });
});
