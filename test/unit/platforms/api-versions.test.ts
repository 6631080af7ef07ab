import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../backend/config.js';
import { openRuntime } from '../../../backend/runtime.js';
import {
  type API_VERSIONS,
  DEFAULT_API_VERSIONS,
  daysToSunset,
  knownVersion,
  newestVersion,
  sunsetProblem,
} from '../../../backend/platforms/api-versions.js';

const TODAY = new Date();

describe('platform API versions', () => {
  it.each(Object.entries(DEFAULT_API_VERSIONS))(
    'the %s default (%s) is known and more than 60 days from its sunset',
    (platform, version) => {
      const known = knownVersion(platform as keyof typeof API_VERSIONS, version);
      expect(known).toBeDefined();
      const days = daysToSunset(known!, TODAY);
      // Time to release a new default before the platform turns the old one off.
      if (days !== undefined)
        expect(days, `${platform} ${version} sunsets on ${known!.sunset}`).toBeGreaterThan(60);
    },
  );

  it('refuses at start a configured version past its sunset, naming the date and the newest known version', () => {
    const now = new Date('2026-11-25T12:00:00Z');
    expect(() => loadConfig({ GOOGLE_ADS_API_VERSION: 'v21' }, now)).toThrow(ConfigError);
    expect(() => loadConfig({ GOOGLE_ADS_API_VERSION: 'v21' }, now)).toThrow(
      /GOOGLE_ADS_API_VERSION: Google Ads API v21 was sunset on 2026-08-05 .*use v26 \(the newest known\)/,
    );
    expect(() => loadConfig({ GOOGLE_ADS_API_VERSION: 'v22' }, now)).toThrow(/v22 was sunset on 2026-10-07/);
    // The Conversions API is a Marketing API endpoint: its v24.0 ended on 2026-11-10 (the Graph API's lasts until 2028).
    expect(() => loadConfig({ META_API_VERSION: 'v24.0' }, now)).toThrow(
      /META_API_VERSION: Meta Marketing API v24\.0 was sunset on 2026-11-10 .*use v27\.0/,
    );
    expect(loadConfig({ META_API_VERSION: 'v25.0' }, now).META_API_VERSION).toBe('v25.0');
    expect(() => loadConfig({ META_API_VERSION: 'v25.0' }, new Date('2027-02-23T00:00:00Z'))).toThrow(
      /v25\.0 was sunset on 2027-02-23/,
    );
    expect(() => loadConfig({ META_API_VERSION: 'v21.0' }, now)).toThrow(
      /Meta Marketing API v21\.0 is older than v24\.0/,
    );
    expect(loadConfig({ META_API_VERSION: 'v24.0' }, new Date('2026-11-09T12:00:00Z')).META_API_VERSION).toBe(
      'v24.0',
    );
    expect(() => loadConfig({ GOOGLE_ADS_API_VERSION: 'v12' }, now)).toThrow(/older than v19/);
    // The day before the sunset it still works; a version newer than the table is let through.
    expect(
      loadConfig({ GOOGLE_ADS_API_VERSION: 'v22' }, new Date('2026-10-06T23:59:59Z')).GOOGLE_ADS_API_VERSION,
    ).toBe('v22');
    expect(
      loadConfig({ GOOGLE_ADS_API_VERSION: 'v27', META_API_VERSION: 'v27.0' }, now).GOOGLE_ADS_API_VERSION,
    ).toBe('v27');
  });

  it('the process refuses to start with a sunset version, before opening anything', async () => {
    await expect(
      openRuntime({ env: { GOOGLE_ADS_API_VERSION: 'v21', DATA_DIR: '/nonexistent/capigram' } }),
    ).rejects.toThrow(/GOOGLE_ADS_API_VERSION: Google Ads API v21 was sunset on 2026-08-05/);
  });

  it('defaults to the supported versions', () => {
    const c = loadConfig({}, new Date('2026-11-25T12:00:00Z'));
    expect(c.GOOGLE_ADS_API_VERSION).toBe('v25');
    expect(c.META_API_VERSION).toBe('v26.0');
  });

  it('orders versions by number, not as text', () => {
    expect(newestVersion('google').version).toBe('v26');
    expect(newestVersion('meta').version).toBe('v27.0');
    expect(sunsetProblem('meta', 'v9.0', new Date('2026-11-25'))).toMatch(/older than v24\.0/);
  });
});
