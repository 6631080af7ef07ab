// A Google pixel on the Data Manager API from the command line: added without a developer token
// and checked with a validateOnly ingest, refused for a token without the datamanager scope or an
// action the customer does not have, tested with `pixel test`, and an ads pixel moved over.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecretBox, parseSecretKey } from '../../backend/crypto/secret-box.js';
import { startFakes, type Fakes } from '../fakes/index.js';
import { SECRET_KEY_HEX, cliWorld, type CliWorld } from './harness.js';

let w: CliWorld;
let fakes: Fakes;
const box = createSecretBox(parseSecretKey(SECRET_KEY_HEX));

beforeAll(async () => {
  fakes = await startFakes({ googleDataManager: { conversionActions: { '1234567890': ['555', '556'] } } });
  const { TELEGRAM_API_URL: _, ...platforms } = fakes.env;
  w = await cliWorld({ env: platforms });
});
afterAll(async () => {
  await w.close();
  await fakes.closeAll();
});

async function site(): Promise<string> {
  const { accountId } = await w.ok('account', 'create', '--name', 'DM');
  return (
    await w.ok('site', 'create', '--account', accountId, '--name', 'Shop', '--domain', 'shop.example.com')
  ).siteId as string;
}

async function stored(
  pixelId: string,
): Promise<{ pub: Record<string, unknown>; secrets: Record<string, string> }> {
  const { rows } = await w.db.pool.query('SELECT public_config, secrets_enc FROM pixels WHERE id = $1', [
    pixelId,
  ]);
  return { pub: rows[0].public_config, secrets: JSON.parse(box.open(rows[0].secrets_enc)) };
}

const GOOGLE = ['--platform', 'google', '--customer-id', '123-456-7890'];
const dm = () => fakes.googleDataManager;

describe('pixel add --platform google (Data Manager API)', () => {
  it('needs no developer token, and is checked with one validateOnly event that records nothing', async () => {
    dm().reset();
    const s = await site();
    const { pixelId } = await w.ok(
      'pixel',
      'add',
      '--site',
      s,
      ...GOOGLE,
      '--conversion-action',
      'Purchase=555',
      '--oauth-token',
      'google-oauth-token',
      '--login-customer-id',
      '999-888-7777',
    );
    expect(await stored(pixelId)).toEqual({
      pub: {
        customerId: '1234567890',
        api: 'data-manager',
        conversionActions: { Purchase: '555' },
        loginCustomerId: '9998887777',
      },
      secrets: { oauthToken: 'google-oauth-token' },
    });
    expect(dm().validated).toBe(1);
    expect(dm().events()).toEqual([]);
    const body = dm().ingestRequests()[0]!.body as Record<string, any>;
    expect(body.validateOnly).toBe(true);
    expect(body.destinations[0]).toMatchObject({
      operatingAccount: { accountType: 'GOOGLE_ADS', accountId: '1234567890' },
      loginAccount: { accountType: 'GOOGLE_ADS', accountId: '9998887777' },
      productDestinationId: '555',
    });
  });

  it('refuses a token without the datamanager scope, and an action the customer does not have; nothing is stored', async () => {
    const s = await site();
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        s,
        ...GOOGLE,
        '--conversion-action',
        'Purchase=555',
        '--oauth-token',
        'google-adwords-only-token',
      ),
    ).toMatch(
      /^error: Google refused the OAuth credentials for the Data Manager API: HTTP 403: PERMISSION_DENIED: Request had insufficient authentication scopes\. \(ACCESS_TOKEN_SCOPE_INSUFFICIENT\)/,
    );
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        s,
        ...GOOGLE,
        '--conversion-action',
        'Purchase=999',
        '--oauth-token',
        'google-oauth-token',
      ),
    ).toMatch(
      /^error: Google refused the destination \(customer 1234567890, its conversion actions\): HTTP 400: .*INVALID_CONVERSION_ACTION_ID; destinations\[0\]\.productDestinationId/,
    );
    const { rows } = await w.db.pool.query('SELECT count(*)::int AS n FROM pixels WHERE site_id = $1', [s]);
    expect(rows[0].n).toBe(0);
  });

  it('a developer token given without --api ads is not stored, with a warning; --api ads needs one', async () => {
    const s = await site();
    const r = await w.run(
      'pixel',
      'add',
      '--site',
      s,
      ...GOOGLE,
      '--conversion-action',
      'Lead=556',
      '--oauth-token',
      'google-oauth-token',
      '--developer-token',
      'google-dev-token',
      '--json',
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/warning: --developer-token is not stored: the Data Manager API takes none/);
    expect((await stored(r.json().pixelId)).secrets).toEqual({ oauthToken: 'google-oauth-token' });
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        await site(),
        ...GOOGLE,
        '--conversion-action',
        'Lead=556',
        '--oauth-token',
        'google-oauth-token',
        '--api',
        'ads',
      ),
    ).toMatch(/^error: --developer-token is required with --api ads\b/);
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        await site(),
        ...GOOGLE,
        '--conversion-action',
        'Lead=556',
        '--oauth-token',
        'google-oauth-token',
        '--api',
        'datamanager',
      ),
    ).toMatch(/^error: --api must be data-manager or ads; got "datamanager"/);
  });

  it("pixel test sends one validateOnly event and prints Google's answer", async () => {
    const s = await site();
    const { pixelId } = await w.ok(
      'pixel',
      'add',
      '--site',
      s,
      ...GOOGLE,
      '--conversion-action',
      'Purchase=555',
      '--oauth-token',
      'google-oauth-token',
    );
    dm().reset();
    expect(await w.ok('pixel', 'test', '--pixel', pixelId)).toMatchObject({
      platform: 'google',
      accepted: true,
      status: 200,
      testFacility: 'validateOnly',
      answer: {},
    });
    expect(dm().validated).toBe(1);
    expect(dm().events()).toEqual([]);
    // A refusal prints Google's error body.
    await w.db.pool.query(
      `UPDATE pixels SET public_config = jsonb_set(public_config, '{conversionActions}', '{"Purchase":"999"}') WHERE id = $1`,
      [pixelId],
    );
    const r = await w.run('pixel', 'test', '--pixel', pixelId, '--json');
    expect(r.code).toBe(1);
    expect(r.json()).toMatchObject({
      accepted: false,
      status: 400,
      answer: {
        error: {
          status: 'INVALID_ARGUMENT',
          details: expect.arrayContaining([
            expect.objectContaining({ reason: 'INVALID_CONVERSION_ACTION_ID' }),
          ]),
        },
      },
    });
  });
});

describe('pixel update --api', () => {
  it('moves a Google Ads API pixel to the Data Manager API, and back only with a developer token', async () => {
    const s = await site();
    const { pixelId } = await w.ok(
      'pixel',
      'add',
      '--site',
      s,
      ...GOOGLE,
      '--conversion-action',
      'Purchase=555',
      '--oauth-token',
      'google-oauth-token',
      '--api',
      'ads',
      '--developer-token',
      'google-dev-token',
      '--skip-token-check',
    );
    expect((await stored(pixelId)).pub.api).toBe('ads');
    expect(await w.ok('pixel', 'update', '--pixel', pixelId, '--api', 'data-manager')).toMatchObject({
      publicConfig: { api: 'data-manager' },
    });
    expect((await stored(pixelId)).pub.api).toBe('data-manager');
    // A pixel stored before the choice existed has no api: it is on the Google Ads API.
    await w.db.pool.query(`UPDATE pixels SET public_config = public_config - 'api' WHERE id = $1`, [pixelId]);
    const { pixelId: dmOnly } = await w.ok(
      'pixel',
      'add',
      '--site',
      await site(),
      ...GOOGLE,
      '--conversion-action',
      'Purchase=555',
      '--oauth-token',
      'google-oauth-token',
    );
    expect(await w.refused('pixel', 'update', '--pixel', dmOnly, '--api', 'ads')).toMatch(
      /--developer-token is required to move a pixel to the Google Ads API \(--api ads\)/,
    );
    expect(
      await w.ok(
        'pixel',
        'update',
        '--pixel',
        dmOnly,
        '--api',
        'ads',
        '--developer-token',
        'google-dev-token',
      ),
    ).toMatchObject({
      publicConfig: { api: 'ads' },
    });
  });
});
