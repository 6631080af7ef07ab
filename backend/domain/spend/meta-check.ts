import type { Config } from '../../config.js';
import type { CheckOutcome } from './importer.js';

/**
 * Whether a Meta token may read an ad account's spend, and the account's currency and time zone
 * (its days are the days Insights reports by): `GET {META_GRAPH_URL}/{version}/act_N?fields=
 * name,currency,timezone_name,account_status`. Meta answers a bad or expired token with code 190
 * and a token without `ads_read` on the account with code 200 (or 10); both refuse the source,
 * and so does no answer at all: without the currency and time zone nothing could be imported.
 */
export const META_ACCOUNT_FIELDS = 'name,currency,timezone_name,account_status';
export const SPEND_CHECK_TIMEOUT_MS = 10_000;

export async function checkMetaAccount(
  config: Pick<Config, 'META_GRAPH_URL' | 'META_API_VERSION'>,
  adAccount: string,
  accessToken: string,
  timeoutMs = SPEND_CHECK_TIMEOUT_MS,
): Promise<CheckOutcome> {
  const url = new URL(
    `${config.META_GRAPH_URL.replace(/\/$/, '')}/${config.META_API_VERSION}/${encodeURIComponent(adAccount)}`,
  );
  url.searchParams.set('fields', META_ACCOUNT_FIELDS);
  let res: { status: number; bodyText: string };
  try {
    const r = await fetch(url, {
      headers: { authorization: `Bearer ${accessToken}` },
      signal: AbortSignal.timeout(timeoutMs),
    });
    res = { status: r.status, bodyText: await r.text() };
  } catch (err) {
    const e = err as { name?: string; cause?: { code?: string } };
    const why =
      e.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (e.cause?.code ?? String(err));
    return { kind: 'refused', reason: `Meta did not answer: ${why}` };
  }
  let body: {
    name?: unknown;
    currency?: unknown;
    timezone_name?: unknown;
    error?: { code?: unknown; message?: unknown };
  } = {};
  try {
    body = JSON.parse(res.bodyText) as typeof body;
  } catch {
    // Not JSON: reported below with the status.
  }
  if (res.status !== 200 || body.error) {
    const code = Number(body.error?.code ?? 0);
    const message = String(body.error?.message ?? res.bodyText.slice(0, 200));
    return {
      kind: 'refused',
      reason: `Meta refused ${adAccount} (HTTP ${res.status}, #${code}): ${message}`,
    };
  }
  if (typeof body.currency !== 'string' || typeof body.timezone_name !== 'string')
    return { kind: 'refused', reason: `Meta did not say the currency and time zone of ${adAccount}` };
  return {
    kind: 'ok',
    currency: body.currency,
    timeZone: body.timezone_name,
    ...(typeof body.name === 'string' ? { name: body.name } : {}),
  };
}
