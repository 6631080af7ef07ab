import type { Config } from '../config.js';
import { ApiError } from '../errors.js';
import { googleApiOf, type PixelConfig, type PixelConfigOf } from '../platforms/types.js';
import { authorize } from './google-oauth.js';
import { sendTestEvent } from './pixel-test.js';

/**
 * `pixel add` asks the platform whether a new pixel's credentials work, where the platform can
 * answer without an event being counted:
 * - Meta: reading the pixel (`GET /{version}/{pixel_id}?fields=id`) with the token tells a bad
 *   token (code 190) from a pixel the token cannot use (code 100);
 * - Google, Data Manager API: the refresh token is exchanged (when given), then one event goes to
 *   `events:ingest` with `validateOnly: true`, which checks the token's scope, the customer, the
 *   conversion action and the event as Google would, and records nothing;
 * - Google Ads API (`api ads`): `customers:listAccessibleCustomers` checks the access and developer
 *   tokens, and whether the customer is reachable;
 * - Snapchat: one event to its validate endpoint (`/v3/{pixel}/events/validate`), which checks an
 *   event as a real one and never counts it: a refused token (401) refuses the pixel;
 * - TikTok has no such call (an event without a test event code counts): `pixel test` checks it.
 * A refusal throws; an answer that settles nothing (network, 5xx) is a warning, not a refusal:
 * the operator may be adding pixels from a machine that cannot reach the platform.
 */
const TIMEOUT_MS = 10_000;

export async function checkPixelCredentials(config: Config, pixel: PixelConfig): Promise<string[]> {
  switch (pixel.platform) {
    case 'meta':
      return checkMeta(config, pixel);
    case 'google':
      return checkGoogle(config, pixel);
    case 'snapchat':
      return checkSnapchat(config, pixel);
    case 'tiktok':
      return [];
  }
}

/** Snap: one event to its validate endpoint, which checks it and never counts it. */
async function checkSnapchat(config: Config, p: PixelConfigOf<'snapchat'>): Promise<string[]> {
  const r = await sendTestEvent({ config, now: () => new Date() }, p, { pageUrl: 'https://example.com/' });
  if (r.accepted) return [];
  if (r.status === 401 || r.status === 403)
    throw new ApiError(
      'VALIDATION_FAILED',
      `Snap refused the access token: ${r.error ?? `HTTP ${r.status}`}`,
    );
  return [unchecked('Snap', r.error ?? 'no answer')];
}

async function getJson(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> } | { error: string }> {
  try {
    const res = await fetch(url, { headers, signal: AbortSignal.timeout(TIMEOUT_MS) });
    const text = await res.text();
    let body: Record<string, unknown> = {};
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      body = { text: text.slice(0, 200) };
    }
    return { status: res.status, body };
  } catch (err) {
    const e = err as { name?: string; cause?: { code?: string; message?: string } };
    return {
      error:
        e.name === 'TimeoutError'
          ? `no answer within ${TIMEOUT_MS} ms`
          : (e.cause?.code ?? e.cause?.message ?? String(err)),
    };
  }
}

const unchecked = (platform: string, why: string) =>
  `warning: the credentials could not be checked with ${platform} (${why}); pixel test --pixel P checks them later`;

async function checkMeta(config: Config, p: PixelConfigOf<'meta'>): Promise<string[]> {
  const url = `${config.META_GRAPH_URL}/${config.META_API_VERSION}/${encodeURIComponent(p.pixelId)}?fields=id&access_token=${encodeURIComponent(p.accessToken)}`;
  const res = await getJson(url);
  if ('error' in res) return [unchecked('Meta', res.error)];
  if (res.status === 200 && String(res.body.id) === p.pixelId) return [];
  const error = res.body.error as { code?: number; message?: string } | undefined;
  if (error?.code === 190)
    throw new ApiError(
      'VALIDATION_FAILED',
      `Meta refused the access token: ${error.message ?? 'invalid token'}`,
    );
  if (error?.code === 100 || error?.code === 803 || error?.code === 200) {
    throw new ApiError(
      'VALIDATION_FAILED',
      `Meta has no pixel ${p.pixelId} this token may use: ${error.message ?? `code ${error.code}`}`,
    );
  }
  return [unchecked('Meta', `HTTP ${res.status}${error?.message ? `: ${error.message}` : ''}`)];
}

async function checkGoogle(config: Config, p: PixelConfigOf<'google'>): Promise<string[]> {
  const auth = await authorize(p, {
    oauthUrl: config.GOOGLE_OAUTH_URL,
    timeoutMs: TIMEOUT_MS,
    nowMs: Date.now(),
  });
  if ('error' in auth) {
    if (auth.configuration)
      return [`warning: the credentials could not be checked with Google: ${auth.error}`];
    if (auth.retry) return [unchecked('Google', auth.error)];
    throw new ApiError('VALIDATION_FAILED', `Google refused the OAuth credentials: ${auth.error}`);
  }
  const pixel = auth.pixel as PixelConfigOf<'google'>;
  if (googleApiOf(pixel) === 'data-manager') return checkDataManager(config, pixel);
  const res = await getJson(
    `${config.GOOGLE_ADS_API_URL}/${config.GOOGLE_ADS_API_VERSION}/customers:listAccessibleCustomers`,
    {
      authorization: `Bearer ${pixel.oauthToken ?? ''}`,
      'developer-token': pixel.developerToken ?? '',
    },
  );
  if ('error' in res) return [unchecked('Google', res.error)];
  const message = String(
    (res.body.error as { message?: string } | undefined)?.message ?? `HTTP ${res.status}`,
  );
  if (res.status === 401)
    throw new ApiError('VALIDATION_FAILED', `Google refused the OAuth access token: ${message}`);
  if (res.status === 403)
    throw new ApiError('VALIDATION_FAILED', `Google refused the developer token: ${message}`);
  if (res.status !== 200) return [unchecked('Google', message)];
  const reachable = ((res.body.resourceNames ?? []) as string[]).map((n) => n.replace(/^customers\//, ''));
  const through = pixel.loginCustomerId ?? undefined;
  if (!reachable.includes(p.customerId) && (through === undefined || !reachable.includes(through))) {
    return [
      `warning: customer ${p.customerId} is not among the customers these credentials reach directly${through ? ` (nor is ${through})` : ''}; if access goes through a manager account, give --login-customer-id`,
    ];
  }
  return [];
}

/**
 * The Data Manager API: a `validateOnly` ingest of one event to the pixel's first conversion
 * action. 401/403 refuse the credentials (a token without the `datamanager` scope is a 403),
 * 400/404 the destination or event; anything else leaves the pixel unchecked.
 */
async function checkDataManager(config: Config, p: PixelConfigOf<'google'>): Promise<string[]> {
  let r: Awaited<ReturnType<typeof sendTestEvent>>;
  try {
    r = await sendTestEvent({ config, now: () => new Date() }, p, { pageUrl: 'https://example.com/' });
  } catch (err) {
    return [unchecked('Google', (err as Error).message)];
  }
  if (r.accepted) return [];
  const why = r.error ?? `HTTP ${r.status}`;
  if (r.status === 401 || r.status === 403)
    throw new ApiError(
      'VALIDATION_FAILED',
      `Google refused the OAuth credentials for the Data Manager API: ${why}`,
    );
  if (r.status === 400 || r.status === 404)
    throw new ApiError(
      'VALIDATION_FAILED',
      `Google refused the destination (customer ${p.customerId}, its conversion actions): ${why}`,
    );
  return [unchecked('Google', why)];
}
