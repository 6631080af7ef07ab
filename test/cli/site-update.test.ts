// site update: the dedup window and the domains, normalised as at creation; a site keeps one domain.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
let siteId: string;
let websiteId: string;

beforeAll(async () => {
  w = await cliWorld();
  const { accountId } = await w.ok('account', 'create', '--name', 'Sites');
  ({ siteId, websiteId } = await w.ok(
    'site',
    'create',
    '--account',
    accountId,
    '--name',
    'Shop',
    '--domain',
    'shop.example.com',
  ));
});
afterAll(async () => {
  await w.close();
});

async function row() {
  return (await w.db.pool.query('SELECT domains, dedup_window_seconds FROM sites WHERE id = $1', [siteId]))
    .rows[0];
}

describe('site update', () => {
  it('sets the dedup window and adds domains (normalised, no duplicates), by websiteId', async () => {
    const out = await w.ok(
      'site',
      'update',
      '--site',
      websiteId,
      '--dedup-window-seconds',
      '3600',
      '--add-domain',
      'https://News.Example.com/path',
      '--add-domain',
      'shop.example.com',
      '--add-domain',
      'bücher.example',
    );
    expect(out).toEqual({
      siteId,
      domains: ['shop.example.com', 'news.example.com', 'xn--bcher-kva.example'],
      dedupWindowSeconds: 3600,
      googleAdUserData: null,
      defaultCountry: null,
      telegramActionSource: 'website',
      url: null,
      consentMode: 'implied',
      limitedDataUse: false,
    });
    expect(await row()).toEqual({ domains: out.domains, dedup_window_seconds: 3600 });
  });

  it('removes a domain and keeps the window; 0 turns dedup off; the human summary lists both', async () => {
    expect(await w.ok('site', 'update', '--site', siteId, '--remove-domain', 'NEWS.example.com')).toEqual({
      siteId,
      domains: ['shop.example.com', 'xn--bcher-kva.example'],
      dedupWindowSeconds: 3600,
      googleAdUserData: null,
      defaultCountry: null,
      telegramActionSource: 'website',
      url: null,
      consentMode: 'implied',
      limitedDataUse: false,
    });
    const r = await w.run('site', 'update', '--site', siteId, '--dedup-window-seconds', '0');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(
      `Site updated: ${siteId}\n  domains: shop.example.com, xn--bcher-kva.example\n  dedup window: 0 s\n  default country: none\n  Telegram joins reported as: website\n`,
    );
    expect((await row()).dedup_window_seconds).toBe(0);
  });

  it('swaps the last domain in one command, but never leaves a site without one', async () => {
    await w.ok('site', 'update', '--site', siteId, '--remove-domain', 'xn--bcher-kva.example');
    const before = await row();
    expect(await w.refused('site', 'update', '--site', siteId, '--remove-domain', 'shop.example.com')).toBe(
      'error: --remove-domain: a site keeps at least one domain: add its replacement in the same command\n',
    );
    expect(await row()).toEqual(before);
    expect(
      await w.ok(
        'site',
        'update',
        '--site',
        siteId,
        '--remove-domain',
        'shop.example.com',
        '--add-domain',
        'store.example.com',
      ),
    ).toMatchObject({
      domains: ['store.example.com'],
    });
  });

  it('refuses bad input naming the flag, an unknown site and nothing to change; nothing is written', async () => {
    const before = await row();
    expect(await w.refused('site', 'update', '--site', siteId, '--remove-domain', 'other.example.com')).toBe(
      "error: --remove-domain: other.example.com is not one of the site's domains (store.example.com)\n",
    );
    expect(
      await w.refused(
        'site',
        'update',
        '--site',
        siteId,
        '--add-domain',
        'a.example.com',
        '--remove-domain',
        'a.example.com',
      ),
    ).toBe('error: --remove-domain: a.example.com is both added and removed\n');
    expect(await w.refused('site', 'update', '--site', siteId, '--dedup-window-seconds', '-1')).toBe(
      'error: --dedup-window-seconds: must be 0 or more\n',
    );
    expect(await w.refused('site', 'update', '--site', siteId, '--dedup-window-seconds', '7776001')).toBe(
      'error: --dedup-window-seconds: must be at most 7776000 (90 days)\n',
    );
    expect(await w.refused('site', 'update', '--site', siteId, '--dedup-window-seconds', '1.5')).toMatch(
      /^error: --dedup-window-seconds must be an integer/,
    );
    expect(await w.refused('site', 'update', '--site', siteId, '--add-domain', 'not a domain')).toBe(
      'error: --add-domain: "not a domain" is not a valid domain name\n',
    );
    expect(await w.refused('site', 'update', '--site', siteId)).toMatch(
      /^error: nothing to change: give --dedup-window-seconds, --add-domain, --remove-domain, --google-ad-user-data, --default-country, --telegram-action-source or --url/,
    );
    expect(await w.refused('site', 'update', '--site', siteId, '--url', 'ftp://shop.example.com/')).toBe(
      'error: --url: must be an http(s) URL\n',
    );
    expect(await w.refused('site', 'update', '--site', siteId, '--google-ad-user-data', 'yes')).toBe(
      'error: --google-ad-user-data: must be granted, denied or default\n',
    );
    expect(await w.refused('site', 'update', '--site', 'ws_unknown', '--dedup-window-seconds', '10')).toBe(
      'error: site ws_unknown does not exist\n',
    );
    expect(await row()).toEqual(before);
  });

  it("sets the site's Google consent for ad user data, and back to the configured default", async () => {
    const r = await w.run('site', 'update', '--site', siteId, '--google-ad-user-data', 'denied');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /\n {2}Google ad user data consent: denied\n {2}default country: none\n {2}Telegram joins reported as: website\n$/,
    );
    expect(
      (await w.db.pool.query('SELECT google_ad_user_data FROM sites WHERE id = $1', [siteId])).rows[0]
        .google_ad_user_data,
    ).toBe('DENIED');
    expect(await w.ok('site', 'update', '--site', siteId, '--google-ad-user-data', 'default')).toMatchObject({
      googleAdUserData: null,
    });
    const { accountId } = await w.ok('account', 'create', '--name', 'Consent');
    const created = await w.ok(
      'site',
      'create',
      '--account',
      accountId,
      '--name',
      'EU shop',
      '--domain',
      'eu.example.com',
      '--google-ad-user-data',
      'granted',
    );
    expect(
      (await w.db.pool.query('SELECT google_ad_user_data FROM sites WHERE id = $1', [created.siteId])).rows[0]
        .google_ad_user_data,
    ).toBe('GRANTED');
  });

  it("sets the site's URL, which /r/ clicks report as their page", async () => {
    const out = await w.ok('site', 'update', '--site', siteId, '--url', 'https://www.shop.example/start');
    expect(out).toMatchObject({ siteId, url: 'https://www.shop.example/start' });
    expect((await w.db.pool.query('SELECT url FROM sites WHERE id = $1', [siteId])).rows[0].url).toBe(
      'https://www.shop.example/start',
    );
    // Another change keeps it.
    expect(await w.ok('site', 'update', '--site', siteId, '--dedup-window-seconds', '60')).toMatchObject({
      url: 'https://www.shop.example/start',
    });
  });

  it('refuses more than 50 domains', async () => {
    const many = Array.from({ length: 50 }, (_, i) => ['--add-domain', `d${i}.example.com`]).flat();
    expect(await w.refused('site', 'update', '--site', siteId, ...many)).toBe(
      'error: --add-domain: a site has at most 50 domains\n',
    );
  });

  it('sets the consent mode and limited data use, and refuses values it does not know', async () => {
    const out = await w.ok(
      'site',
      'update',
      '--site',
      siteId,
      '--consent',
      'required',
      '--limited-data-use',
      'on',
    );
    expect(out).toMatchObject({ siteId, consentMode: 'required', limitedDataUse: true });
    const stored = await w.db.pool.query('SELECT consent_mode, limited_data_use FROM sites WHERE id = $1', [
      siteId,
    ]);
    expect(stored.rows[0]).toEqual({ consent_mode: 'required', limited_data_use: true });
    const back = await w.ok('site', 'update', '--site', siteId, '--limited-data-use', 'off');
    expect(back).toMatchObject({ consentMode: 'required', limitedDataUse: false });
    await w.ok('site', 'update', '--site', siteId, '--consent', 'implied');
    expect(await w.refused('site', 'update', '--site', siteId, '--consent', 'maybe')).toMatch(
      /implied or required/,
    );
    expect(await w.refused('site', 'update', '--site', siteId, '--limited-data-use', 'yes')).toMatch(
      /on or off/,
    );
  });
});
