// Google pixels with refresh credentials, and looking after pixels once added: update (credentials
// sealed again), deactivate/activate (no new sends while off), list (never a secret).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox, parseSecretKey } from '../../backend/crypto/secret-box.js';
import { createVisit } from '../delivery/support.js';
import { SECRET_KEY_HEX, cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
let siteId: string;
let _websiteId: string;
const box = createSecretBox(parseSecretKey(SECRET_KEY_HEX));

const GOOGLE = [
  '--platform',
  'google',
  '--customer-id',
  '123-456-7890',
  '--conversion-action',
  'Subscribe=987654',
  '--api',
  'ads',
  '--developer-token',
  'dev-token-maint-1',
];
const REFRESH = [
  '--refresh-token',
  '1//refresh-token-maint-1',
  '--client-id',
  '123-abc.apps.googleusercontent.com',
  '--client-secret',
  'GOCSPX-client-secret-1',
];
/** Every secret given to the CLI in this file: none may be found in clear in any table. */
const SECRETS = [
  'dev-token-maint-1',
  '1//refresh-token-maint-1',
  'GOCSPX-client-secret-1',
  'ya29.oauth-maint-1',
  'ya29.oauth-maint-2',
  'meta-token-maint-1',
  'meta-token-maint-2',
  '1//refresh-token-maint-2',
  'dev-token-maint-2',
  'GOCSPX-client-secret-2',
];

beforeAll(async () => {
  w = await cliWorld();
  const { accountId } = await w.ok('account', 'create', '--name', 'Maintenance');
  ({ siteId, _websiteId } = await w.ok(
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

async function secretsOf(pixelId: string): Promise<Record<string, string>> {
  const { rows } = await w.db.pool.query('SELECT secrets_enc FROM pixels WHERE id = $1', [pixelId]);
  return JSON.parse(box.open(rows[0].secrets_enc));
}

async function pixelRow(pixelId: string) {
  return (
    await w.db.pool.query('SELECT public_config, test_event_code, active FROM pixels WHERE id = $1', [
      pixelId,
    ])
  ).rows[0];
}

/** A site of its own: one destination (here the same Google customer and action) is added once per site. */
async function freshSite(): Promise<string> {
  const { accountId } = await w.ok('account', 'create', '--name', 'Maintenance');
  return (
    await w.ok('site', 'create', '--account', accountId, '--name', 'Shop', '--domain', 'shop.example.com')
  ).siteId as string;
}

async function google(...extra: string[]): Promise<string> {
  return (await w.ok<{ pixelId: string }>('pixel', 'add', '--site', await freshSite(), ...GOOGLE, ...extra))
    .pixelId;
}

describe('Google conversion actions per event type, test mode and IP', () => {
  it('a bare action (the single-action form) maps every event type, with a warning', async () => {
    const r = await w.run(
      'pixel',
      'add',
      '--site',
      siteId,
      ...GOOGLE.slice(0, 4),
      '--conversion-action',
      '555',
      '--api',
      'ads',
      '--developer-token',
      'dev-token-maint-1',
      '--oauth-token',
      'ya29.oauth-maint-1',
      '--json',
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /^warning: a --conversion-action without EVENT= maps every event type to that one action/,
    );
    expect((await pixelRow(r.json().pixelId)).public_config).toEqual({
      customerId: '1234567890',
      api: 'ads',
      conversionActions: { '*': '555' },
    });
  });

  it('update replaces the whole mapping and switches test mode and the IP on and off', async () => {
    const pixelId = await google('--oauth-token', 'ya29.oauth-maint-1', '--validate-only');
    expect((await pixelRow(pixelId)).public_config).toEqual({
      customerId: '1234567890',
      api: 'ads',
      conversionActions: { Subscribe: '987654' },
      validateOnly: true,
    });
    await w.ok(
      'pixel',
      'update',
      '--pixel',
      pixelId,
      '--conversion-action',
      'Purchase=22',
      '--conversion-action',
      'Custom:Demo=33',
      '--no-validate-only',
      '--send-ip-address',
    );
    expect((await pixelRow(pixelId)).public_config).toEqual({
      customerId: '1234567890',
      api: 'ads',
      conversionActions: { Purchase: '22', 'Custom:Demo': '33' },
      sendUserIpAddress: true,
    });
    // The credentials are untouched by a settings-only update.
    expect(await secretsOf(pixelId)).toEqual({
      developerToken: 'dev-token-maint-1',
      oauthToken: 'ya29.oauth-maint-1',
    });
    // Another customer's action, by resource name, is refused against the stored customer.
    expect(
      await w.refused(
        'pixel',
        'update',
        '--pixel',
        pixelId,
        '--conversion-action',
        'Purchase=customers/5555555555/conversionActions/9',
      ),
    ).toMatch(/the action belongs to customer 5555555555, not to this pixel's customer 1234567890/);
    expect((await pixelRow(pixelId)).public_config.conversionActions).toEqual({
      Purchase: '22',
      'Custom:Demo': '33',
    });
    expect(
      await w.refused('pixel', 'update', '--pixel', pixelId, '--validate-only', '--no-validate-only'),
    ).toBe(
      'error: --validate-only and --no-validate-only cannot be given together (see npm run admin -- pixel update --help)\n',
    );
    const meta = (
      await w.ok<{ pixelId: string }>(
        'pixel',
        'add',
        '--site',
        siteId,
        '--platform',
        'meta',
        '--pixel-id',
        '55555',
        '--access-token',
        'meta-token-maint-1',
      )
    ).pixelId;
    expect(await w.refused('pixel', 'update', '--pixel', meta, '--conversion-action', 'Lead=1')).toBe(
      'error: --conversion-action: is not used by a meta pixel\n',
    );
  });
});

describe('a custom event whose name holds "="', () => {
  it('can be mapped as its skip reason says (the action id is what follows the last "=")', async () => {
    const pixelId = await google('--oauth-token', 'ya29.oauth-maint-1');
    // The business API and channels take such names (e.g. a Custom event "plan=pro").
    await w.ok(
      'pixel',
      'update',
      '--pixel',
      pixelId,
      '--conversion-action',
      'Custom:plan=pro=44',
      '--conversion-action',
      'Custom:a = b =45',
    );
    expect((await pixelRow(pixelId)).public_config.conversionActions).toEqual({
      'Custom:plan=pro': '44',
      'Custom:a = b': '45',
    });
    expect(
      await w.refused('pixel', 'update', '--pixel', pixelId, '--conversion-action', 'Custom:plan=pro'),
    ).toBe(
      'error: --conversion-action: conversion action must be 1–20 digits or customers/<10-digit customer id>/conversionActions/<1–20 digits>\n',
    );
  });
});

describe('pixel add --platform google with a refresh token', () => {
  it('seals the refresh token with its client; no access token is needed', async () => {
    const pixelId = await google(...REFRESH);
    expect(await secretsOf(pixelId)).toEqual({
      developerToken: 'dev-token-maint-1',
      refreshToken: '1//refresh-token-maint-1',
      clientId: '123-abc.apps.googleusercontent.com',
      clientSecret: 'GOCSPX-client-secret-1',
    });
    expect((await pixelRow(pixelId)).public_config).toEqual({
      customerId: '1234567890',
      api: 'ads',
      conversionActions: { Subscribe: '987654' },
    });
  });

  it('an --oauth-token given too is not stored, with a warning', async () => {
    const r = await w.run(
      'pixel',
      'add',
      '--site',
      await freshSite(),
      ...GOOGLE,
      ...REFRESH,
      '--oauth-token',
      'ya29.oauth-maint-1',
      '--skip-token-check',
      '--json',
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe(
      'warning: --oauth-token is not stored: with a refresh token, access tokens are fetched as they are needed\n',
    );
    expect(await secretsOf(r.json().pixelId)).not.toHaveProperty('oauthToken');
  });

  it('refuses part of the refresh credentials, or no credential at all; nothing is written', async () => {
    const before = (await w.db.pool.query('SELECT count(*)::int AS n FROM pixels')).rows[0].n;
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        siteId,
        ...GOOGLE,
        '--refresh-token',
        '1//refresh-token-x',
        '--client-id',
        'abc.apps',
      ),
    ).toMatch(/^error: --client-secret is required with --refresh-token, --client-id \(see/);
    expect(await w.refused('pixel', 'add', '--site', siteId, ...GOOGLE)).toMatch(
      /^error: --oauth-token is required with --platform google, unless --refresh-token, --client-id and --client-secret are given/,
    );
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        siteId,
        ...GOOGLE,
        '--refresh-token',
        '1//refresh-token-x',
        '--client-id',
        'bad id!',
        '--client-secret',
        'GOCSPX-client-secret-1',
      ),
    ).toBe('error: --client-id: OAuth client id must be 3–256 letters, digits, ., _ or -\n');
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
        ...REFRESH,
      ),
    ).toMatch(/^error: --refresh-token is not used with --platform meta/);
    expect((await w.db.pool.query('SELECT count(*)::int AS n FROM pixels')).rows[0].n).toBe(before);
  });
});

describe('pixel update', () => {
  it('meta: a new access token and test event code, then the code cleared; answers with the pixel, no secret', async () => {
    const { pixelId } = await w.ok(
      'pixel',
      'add',
      '--site',
      siteId,
      '--platform',
      'meta',
      '--pixel-id',
      '1234567',
      '--access-token',
      'meta-token-maint-1',
    );
    const out = await w.ok(
      'pixel',
      'update',
      '--pixel',
      pixelId,
      '--access-token',
      'meta-token-maint-2',
      '--test-event-code',
      'TEST77',
    );
    expect(out).toEqual({
      pixelId,
      platform: 'meta',
      publicConfig: { pixelId: '1234567' },
      testEventCode: 'TEST77',
      testMode: true,
      active: true,
      createdAt: expect.any(String),
    });
    expect(await secretsOf(pixelId)).toEqual({ accessToken: 'meta-token-maint-2' });
    const cleared = await w.ok('pixel', 'update', '--pixel', pixelId, '--no-test-event-code');
    expect(cleared.testEventCode).toBeNull();
    expect(cleared.testMode).toBe(false);
    expect(await pixelRow(pixelId)).toMatchObject({ test_event_code: null });
    expect(await secretsOf(pixelId)).toEqual({ accessToken: 'meta-token-maint-2' });
  });

  it('google: refresh credentials replace an access token; the refresh token can then be rotated alone', async () => {
    const pixelId = await google('--oauth-token', 'ya29.oauth-maint-2');
    expect(await secretsOf(pixelId)).toEqual({
      developerToken: 'dev-token-maint-1',
      oauthToken: 'ya29.oauth-maint-2',
    });
    await w.ok('pixel', 'update', '--pixel', pixelId, ...REFRESH);
    expect(await secretsOf(pixelId)).toEqual({
      developerToken: 'dev-token-maint-1',
      refreshToken: '1//refresh-token-maint-1',
      clientId: '123-abc.apps.googleusercontent.com',
      clientSecret: 'GOCSPX-client-secret-1',
    });
    const r = await w.run(
      'pixel',
      'update',
      '--pixel',
      pixelId,
      '--refresh-token',
      '1//refresh-token-maint-2',
      '--api',
      'ads',
      '--developer-token',
      'dev-token-maint-2',
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`Pixel updated: ${pixelId} (google)\n`);
    expect(await secretsOf(pixelId)).toEqual({
      developerToken: 'dev-token-maint-2',
      refreshToken: '1//refresh-token-maint-2',
      clientId: '123-abc.apps.googleusercontent.com',
      clientSecret: 'GOCSPX-client-secret-1',
    });
    await w.ok('pixel', 'update', '--pixel', pixelId, '--client-secret', 'GOCSPX-client-secret-2');
    expect((await secretsOf(pixelId)).clientSecret).toBe('GOCSPX-client-secret-2');
  });

  it('refuses flags of another platform, half a switch to refresh credentials, and an access token a refresh token would shadow', async () => {
    const oauthPixel = await google('--oauth-token', 'ya29.oauth-maint-2');
    const refreshPixel = await google(...REFRESH);
    const { pixelId: snap } = await w.ok(
      'pixel',
      'add',
      '--site',
      siteId,
      '--platform',
      'snapchat',
      '--pixel-id',
      'snap-maint',
      '--access-token',
      'meta-token-maint-1',
    );
    const before = await w.db.pool.query('SELECT id, secrets_enc, test_event_code FROM pixels ORDER BY id');

    expect(
      await w.refused('pixel', 'update', '--pixel', oauthPixel, '--access-token', 'meta-token-maint-2'),
    ).toBe('error: --access-token: is not used by a google pixel\n');
    expect(await w.refused('pixel', 'update', '--pixel', snap, '--test-event-code', 'T1')).toBe(
      'error: --test-event-code: is not used by a snapchat pixel\n',
    );
    expect(await w.refused('pixel', 'update', '--pixel', snap, '--no-test-event-code')).toBe(
      'error: --test-event-code: is not used by a snapchat pixel\n',
    );
    expect(
      await w.refused('pixel', 'update', '--pixel', snap, '--developer-token', 'dev-token-maint-2'),
    ).toBe('error: --developer-token: is not used by a snapchat pixel\n');
    expect(
      await w.refused(
        'pixel',
        'update',
        '--pixel',
        oauthPixel,
        '--refresh-token',
        '1//refresh-token-maint-2',
      ),
    ).toBe('error: --client-id is required: the pixel has no OAuth client id yet\n');
    expect(
      await w.refused('pixel', 'update', '--pixel', refreshPixel, '--oauth-token', 'ya29.oauth-maint-1'),
    ).toBe(
      'error: this pixel fetches its access tokens with a refresh token, so --oauth-token would not be used; give --refresh-token to replace it\n',
    );
    expect(
      await w.db.pool.query('SELECT id, secrets_enc, test_event_code FROM pixels ORDER BY id'),
    ).toMatchObject({ rows: before.rows });
  });

  it('refuses a malformed or unknown pixel, nothing to change, and contradictory flags', async () => {
    expect(
      await w.refused('pixel', 'update', '--pixel', 'nope', '--access-token', 'meta-token-maint-2'),
    ).toBe('error: --pixel: must be a UUID\n');
    expect(
      await w.refused(
        'pixel',
        'update',
        '--pixel',
        '00000000-0000-4000-8000-000000000000',
        '--access-token',
        'meta-token-maint-2',
      ),
    ).toBe('error: pixel 00000000-0000-4000-8000-000000000000 does not exist\n');
    expect(await w.refused('pixel', 'update', '--pixel', '00000000-0000-4000-8000-000000000000')).toMatch(
      /^error: nothing to change/,
    );
    expect(
      await w.refused(
        'pixel',
        'update',
        '--pixel',
        '00000000-0000-4000-8000-000000000000',
        '--test-event-code',
        'T',
        '--no-test-event-code',
      ),
    ).toMatch(/^error: --test-event-code and --no-test-event-code cannot be given together/);
    expect(
      await w.refused(
        'pixel',
        'update',
        '--pixel',
        '00000000-0000-4000-8000-000000000000',
        '--access-token',
        'short',
      ),
    ).toBe('error: --access-token: looks too short\n');
  });
});

describe('pixel deactivate / activate', () => {
  it('an inactive pixel gets no new sends; activated again, it does', async () => {
    const { accountId } = await w.ok('account', 'create', '--name', 'Switch');
    const site = await w.ok<{ siteId: string }>(
      'site',
      'create',
      '--account',
      accountId,
      '--name',
      'S',
      '--domain',
      'switch.example.com',
    );
    const { pixelId: on } = await w.ok(
      'pixel',
      'add',
      '--site',
      site.siteId,
      '--platform',
      'meta',
      '--pixel-id',
      '111111',
      '--access-token',
      'meta-token-maint-1',
    );
    const { pixelId: off } = await w.ok(
      'pixel',
      'add',
      '--site',
      site.siteId,
      '--platform',
      'tiktok',
      '--pixel-code',
      'CSWITCH1',
      '--access-token',
      'meta-token-maint-1',
    );

    expect(await w.ok('pixel', 'deactivate', '--pixel', off)).toEqual({ pixelId: off, active: false });
    expect(await w.ok('pixel', 'deactivate', '--pixel', off)).toEqual({ pixelId: off, active: false });
    const sendsOf = async (visitId: string) =>
      (
        await w.db.pool.query<{ pixel_id: string }>('SELECT pixel_id FROM sends WHERE visit_id = $1', [
          visitId,
        ])
      ).rows.map((r) => r.pixel_id);
    expect(await sendsOf(await createVisit(w.db.pool, site.siteId, {}, true))).toEqual([on]);

    const r = await w.run('pixel', 'activate', '--pixel', off);
    expect(r.stdout).toBe(`Pixel activated: ${off} (tiktok)\n`);
    expect((await sendsOf(await createVisit(w.db.pool, site.siteId, {}, true))).sort()).toEqual(
      [on, off].sort(),
    );
  });

  it('refuses an unknown or malformed pixel', async () => {
    expect(await w.refused('pixel', 'deactivate', '--pixel', '00000000-0000-4000-8000-000000000000')).toBe(
      'error: pixel 00000000-0000-4000-8000-000000000000 does not exist\n',
    );
    expect(await w.refused('pixel', 'activate', '--pixel', 'x')).toBe('error: --pixel: must be a UUID\n');
    expect(await w.refused('pixel', 'activate')).toMatch(/^error: --pixel is required/);
  });
});

describe('pixel list', () => {
  it("lists the site's pixels oldest first, active or not, by either site id; never a secret", async () => {
    const { accountId } = await w.ok('account', 'create', '--name', 'Lister');
    const site = await w.ok<{ siteId: string; websiteId: string }>(
      'site',
      'create',
      '--account',
      accountId,
      '--name',
      'L',
      '--domain',
      'list.example.com',
    );
    expect(await w.ok('pixel', 'list', '--site', site.siteId)).toEqual({ pixels: [] });
    const { pixelId: meta } = await w.ok(
      'pixel',
      'add',
      '--site',
      site.siteId,
      '--platform',
      'meta',
      '--pixel-id',
      '222222',
      '--access-token',
      'meta-token-maint-1',
      '--test-event-code',
      'TEST1',
    );
    const { pixelId: g } = await w.ok('pixel', 'add', '--site', site.siteId, ...GOOGLE, ...REFRESH);
    await w.ok('pixel', 'deactivate', '--pixel', meta);

    const out = await w.ok('pixel', 'list', '--site', site.websiteId);
    expect(out.pixels.map((p: Record<string, unknown>) => Object.keys(p))).toEqual([
      ['pixelId', 'platform', 'publicConfig', 'testEventCode', 'testMode', 'active', 'createdAt'],
      ['pixelId', 'platform', 'publicConfig', 'testEventCode', 'testMode', 'active', 'createdAt'],
    ]);
    expect(out.pixels).toMatchObject([
      {
        pixelId: meta,
        platform: 'meta',
        publicConfig: { pixelId: '222222' },
        testEventCode: 'TEST1',
        testMode: true,
        active: false,
      },
      {
        pixelId: g,
        platform: 'google',
        publicConfig: { customerId: '1234567890', conversionActions: { Subscribe: '987654' } },
        testEventCode: null,
        testMode: false,
        active: true,
      },
    ]);
    expect(Date.parse(out.pixels[0].createdAt)).not.toBeNaN();
    const human = await w.run('pixel', 'list', '--site', site.siteId);
    expect(human.stdout).toContain(`${g}  google`);
    for (const s of SECRETS) expect(JSON.stringify(out) + human.stdout + human.stderr).not.toContain(s);
    expect(await w.refused('pixel', 'list', '--site', 'ws_unknown')).toBe(
      'error: site ws_unknown does not exist\n',
    );
  });
});

describe('secrets at rest', () => {
  it('no credential given in this file is in clear in any table', async () => {
    const { rows: tables } = await w.db.pool.query<{ name: string }>(
      `SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) AS name FROM information_schema.tables
       WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_type = 'BASE TABLE'`,
    );
    expect(tables.map((t) => t.name)).toContain('public.pixels');
    let dump = '';
    for (const t of tables)
      dump += (await w.db.pool.query(`SELECT t::text AS row FROM ${t.name} t`)).rows
        .map((r) => r.row)
        .join('\n');
    expect(dump).toContain('1234567890');
    for (const s of SECRETS) expect(dump).not.toContain(s);
  });
});
