import { createHash } from 'node:crypto';
import type { Config } from '../../config.js';
import type { Pool } from '../../db/pool.js';
import {
  isRecord,
  parseJsonObject,
  retryAfterMs,
  stringField,
  truncateError,
} from '../../platforms/response.js';
import type { PlatformResponse } from '../../platforms/types.js';
import type { CheckOutcome, ImportOutcome, ImportWindow, SpendImporter, SpendSource } from './importer.js';
import { getAnswer } from './spend-http.js';
import {
  addPage,
  countOrNull,
  isoDay,
  markFailing,
  microsToDecimal,
  resumeCursor,
  type SpendRow,
  splitWindow,
  writeSpendPage,
} from './spend-page.js';

/**
 * Snapchat spend (docs/spend-snapchat.md): `GET {SNAPCHAT_ADS_API_URL}/v1/adaccounts/A/stats` with
 * `granularity=DAY`, `breakdown=campaign` and `fields=impressions,swipes,spend`; spend is in
 * micro-currency of the account's currency, a swipe is a click. Snap wants `start_time`/`end_time`
 * at midnight of the account's own time zone, written with that zone's offset on that date
 * (daylight saving included), and at most 31 days a request: a window is read in 31-day parts,
 * the part to go on from stored with each part written. Campaign names come from
 * `adaccounts/A/campaigns`, paged with `paging.next_link`.
 *
 * A 429 pauses the import (for `Retry-After` when given, else a minute); 401 and 403 (a revoked
 * token, an account the token may not read) mark the source failing with Snap's message.
 */
export const SNAP_MAX_DAYS = 31;
export const SNAP_STATS_FIELDS = 'impressions,swipes,spend';

const TIMEOUT_MS = 30_000;
const DEFAULT_WAIT_MS = 60_000;

type Verdict =
  | { kind: 'ok'; body: Record<string, unknown> }
  | { kind: 'wait'; ms: number; reason: string }
  | { kind: 'refused'; reason: string };

/** Pure: what a Snap answer means. Exported for table-driven tests. */
export function classifySnapAnswer(res: PlatformResponse, nowMs: number): Verdict {
  if ('networkError' in res)
    return { kind: 'wait', ms: DEFAULT_WAIT_MS, reason: `snapchat: network error: ${res.networkError}` };
  const body = parseJsonObject(res.bodyText);
  if (res.status === 200 && body && body.request_status === 'SUCCESS') return { kind: 'ok', body };
  const reason = truncateError(
    `snapchat ${res.status}${body?.error_code ? ` ${String(body.error_code)}` : ''}: ${
      stringField(body, 'debug_message') ?? stringField(body, 'display_message') ?? res.bodyText.slice(0, 200)
    }`,
  );
  if (res.status === 429 || res.status >= 500 || res.status === 408)
    return { kind: 'wait', ms: retryAfterMs(res, nowMs) ?? DEFAULT_WAIT_MS, reason };
  return { kind: 'refused', reason };
}

/** The offset of `timeZone` at instant `ms`, in minutes east of UTC. */
function offsetMinutes(timeZone: string, ms: number): number {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  }).formatToParts(ms);
  const n = (t: string) => Number(parts.find((p) => p.type === t)?.value);
  const local = Date.UTC(n('year'), n('month') - 1, n('day'), n('hour'), n('minute'), n('second'));
  return Math.round((local - Math.floor(ms / 1000) * 1000) / 60_000);
}

/** Midnight starting `day` in `timeZone`, as Snap wants it: `2026-03-29T00:00:00.000+02:00`. */
export function snapMidnight(day: string, timeZone: string): string {
  const utcMidnight = Date.parse(`${day}T00:00:00Z`);
  // The offset at local midnight: guess with the offset at UTC midnight, then correct once.
  let off = offsetMinutes(timeZone, utcMidnight);
  off = offsetMinutes(timeZone, utcMidnight - off * 60_000);
  const sign = off < 0 ? '-' : '+';
  const a = Math.abs(off);
  return `${day}T00:00:00.000${sign}${String(Math.floor(a / 60)).padStart(2, '0')}:${String(a % 60).padStart(2, '0')}`;
}

/** The campaign rows of one stats answer; null when the answer is not shaped as Snap's. */
export function snapRows(
  body: unknown,
  currency: string,
  names: ReadonlyMap<string, string>,
): SpendRow[] | null {
  if (!isRecord(body) || !Array.isArray(body.timeseries_stats)) return null;
  const out: SpendRow[] = [];
  for (const s of body.timeseries_stats) {
    const stat = isRecord(s) && isRecord(s.timeseries_stat) ? s.timeseries_stat : null;
    const campaigns = stat && isRecord(stat.breakdown_stats) ? stat.breakdown_stats.campaign : [];
    if (!stat || !Array.isArray(campaigns)) return null;
    for (const c of campaigns) {
      if (!isRecord(c) || typeof c.id !== 'string' || !Array.isArray(c.timeseries)) return null;
      for (const t of c.timeseries) {
        const day =
          isRecord(t) && typeof t.start_time === 'string'
            ? /^(\d{4}-\d{2}-\d{2})T/.exec(t.start_time)?.[1]
            : undefined;
        const stats = isRecord(t) && isRecord(t.stats) ? t.stats : {};
        const spend = microsToDecimal(stats.spend ?? 0);
        const impressions = countOrNull(stats.impressions);
        const clicks = countOrNull(stats.swipes);
        if (!day || spend === null || impressions === null || clicks === null) return null;
        // A day with nothing served is no row: Snap answers every day of the range for every campaign.
        if (spend === '0' && impressions === 0 && clicks === 0) continue;
        out.push({
          day,
          campaignId: c.id,
          campaignName: names.get(c.id) ?? '',
          currency,
          spend,
          impressions,
          clicks,
        });
      }
    }
  }
  return out;
}

function base(config: Config, source: SpendSource): string {
  return `${config.SNAPCHAT_ADS_API_URL.replace(/\/+$/, '')}/v1/adaccounts/${encodeURIComponent(source.accountRef)}`;
}

/** Access tokens obtained from refresh tokens, by a digest of the credentials, until they run out. */
const tokens = new Map<string, { token: string; untilMs: number }>();

/**
 * Snap's access tokens last half an hour: a source that holds a refresh token with its OAuth
 * client gets them from `{SNAPCHAT_OAUTH_URL}/login/oauth2/access_token` (grant_type=refresh_token)
 * as needed; one given only an access token uses it as it is.
 */
async function accessToken(
  config: Config,
  source: SpendSource,
  fresh: boolean,
): Promise<{ token: string; refreshed: boolean } | Exclude<Verdict, { kind: 'ok' }>> {
  const { refreshToken, clientId, clientSecret } = source.credentials;
  if (!refreshToken || !clientId || !clientSecret)
    return { token: source.credentials.accessToken ?? '', refreshed: false };
  const key = createHash('sha256')
    .update(`${config.SNAPCHAT_OAUTH_URL}\n${clientId}\n${clientSecret}\n${refreshToken}`)
    .digest('hex');
  const cached = tokens.get(key);
  if (!fresh && cached && cached.untilMs > Date.now()) return { token: cached.token, refreshed: true };
  const res = await postForm(`${config.SNAPCHAT_OAUTH_URL.replace(/\/+$/, '')}/login/oauth2/access_token`, {
    grant_type: 'refresh_token',
    refresh_token: refreshToken,
    client_id: clientId,
    client_secret: clientSecret,
  });
  if ('networkError' in res)
    return {
      kind: 'wait',
      ms: DEFAULT_WAIT_MS,
      reason: `snapchat oauth: network error: ${res.networkError}`,
    };
  const body = parseJsonObject(res.bodyText);
  const token = stringField(body, 'access_token');
  if (res.status === 200 && token) {
    const lifetime = typeof body?.expires_in === 'number' ? body.expires_in : 1800;
    tokens.set(key, { token, untilMs: Date.now() + Math.max(lifetime - 60, lifetime / 2) * 1000 });
    return { token, refreshed: true };
  }
  const reason = truncateError(
    `snapchat oauth ${res.status}: ${stringField(body, 'error') ?? ''} ${stringField(body, 'error_description') ?? res.bodyText.slice(0, 200)}`,
  );
  if (res.status === 429 || res.status >= 500)
    return { kind: 'wait', ms: retryAfterMs(res, Date.now()) ?? DEFAULT_WAIT_MS, reason };
  return { kind: 'refused', reason };
}

async function postForm(url: string, form: Record<string, string>): Promise<PlatformResponse> {
  const signal = AbortSignal.timeout(TIMEOUT_MS);
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams(form).toString(),
      signal,
    });
    const headers: Record<string, string> = {};
    res.headers.forEach((v, k) => {
      headers[k] = v;
    });
    return { status: res.status, headers, bodyText: await res.text() };
  } catch (err) {
    return {
      networkError: signal.aborted ? `no answer within ${TIMEOUT_MS} ms` : String((err as Error).message),
    };
  }
}

/** One GET, with one fresh access token after a 401 to a refreshed one (it may have run out early). */
async function get(config: Config, source: SpendSource, url: string): Promise<Verdict> {
  for (let attempt = 0; ; attempt++) {
    const t = await accessToken(config, source, attempt > 0);
    if (!('token' in t)) return t;
    const res = await getAnswer(url, { authorization: `Bearer ${t.token}` }, TIMEOUT_MS);
    if (t.refreshed && attempt === 0 && !('networkError' in res) && res.status === 401) continue;
    return classifySnapAnswer(res, Date.now());
  }
}

async function adAccount(
  config: Config,
  source: SpendSource,
): Promise<
  Exclude<Verdict, { kind: 'ok' }> | { kind: 'account'; currency: string; timeZone: string; name?: string }
> {
  const v = await get(config, source, base(config, source));
  if (v.kind !== 'ok') return v;
  const list = Array.isArray(v.body.adaccounts) ? v.body.adaccounts.filter(isRecord) : [];
  const a = isRecord(list[0]?.adaccount) ? list[0].adaccount : undefined;
  const currency = stringField(a, 'currency');
  const timeZone = stringField(a, 'timezone');
  if (!currency || !timeZone)
    return { kind: 'refused', reason: 'snapchat: the ad account has no currency or time zone' };
  const name = stringField(a, 'name');
  return { kind: 'account', currency, timeZone, ...(name ? { name } : {}) };
}

async function campaignNames(config: Config, source: SpendSource): Promise<Verdict | Map<string, string>> {
  const names = new Map<string, string>();
  let url: string | null = `${base(config, source)}/campaigns?limit=1000`;
  while (url !== null) {
    const v = await get(config, source, url);
    if (v.kind !== 'ok') return v;
    for (const c of Array.isArray(v.body.campaigns) ? v.body.campaigns : []) {
      const campaign = isRecord(c) && isRecord(c.campaign) ? c.campaign : undefined;
      const id = stringField(campaign, 'id');
      if (id) names.set(id, stringField(campaign, 'name') ?? '');
    }
    url = isRecord(v.body.paging) ? (stringField(v.body.paging, 'next_link') ?? null) : null;
  }
  return names;
}

async function check(config: Config, source: SpendSource): Promise<CheckOutcome> {
  const a = await adAccount(config, source);
  if (a.kind !== 'account') return { kind: 'refused', reason: a.reason };
  return { kind: 'ok', currency: a.currency, timeZone: a.timeZone, ...(a.name ? { name: a.name } : {}) };
}

async function importDays(
  pool: Pool,
  config: Config,
  source: SpendSource,
  window: ImportWindow,
): Promise<ImportOutcome> {
  let rows = 0;
  const spend: Record<string, number> = {};
  const stop = async (v: Exclude<Verdict, { kind: 'ok' }>): Promise<ImportOutcome> => {
    if (v.kind === 'wait') return { kind: 'paused', rows, retryAfterMs: v.ms, reason: v.reason };
    await markFailing(pool, source.id, v.reason);
    return { kind: 'failed', rows, reason: v.reason };
  };
  let { currency, timeZone } = source;
  if (!currency || !timeZone) {
    const a = await adAccount(config, source);
    if (a.kind !== 'account') return stop(a);
    ({ currency, timeZone } = a);
  }
  const names = await campaignNames(config, source);
  if (!(names instanceof Map))
    return names.kind === 'ok'
      ? stop({ kind: 'wait', ms: DEFAULT_WAIT_MS, reason: 'snapchat: no campaigns' })
      : stop(names);
  const parts = splitWindow(window, SNAP_MAX_DAYS);
  const cursor = await resumeCursor<{ from: string }>(pool, source.id, window);
  for (
    let i = Math.max(0, cursor ? parts.findIndex((p) => p.from === cursor.from) : 0);
    i < parts.length;
    i++
  ) {
    const part = parts[i]!;
    const u = new URL(`${base(config, source)}/stats`);
    u.searchParams.set('granularity', 'DAY');
    u.searchParams.set('breakdown', 'campaign');
    u.searchParams.set('fields', SNAP_STATS_FIELDS);
    u.searchParams.set('start_time', snapMidnight(part.from, timeZone));
    u.searchParams.set(
      'end_time',
      snapMidnight(isoDay(Date.parse(`${part.to}T00:00:00Z`) + 86_400_000), timeZone),
    );
    const v = await get(config, source, u.toString());
    if (v.kind !== 'ok') return stop(v);
    const page = snapRows(v.body, currency, names);
    if (page === null)
      return stop({
        kind: 'refused',
        reason: truncateError(
          `snapchat: an unreadable stats answer: ${JSON.stringify(v.body).slice(0, 200)}`,
        ),
      });
    const next = i + 1 < parts.length ? { from: parts[i + 1]!.from } : null;
    await writeSpendPage(pool, source.id, window, page, next);
    rows += page.length;
    addPage(spend, page);
  }
  return { kind: 'done', rows, spend };
}

export const snapchatSpendImporter: SpendImporter = { platform: 'snapchat', check, importDays };
