// pixel add checks what it can before storing a pixel: the same destination twice on a site is
// refused (every event would be sent twice), and Meta and Google are asked whether the
// credentials work (a refusal refuses the pixel; no answer is a warning). Against the fakes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakes, type Fakes } from '../fakes/index.js';
import { cliWorld, runWith, type CliWorld } from './harness.js';

let w: CliWorld;
let fakes: Fakes;

beforeAll(async () => {
  fakes = await startFakes({
    meta: { pixelIds: ['1234567890', '2234567890'] },
    google: {
      conversionActions: [
        'customers/1234567890/conversionActions/555',
        'customers/1234567890/conversionActions/556',
      ],
    },
  });
  const { TELEGRAM_API_URL: _, ...platforms } = fakes.env;
  w = await cliWorld({ env: platforms });
});
afterAll(async () => {
  await w.close();
  await fakes.closeAll();
});

async function site(): Promise<string> {
  const { accountId } = await w.ok('account', 'create', '--name', 'Checks');
  return (
    await w.ok('site', 'create', '--account', accountId, '--name', 'Shop', '--domain', 'shop.example.com')
  ).siteId as string;
}

const count = async (siteId: string) =>
  Number((await w.db.pool.query('SELECT count(*) FROM pixels WHERE site_id = $1', [siteId])).rows[0].count);
const META = ['--platform', 'meta', '--pixel-id', '1234567890', '--access-token', 'meta-test-token'];
const GOOGLE = [
  '--platform',
  'google',
  '--customer-id',
  '1234567890',
  '--api',
  'ads',
  '--developer-token',
  'google-dev-token',
  '--oauth-token',
  'google-oauth-token',
];

describe('duplicates', () => {
  it('the same Meta pixel twice on a site is refused, naming the pixel to update; on another site it is fine', async () => {
    const s = await site();
    const { pixelId } = await w.ok('pixel', 'add', '--site', s, ...META);
    expect(await w.refused('pixel', 'add', '--site', s, ...META, '--test-event-code', 'T1')).toBe(
      `error: this site already has meta pixel 1234567890 (pixel ${pixelId}); a second one would send every event twice: change its credentials with pixel update --pixel ${pixelId}\n`,
    );
    expect(await count(s)).toBe(1);
    expect((await w.run('pixel', 'add', '--site', await site(), ...META)).code).toBe(0);
  });

  it('a deactivated one too, with the way to switch it back on', async () => {
    const s = await site();
    const { pixelId } = await w.ok(
      'pixel',
      'add',
      '--site',
      s,
      '--platform',
      'tiktok',
      '--pixel-code',
      'C4DUP',
      '--access-token',
      'tiktok-test-token',
    );
    await w.ok('pixel', 'deactivate', '--pixel', pixelId);
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        s,
        '--platform',
        'tiktok',
        '--pixel-code',
        'C4DUP',
        '--access-token',
        'tiktok-other-token',
      ),
    ).toContain(
      `(pixel ${pixelId}, deactivated); a second one would send every event twice: switch it back on with pixel activate --pixel ${pixelId}`,
    );
  });

  it('two Google pixels of one customer only when they share no conversion action', async () => {
    const s = await site();
    await w.ok('pixel', 'add', '--site', s, ...GOOGLE, '--conversion-action', 'Subscribe=555');
    await w.ok('pixel', 'add', '--site', s, ...GOOGLE, '--conversion-action', 'Purchase=556');
    expect(
      await w.refused('pixel', 'add', '--site', s, ...GOOGLE, '--conversion-action', 'Lead=555'),
    ).toMatch(/^error: this site already has Google customer 1234567890 with a conversion action in common/);
    expect(await count(s)).toBe(2);
  });

  it('of two concurrent adds of one pixel, one is stored', async () => {
    const s = await site();
    const runs = await Promise.all(
      [1, 2, 3].map(() =>
        w.run(
          'pixel',
          'add',
          '--site',
          s,
          '--platform',
          'snapchat',
          '--pixel-id',
          'snap-race',
          '--access-token',
          'snap-test-token',
          '--json',
        ),
      ),
    );
    expect(runs.map((r) => r.code).sort()).toEqual([0, 1, 1]);
    expect(await count(s)).toBe(1);
  });
});

describe('credentials asked of the platform', () => {
  it('meta: a wrong token is refused with Meta’s reason; nothing is stored; --skip-token-check adds it anyway', async () => {
    const s = await site();
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        s,
        '--platform',
        'meta',
        '--pixel-id',
        '1234567890',
        '--access-token',
        'EAAwrong-token-1',
      ),
    ).toBe('error: Meta refused the access token: Invalid OAuth access token - Cannot parse access token\n');
    expect(await count(s)).toBe(0);
    const read = fakes.meta.received.at(-1)!;
    expect(read).toMatchObject({ method: 'GET', path: '/v26.0/1234567890' });
    expect(
      (
        await w.run(
          'pixel',
          'add',
          '--site',
          s,
          '--platform',
          'meta',
          '--pixel-id',
          '1234567890',
          '--access-token',
          'EAAwrong-token-1',
          '--skip-token-check',
        )
      ).code,
    ).toBe(0);
  });

  it('meta: a pixel the token cannot use is refused', async () => {
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        await site(),
        '--platform',
        'meta',
        '--pixel-id',
        '99999999',
        '--access-token',
        'meta-test-token',
      ),
    ).toMatch(/^error: Meta has no pixel 99999999 this token may use: Unsupported get request/);
  });

  it('meta: no answer from Meta is a warning, and the pixel is added', async () => {
    const s = await site();
    fakes.meta.failNext(1, { type: 'reset' });
    const r = await w.run('pixel', 'add', '--site', s, ...META);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /^warning: the credentials could not be checked with Meta \(.+\); pixel test --pixel P checks them later\n$/,
    );
    expect(await count(s)).toBe(1);
  });

  it('snapchat: its validate endpoint is asked (nothing counted); a wrong token is refused', async () => {
    const s = await site();
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        s,
        '--platform',
        'snapchat',
        '--pixel-id',
        'snap-check',
        '--access-token',
        'snap-wrong-token',
      ),
    ).toBe(
      'error: Snap refused the access token: HTTP 401: INVALID: Unauthorized: invalid or missing access_token\n',
    );
    await w.ok(
      'pixel',
      'add',
      '--site',
      s,
      '--platform',
      'snapchat',
      '--pixel-id',
      'snap-check',
      '--access-token',
      'snap-test-token',
    );
    expect(fakes.snapchat.received.at(-1)!.path).toBe('/v3/snap-check/events/validate');
    expect(fakes.snapchat.events('snap-check')).toEqual([]);
  });

  it('google: a bad developer token, a revoked refresh token and a bad access token are refused', async () => {
    const s = await site();
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        s,
        '--platform',
        'google',
        '--customer-id',
        '1234567890',
        '--conversion-action',
        'Subscribe=555',
        '--api',
        'ads',
        '--developer-token',
        'wrong-dev-token',
        '--oauth-token',
        'google-oauth-token',
      ),
    ).toBe('error: Google refused the developer token: The caller does not have permission\n');
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        s,
        '--platform',
        'google',
        '--customer-id',
        '1234567890',
        '--conversion-action',
        'Subscribe=555',
        '--api',
        'ads',
        '--developer-token',
        'google-dev-token',
        '--oauth-token',
        'ya29.expired-token',
      ),
    ).toMatch(
      /^error: Google refused the OAuth access token: Request had invalid authentication credentials/,
    );
    expect(
      await w.refused(
        'pixel',
        'add',
        '--site',
        s,
        '--platform',
        'google',
        '--customer-id',
        '1234567890',
        '--conversion-action',
        'Subscribe=555',
        '--api',
        'ads',
        '--developer-token',
        'google-dev-token',
        '--refresh-token',
        '1//revoked-refresh',
        '--client-id',
        'google-client-id',
        '--client-secret',
        'google-client-secret',
      ),
    ).toMatch(/^error: Google refused the OAuth credentials: .*invalid_grant/);
    expect(await count(s)).toBe(0);
  });

  it('google: a GOOGLE_OAUTH_URL that is not a token endpoint (404) is a configuration warning naming the URL, not refused credentials', async () => {
    const s = await site();
    const wrong = `${w.env.GOOGLE_OAUTH_URL}/oauth2/v4`;
    const r = await runWith({ ...w.env, GOOGLE_OAUTH_URL: wrong }, [
      'pixel',
      'add',
      '--site',
      s,
      '--platform',
      'google',
      '--customer-id',
      '1234567890',
      '--conversion-action',
      'Subscribe=555',
      '--api',
      'ads',
      '--developer-token',
      'google-dev-token',
      '--refresh-token',
      'google-refresh-token',
      '--client-id',
      'google-client-id',
      '--client-secret',
      'google-client-secret',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe(
      `warning: the credentials could not be checked with Google: configuration error: ${wrong}/token answered HTTP 404, which is not an OAuth token endpoint's answer: check GOOGLE_OAUTH_URL (Google's is https://oauth2.googleapis.com)\n`,
    );
    expect(r.stderr).not.toMatch(/refused/);
    expect(await count(s)).toBe(1);
  });

  it('google: good refresh credentials are accepted; a customer they do not reach is a warning', async () => {
    const s = await site();
    const ok = await w.run(
      'pixel',
      'add',
      '--site',
      s,
      '--platform',
      'google',
      '--customer-id',
      '1234567890',
      '--conversion-action',
      'Subscribe=555',
      '--api',
      'ads',
      '--developer-token',
      'google-dev-token',
      '--refresh-token',
      'google-refresh-token',
      '--client-id',
      'google-client-id',
      '--client-secret',
      'google-client-secret',
    );
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stderr).toBe('');
    const other = await w.run(
      'pixel',
      'add',
      '--site',
      s,
      '--platform',
      'google',
      '--customer-id',
      '9999999999',
      '--conversion-action',
      'Subscribe=555',
      '--api',
      'ads',
      '--developer-token',
      'google-dev-token',
      '--oauth-token',
      'google-oauth-token',
    );
    expect(other.code).toBe(0);
    expect(other.stderr).toBe(
      'warning: customer 9999999999 is not among the customers these credentials reach directly; if access goes through a manager account, give --login-customer-id\n',
    );
  });
});
