import type { Config } from '../../config.js';
import type { Pool } from '../../db/pool.js';
import { authorize, GoogleTokens } from '../../delivery/google-oauth.js';
import { performRequest } from '../../delivery/http.js';
import {
  isRecord,
  parseJsonObject,
  retryAfterMs,
  stringField,
  truncateError,
} from '../../platforms/response.js';
import type { PixelConfig } from '../../platforms/types.js';
import type { CheckOutcome, ImportOutcome, ImportWindow, SpendImporter, SpendSource } from './importer.js';
import {
  addPage,
  countOrNull,
  markFailing,
  microsToDecimal,
  resumeCursor,
  type SpendRow,
  writeSpendPage,
} from './spend-page.js';

/**
 * Google Ads spend (docs/spend-google.md): `POST {GOOGLE_ADS_API_URL}/{version}/customers/C/googleAds:search`
 * with a GAQL query over `campaign` by `segments.date`, one row per campaign and day, cost in
 * `metrics.cost_micros` (millionths of the account's currency). Search answers pages of a fixed
 * size with `nextPageToken` (sending `pageSize` is refused since v17); the token of the next page
 * is stored with each page written, so an interrupted import resumes there. Access tokens come
 * from the refresh token at `{GOOGLE_OAUTH_URL}/token`, as for Google pixels.
 *
 * Google's quota answer (429 RESOURCE_EXHAUSTED) carries its wait in `quotaErrorDetails.retryDelay`
 * or a `google.rpc.RetryInfo`: the import pauses that long. UNAUTHENTICATED (after one fresh
 * token) and PERMISSION_DENIED (a developer token not approved, a user without access) mark the
 * source failing with Google's reason.
 */
export const GOOGLE_SPEND_FIELDS = [
  'campaign.id',
  'campaign.name',
  'segments.date',
  'metrics.cost_micros',
  'metrics.impressions',
  'metrics.clicks',
  'customer.currency_code',
] as const;

export function googleSpendQuery(w: ImportWindow): string {
  return `SELECT ${GOOGLE_SPEND_FIELDS.join(', ')} FROM campaign WHERE segments.date BETWEEN '${w.from}' AND '${w.to}'`;
}

export const GOOGLE_CUSTOMER_QUERY =
  'SELECT customer.currency_code, customer.time_zone, customer.descriptive_name FROM customer';

const TIMEOUT_MS = 30_000;
const DEFAULT_WAIT_MS = 60_000;
/** Access tokens obtained from refresh tokens, kept for their hour in this process. */
const tokens = new GoogleTokens();

/** One row of a search answer (proto3 JSON: int64 as strings, zero values left out) as spend. */
export function googleRow(r: unknown, fallbackCurrency: string | null): SpendRow | null {
  if (!isRecord(r)) return null;
  const campaign = isRecord(r.campaign) ? r.campaign : {};
  const metrics = isRecord(r.metrics) ? r.metrics : {};
  const segments = isRecord(r.segments) ? r.segments : {};
  const customer = isRecord(r.customer) ? r.customer : {};
  const id = campaign.id;
  const day = segments.date;
  const spend = microsToDecimal(metrics.costMicros ?? '0');
  const impressions = countOrNull(metrics.impressions);
  const clicks = countOrNull(metrics.clicks);
  const currency = stringField(customer, 'currencyCode') ?? fallbackCurrency;
  if (
    (typeof id !== 'string' && typeof id !== 'number') ||
    !/^\d+$/.test(String(id)) ||
    typeof day !== 'string' ||
    !/^\d{4}-\d{2}-\d{2}$/.test(day) ||
    spend === null ||
    impressions === null ||
    clicks === null ||
    !currency
  )
    return null;
  return {
    day,
    campaignId: String(id),
    campaignName: typeof campaign.name === 'string' ? campaign.name : '',
    currency,
    spend,
    impressions,
    clicks,
  };
}

type Verdict =
  | { kind: 'ok'; body: Record<string, unknown> }
  | { kind: 'wait'; ms: number; reason: string }
  | { kind: 'refused'; reason: string; unauthenticated: boolean };

/** Pure: what a Google Ads answer means for an import. Exported for table-driven tests. */
export function classifyGoogleAnswer(
  res: { status: number; headers: Record<string, string>; bodyText: string } | { networkError: string },
  nowMs: number,
): Verdict {
  if ('networkError' in res)
    return { kind: 'wait', ms: DEFAULT_WAIT_MS, reason: `google: network error: ${res.networkError}` };
  const body = parseJsonObject(res.bodyText);
  if (res.status >= 200 && res.status < 300 && body) return { kind: 'ok', body };
  const error = isRecord(body?.error) ? body.error : {};
  const status = stringField(error, 'status') ?? '';
  const details = Array.isArray(error.details) ? error.details.filter(isRecord) : [];
  const errors = details.flatMap((d) => (Array.isArray(d.errors) ? d.errors.filter(isRecord) : []));
  const first = errors[0];
  const code = first && isRecord(first.errorCode) ? Object.entries(first.errorCode)[0] : undefined;
  const reason = truncateError(
    `google ${res.status} ${status}${code ? ` ${code[0]}.${String(code[1])}` : ''}: ${
      stringField(first, 'message') ?? stringField(error, 'message') ?? res.bodyText.slice(0, 200)
    }`,
  );
  if (res.status === 429 || status === 'RESOURCE_EXHAUSTED')
    return {
      kind: 'wait',
      ms: googleRetryDelayMs(details, errors) ?? retryAfterMs(res, nowMs) ?? DEFAULT_WAIT_MS,
      reason,
    };
  if (res.status >= 500 || res.status === 408 || !body)
    return { kind: 'wait', ms: retryAfterMs(res, nowMs) ?? DEFAULT_WAIT_MS, reason };
  return { kind: 'refused', reason, unauthenticated: res.status === 401 };
}

/** `"30s"` from a quota error's `quotaErrorDetails.retryDelay` or a `google.rpc.RetryInfo` detail. */
function googleRetryDelayMs(
  details: Record<string, unknown>[],
  errors: Record<string, unknown>[],
): number | undefined {
  const delays = [
    ...errors.map((e) =>
      isRecord(e.details) && isRecord(e.details.quotaErrorDetails)
        ? e.details.quotaErrorDetails.retryDelay
        : undefined,
    ),
    ...details.map((d) => d.retryDelay),
  ];
  for (const d of delays) {
    const m = typeof d === 'string' ? /^(\d+(?:\.\d+)?)s$/.exec(d.trim()) : null;
    if (m?.[1] !== undefined) return Math.round(Number(m[1]) * 1000);
  }
  return undefined;
}

function customerId(source: SpendSource): string {
  return source.accountRef.replace(/-/g, '');
}

/** The access token to send: the stored one, or one obtained from the refresh token. */
async function accessToken(
  config: Config,
  source: SpendSource,
): Promise<{ token: string; forget?: () => void } | { error: string; retry: boolean; delayMs?: number }> {
  const c = source.credentials;
  if (c.refreshToken && c.clientId && c.clientSecret) {
    // authorize() takes a Google pixel; only its OAuth fields are read.
    const asPixel = {
      platform: 'google',
      refreshToken: c.refreshToken,
      clientId: c.clientId,
      clientSecret: c.clientSecret,
    } as unknown as PixelConfig;
    const a = await authorize(asPixel, {
      oauthUrl: config.GOOGLE_OAUTH_URL,
      timeoutMs: TIMEOUT_MS,
      nowMs: Date.now(),
      tokens,
    });
    if ('error' in a)
      return { error: a.error, retry: a.retry, ...(a.delayMs === undefined ? {} : { delayMs: a.delayMs }) };
    const refreshed = a.refreshed;
    const token = (a.pixel as { oauthToken?: string }).oauthToken ?? '';
    return { token, ...(refreshed ? { forget: () => tokens.forget(refreshed) } : {}) };
  }
  const token = c.oauthToken ?? c.accessToken;
  if (!token)
    return {
      error: 'no OAuth access token, and no refresh token with its client id and secret',
      retry: false,
    };
  return { token };
}

/** One search request, with one fresh token after an UNAUTHENTICATED answer to a refreshed one. */
async function search(config: Config, source: SpendSource, body: Record<string, unknown>): Promise<Verdict> {
  for (let attempt = 0; ; attempt++) {
    const t = await accessToken(config, source);
    if ('error' in t)
      return t.retry
        ? { kind: 'wait', ms: t.delayMs ?? DEFAULT_WAIT_MS, reason: t.error }
        : { kind: 'refused', reason: t.error, unauthenticated: true };
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      authorization: `Bearer ${t.token}`,
      'developer-token': source.credentials.developerToken ?? '',
    };
    const login = source.credentials.loginCustomerId?.replace(/-/g, '');
    if (login) headers['login-customer-id'] = login;
    const res = await performRequest(
      {
        method: 'POST',
        url: `${config.GOOGLE_ADS_API_URL.replace(/\/+$/, '')}/${config.GOOGLE_ADS_API_VERSION}/customers/${customerId(source)}/googleAds:search`,
        headers,
        body: JSON.stringify(body),
      },
      TIMEOUT_MS,
    );
    const v = classifyGoogleAnswer(res, Date.now());
    if (v.kind === 'refused' && v.unauthenticated && t.forget && attempt === 0) {
      t.forget();
      continue;
    }
    return v;
  }
}

async function check(config: Config, source: SpendSource): Promise<CheckOutcome> {
  if (!source.credentials.developerToken) return { kind: 'refused', reason: 'a developer token is required' };
  const v = await search(config, source, { query: GOOGLE_CUSTOMER_QUERY });
  if (v.kind !== 'ok') return { kind: 'refused', reason: v.reason };
  const results = Array.isArray(v.body.results) ? v.body.results : [];
  const customer = isRecord(results[0]) && isRecord(results[0].customer) ? results[0].customer : undefined;
  const currency = stringField(customer, 'currencyCode');
  const timeZone = stringField(customer, 'timeZone');
  if (!currency || !timeZone)
    return { kind: 'refused', reason: 'google: the customer has no currency or time zone' };
  const name = stringField(customer, 'descriptiveName');
  return { kind: 'ok', currency, timeZone, ...(name ? { name } : {}) };
}

async function importDays(
  pool: Pool,
  config: Config,
  source: SpendSource,
  window: ImportWindow,
): Promise<ImportOutcome> {
  let pageToken = await resumeCursor<string>(pool, source.id, window);
  let rows = 0;
  const spend: Record<string, number> = {};
  const query = googleSpendQuery(window);
  for (;;) {
    const v = await search(config, source, { query, ...(pageToken ? { pageToken } : {}) });
    if (v.kind === 'wait') return { kind: 'paused', rows, retryAfterMs: v.ms, reason: v.reason };
    // A stored page token Google no longer takes (they expire): read the window again from its start.
    if (v.kind === 'refused' && pageToken !== null && /_PAGE_TOKEN\b/.test(v.reason)) {
      pageToken = null;
      continue;
    }
    if (v.kind === 'refused') {
      await markFailing(pool, source.id, v.reason);
      return { kind: 'failed', rows, reason: v.reason };
    }
    const results = Array.isArray(v.body.results) ? v.body.results : [];
    const page: SpendRow[] = [];
    for (const r of results) {
      const row = googleRow(r, source.currency);
      if (!row) {
        const reason = truncateError(`google: an unreadable row: ${JSON.stringify(r).slice(0, 200)}`);
        await markFailing(pool, source.id, reason);
        return { kind: 'failed', rows, reason };
      }
      page.push(row);
    }
    const next = stringField(v.body, 'nextPageToken') ?? null;
    await writeSpendPage(pool, source.id, window, page, next);
    rows += page.length;
    addPage(spend, page);
    if (next === null) return { kind: 'done', rows, spend };
    pageToken = next;
  }
}

export const googleSpendImporter: SpendImporter = { platform: 'google', check, importDays };
