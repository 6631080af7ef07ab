import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../backend/config.js';

describe('configuration', () => {
  it('has the contract defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      DATA_DIR: './.data',
      HOST: '127.0.0.1',
      PORT: 3000,
      PUBLIC_URL: 'http://localhost:3000',
      WORKER: 'inline',
      TRUSTED_PROXIES: 'loopback',
      META_GRAPH_URL: 'https://graph.facebook.com',
      TIKTOK_API_URL: 'https://business-api.tiktok.com',
      SNAPCHAT_API_URL: 'https://tr.snapchat.com',
      GOOGLE_ADS_API_URL: 'https://googleads.googleapis.com',
      GOOGLE_DATA_MANAGER_URL: 'https://datamanager.googleapis.com',
      TELEGRAM_API_URL: 'https://api.telegram.org',
      LOG_LEVEL: 'info',
    });
    expect(c.DATABASE_URL).toBeUndefined();
    expect(c.META_API_VERSION).toMatch(/^v\d+\.0$/);
    expect(c.DELIVERY_STALL_SECONDS).toBe(120);
    expect(c.METRICS_TOKEN).toBeUndefined();
  });

  it('takes DELIVERY_STALL_SECONDS and METRICS_TOKEN (an empty token is no token)', () => {
    expect(loadConfig({ DELIVERY_STALL_SECONDS: '300' }).DELIVERY_STALL_SECONDS).toBe(300);
    expect(loadConfig({ METRICS_TOKEN: 'prometheus-scrape-token' }).METRICS_TOKEN).toBe(
      'prometheus-scrape-token',
    );
    expect(loadConfig({ METRICS_TOKEN: '' }).METRICS_TOKEN).toBeUndefined();
  });

  it('derives PUBLIC_URL from PORT and strips trailing slashes from URLs', () => {
    expect(loadConfig({ PORT: '8081' }).PUBLIC_URL).toBe('http://localhost:8081');
    expect(loadConfig({ PUBLIC_URL: 'https://t.example.com/' }).PUBLIC_URL).toBe('https://t.example.com');
    expect(loadConfig({ TELEGRAM_API_URL: 'http://127.0.0.1:9/' }).TELEGRAM_API_URL).toBe(
      'http://127.0.0.1:9',
    );
  });

  it.each([
    [{ PORT: 'abc' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ WORKER: 'sometimes' }, 'WORKER'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ PUBLIC_URL: 'not a url' }, 'PUBLIC_URL'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ SECRET_KEY: 'short' }, 'SECRET_KEY'],
    [{ META_API_VERSION: '21' }, 'META_API_VERSION'],
    [{ GOOGLE_ADS_AD_USER_DATA_CONSENT: 'yes' }, 'GOOGLE_ADS_AD_USER_DATA_CONSENT'],
    [{ ADMIN_TOKEN: 'tiny' }, 'ADMIN_TOKEN'],
    [{ DELIVERY_STALL_SECONDS: '0' }, 'DELIVERY_STALL_SECONDS'],
    [{ DELIVERY_STALL_SECONDS: 'soon' }, 'DELIVERY_STALL_SECONDS'],
    [{ DELIVERY_STALL_SECONDS: '1.5' }, 'DELIVERY_STALL_SECONDS'],
    [{ METRICS_TOKEN: 'short' }, 'METRICS_TOKEN'],
    // A bearer token holds no spaces: such a token could never be sent, and /metrics would refuse Prometheus for good.
    [{ METRICS_TOKEN: 'my metrics token with spaces' }, 'METRICS_TOKEN'],
    [{ METRICS_TOKEN: '                    ' }, 'METRICS_TOKEN'],
    [{ METRICS_TOKEN: 'prometheus-scrape-token\n' }, 'METRICS_TOKEN'],
  ])('refuses %o with a message naming the variable', (env, name) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(new RegExp(`${name}:`));
  });

  it('lists every bad variable at once', () => {
    try {
      loadConfig({ PORT: 'x', WORKER: 'y' });
      expect.unreachable();
    } catch (err) {
      expect((err as Error).message).toMatch(/PORT:.*\n.*WORKER:/s);
    }
  });
});
