// pixel add for each platform: public ids in clear, credentials sealed with SECRET_KEY.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox, parseSecretKey } from '../../backend/crypto/secret-box.js';
import { SECRET_KEY_HEX, cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
let siteId: string;
let websiteId: string;
const box = createSecretBox(parseSecretKey(SECRET_KEY_HEX));

beforeAll(async () => {
  w = await cliWorld();
  const { accountId } = await w.ok('account', 'create', '--name', 'Pixels');
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

async function pixelRow(id: string) {
  const { rows } = await w.db.pool.query(
    'SELECT site_id, platform, public_config, secrets_enc, test_event_code, active FROM pixels WHERE id = $1',
    [id],
  );
  return rows[0];
}

describe('pixel add', () => {
  it('meta: {"pixelId"}; pixel id and test code in clear, the access token sealed', async () => {
    const token = 'EAAGmetaAccessToken1234567890';
    const out = await w.ok(
      'pixel',
      'add',
      '--site',
      siteId,
      '--platform',
      'meta',
      '--pixel-id',
      '123456789012345',
      '--access-token',
      token,
      '--test-event-code',
      'TEST123',
    );
    expect(Object.keys(out)).toEqual(['pixelId']);
    const row = await pixelRow(out.pixelId);
    expect(row).toMatchObject({
      site_id: siteId,
      platform: 'meta',
      public_config: { pixelId: '123456789012345' },
      test_event_code: 'TEST123',
      active: true,
    });
    expect(row.secrets_enc).not.toContain(token);
    expect(JSON.parse(box.open(row.secrets_enc))).toEqual({ accessToken: token });
  });

  it('tiktok (by websiteId): pixel code and test code', async () => {
    const token = 'tiktok-access-token-abcdef';
    const out = await w.ok(
      'pixel',
      'add',
      '--site',
      websiteId,
      '--platform',
      'tiktok',
      '--pixel-code',
      'C4ABCDEF123',
      '--access-token',
      token,
      '--test-event-code',
      'TEST9',
    );
    const row = await pixelRow(out.pixelId);
    expect(row).toMatchObject({
      site_id: siteId,
      platform: 'tiktok',
      public_config: { pixelCode: 'C4ABCDEF123' },
      test_event_code: 'TEST9',
    });
    expect(JSON.parse(box.open(row.secrets_enc))).toEqual({ accessToken: token });
  });

  it('snapchat: pixel id', async () => {
    const token = 'snap-conversions-token-xyz';
    const out = await w.ok(
      'pixel',
      'add',
      '--site',
      siteId,
      '--platform',
      'snapchat',
      '--pixel-id',
      'a1b2c3d4-e5f6',
      '--access-token',
      token,
    );
    const row = await pixelRow(out.pixelId);
    expect(row).toMatchObject({
      platform: 'snapchat',
      public_config: { pixelId: 'a1b2c3d4-e5f6' },
      test_event_code: null,
    });
    expect(JSON.parse(box.open(row.secrets_enc))).toEqual({ accessToken: token });
  });

  it('google: customer id without dashes, conversion action from a resource name, two sealed tokens', async () => {
    const out = await w.ok(
      'pixel',
      'add',
      '--site',
      siteId,
      '--platform',
      'google',
      '--customer-id',
      '123-456-7890',
      '--conversion-action',
      'Purchase=customers/1234567890/conversionActions/987654',
      '--conversion-action',
      'Custom:Demo call=42',
      '--api',
      'ads',
      '--developer-token',
      'dev-token-google-1',
      '--oauth-token',
      'ya29.oauth-token-google',
      '--login-customer-id',
      '111-222-3333',
    );
    const row = await pixelRow(out.pixelId);
    expect(row).toMatchObject({
      platform: 'google',
      public_config: {
        customerId: '1234567890',
        conversionActions: { Purchase: '987654', 'Custom:Demo call': '42' },
        loginCustomerId: '1112223333',
      },
    });
    expect(JSON.parse(box.open(row.secrets_enc))).toEqual({
      developerToken: 'dev-token-google-1',
      oauthToken: 'ya29.oauth-token-google',
    });
  });

  it('the human summary names the platform and never the token', async () => {
    const r = await w.run(
      'pixel',
      'add',
      '--site',
      siteId,
      '--platform',
      'meta',
      '--pixel-id',
      '99999',
      '--access-token',
      'human-token-secret',
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Pixel added: [0-9a-f-]{36} \(meta\)\n$/);
    expect(r.stdout + r.stderr).not.toContain('human-token-secret');
  });

  it('refuses malformed ids and tokens naming the flag, and an unknown site; nothing is written', async () => {
    const before = (await w.db.pool.query('SELECT count(*)::int AS n FROM pixels')).rows[0].n;
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        siteId,
        '--platform',
        'meta',
        '--pixel-id',
        'px-1',
        '--access-token',
        'tokentoken',
      ),
    ).toBe('error: --pixel-id: Meta pixel id must be 5–20 digits\n');
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        siteId,
        '--platform',
        'meta',
        '--pixel-id',
        '12345',
        '--access-token',
        'short',
      ),
    ).toBe('error: --access-token: looks too short\n');
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        siteId,
        '--platform',
        'tiktok',
        '--pixel-code',
        'a b',
        '--access-token',
        'tokentoken',
      ),
    ).toBe('error: --pixel-code: TikTok pixel code must be 3–64 letters, digits, _ or -\n');
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        siteId,
        '--platform',
        'google',
        '--customer-id',
        '123',
        '--conversion-action',
        'x',
        '--api',
        'ads',
        '--developer-token',
        'devtokentoken',
        '--oauth-token',
        'oauthtokentoken',
      ),
    ).toBe(
      'error: --customer-id: Google customer id must be 10 digits; --conversion-action: conversion action must be 1–20 digits or customers/<10-digit customer id>/conversionActions/<1–20 digits>\n',
    );
    const google = [
      'pixel',
      'add',
      '--site',
      siteId,
      '--platform',
      'google',
      '--customer-id',
      '1234567890',
      '--api',
      'ads',
      '--developer-token',
      'devtokentoken',
      '--oauth-token',
      'oauthtokentoken',
    ];
    expect(await w.refused(...google, '--conversion-action', 'PageView=1')).toBe(
      'error: --conversion-action: PageView is not uploaded to Google Ads\n',
    );
    expect(await w.refused(...google, '--conversion-action', 'Join=1')).toBe(
      'error: --conversion-action: "Join" is not an event type: use Contact, Lead, Purchase, CompleteRegistration, Subscribe, Custom, Custom:<name> or *\n',
    );
    expect(await w.refused(...google, '--conversion-action', 'Lead=1', '--conversion-action', 'Lead=2')).toBe(
      'error: --conversion-action: Lead is mapped twice\n',
    );
    // A resource name of another customer's action would upload to the wrong account's action id.
    expect(
      await w.refused(...google, '--conversion-action', 'Lead=customers/9999999999/conversionActions/5'),
    ).toBe(
      "error: --conversion-action Lead=customers/9999999999/conversionActions/5: the action belongs to customer 9999999999, not to this pixel's customer 1234567890\n",
    );
    expect(await w.refused(...google, '--conversion-action', 'Custom:=1')).toBe(
      'error: --conversion-action: "Custom:": a custom event name must be 1–100 characters\n',
    );
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        'ws_unknown',
        '--platform',
        'meta',
        '--pixel-id',
        '12345',
        '--access-token',
        'tokentoken',
      ),
    ).toBe('error: site ws_unknown does not exist\n');
    expect((await w.db.pool.query('SELECT count(*)::int AS n FROM pixels')).rows[0].n).toBe(before);
  });

  it('a refusal states the rule the value breaks, not just its kind', async () => {
    const before = (await w.db.pool.query('SELECT count(*)::int AS n FROM pixels')).rows[0].n;
    // Digits, but too few: "must be digits" would be no help here.
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        siteId,
        '--platform',
        'meta',
        '--pixel-id',
        '123',
        '--access-token',
        'tokentoken',
      ),
    ).toBe('error: --pixel-id: Meta pixel id must be 5–20 digits\n');
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        siteId,
        '--platform',
        'meta',
        '--pixel-id',
        '123456789012345678901',
        '--access-token',
        'tokentoken',
      ),
    ).toBe('error: --pixel-id: Meta pixel id must be 5–20 digits\n');
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        siteId,
        '--platform',
        'meta',
        '--pixel-id',
        '12345',
        '--access-token',
        'tokentoken',
        '--test-event-code',
        'TEST 1',
      ),
    ).toBe('error: --test-event-code: test event code must be 1–64 letters, digits, _ or -\n');
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        siteId,
        '--platform',
        'snapchat',
        '--pixel-id',
        'ab',
        '--access-token',
        'tokentoken',
      ),
    ).toBe('error: --pixel-id: Snap pixel id must be 3–64 letters, digits, _ or -\n');
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        siteId,
        '--platform',
        'google',
        '--customer-id',
        '1234567890',
        '--conversion-action',
        '987654',
        '--api',
        'ads',
        '--developer-token',
        'devtokentoken',
        '--oauth-token',
        'oauthtokentoken',
        '--login-customer-id',
        '123',
      ),
    ).toBe('error: --login-customer-id: Google login customer id must be 10 digits\n');
    expect((await w.db.pool.query('SELECT count(*)::int AS n FROM pixels')).rows[0].n).toBe(before);
  });
});
