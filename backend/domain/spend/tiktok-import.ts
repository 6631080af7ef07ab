import type { Config } from '../../config.js';
import type { Pool } from '../../db/pool.js';
import { isRecord, parseJsonObject, stringField, truncateError } from '../../platforms/response.js';
import type { CheckOutcome, ImportOutcome, ImportWindow, SpendImporter, SpendSource } from './importer.js';
import {
  addPage,
  countOrNull,
  decimalOrNull,
  markFailing,
  resumeCursor,
  type SpendRow,
  splitWindow,
  writeSpendPage,
} from './spend-page.js';
import { getAnswer } from './spend-http.js';

/**
 * TikTok spend (docs/spend-tiktok.md): `GET {TIKTOK_API_URL}/open_api/v1.3/report/integrated/get/`,
 * a BASIC report at `data_level=AUCTION_CAMPAIGN` by `campaign_id` and `stat_time_day`, with the
 * token in the `Access-Token` header. Spend is a decimal string in the advertiser's currency,
 * which the report does not name: it is read from `advertiser/info/` (as `check` does). A daily
 * report covers at most 30 days, so a window is read in 30-day parts, each paged with `page`,
 * `page_size` and `page_info.total_page`; the part and page to go on from are stored with each
 * page written.
 *
 * TikTok answers HTTP 200 with a `code`: 40100 (requests too frequent) pauses the import for a
 * minute, TikTok giving no wait; 40001, 40102, 40104 and 40105 (no permission, the token expired,
 * missing or revoked) mark the source failing; 40700 and 50000 (TikTok's own trouble) pause it.
 */
export const TIKTOK_MAX_DAYS = 30;
export const TIKTOK_PAGE_SIZE = 1000;
export const TIKTOK_METRICS = ['campaign_name', 'spend', 'impressions', 'clicks'] as const;
export const TIKTOK_DIMENSIONS = ['campaign_id', 'stat_time_day'] as const;

const TIMEOUT_MS = 30_000;
const DEFAULT_WAIT_MS = 60_000;
const REFUSED_CODES = new Set([40001, 40002, 40102, 40104, 40105, 40106]);

interface Cursor {
  /** The first day of the 30-day part being read. */
  from: string;
  page: number;
}

type Verdict =
  | { kind: 'ok'; data: Record<string, unknown> }
  | { kind: 'wait'; ms: number; reason: string }
  | { kind: 'refused'; reason: string };

/** Pure: what a TikTok answer means. Exported for table-driven tests. */
export function classifyTikTokAnswer(
  res: { status: number; bodyText: string } | { networkError: string },
): Verdict {
  if ('networkError' in res)
    return { kind: 'wait', ms: DEFAULT_WAIT_MS, reason: `tiktok: network error: ${res.networkError}` };
  const body = parseJsonObject(res.bodyText);
  const code = typeof body?.code === 'number' ? body.code : undefined;
  if (res.status === 200 && code === 0 && isRecord(body?.data)) return { kind: 'ok', data: body.data };
  const reason = truncateError(
    `tiktok ${res.status} (code ${code ?? 'none'}) ${stringField(body, 'message') ?? res.bodyText.slice(0, 200)}`,
  );
  if (code !== undefined && REFUSED_CODES.has(code)) return { kind: 'refused', reason };
  if (res.status === 401 || res.status === 403) return { kind: 'refused', reason };
  return { kind: 'wait', ms: DEFAULT_WAIT_MS, reason };
}

/** One row of `data.list` as spend; null when it is not one TikTok writes. */
export function tiktokRow(r: unknown, currency: string): SpendRow | null {
  if (!isRecord(r) || !isRecord(r.dimensions) || !isRecord(r.metrics)) return null;
  const id = r.dimensions.campaign_id;
  // stat_time_day is written "2026-11-01 00:00:00", in the advertiser's time zone.
  const day =
    typeof r.dimensions.stat_time_day === 'string'
      ? /^(\d{4}-\d{2}-\d{2})( 00:00:00)?$/.exec(r.dimensions.stat_time_day)?.[1]
      : undefined;
  const spend = decimalOrNull(r.metrics.spend ?? '0');
  const impressions = countOrNull(r.metrics.impressions);
  const clicks = countOrNull(r.metrics.clicks);
  if (
    (typeof id !== 'string' && typeof id !== 'number') ||
    !/^\d+$/.test(String(id)) ||
    !day ||
    spend === null ||
    impressions === null ||
    clicks === null
  )
    return null;
  return {
    day,
    campaignId: String(id),
    campaignName: typeof r.metrics.campaign_name === 'string' ? r.metrics.campaign_name : '',
    currency,
    spend,
    impressions,
    clicks,
  };
}

async function get(
  config: Config,
  source: SpendSource,
  path: string,
  params: Record<string, string>,
): Promise<Verdict> {
  const u = new URL(`${config.TIKTOK_API_URL.replace(/\/+$/, '')}/open_api/v1.3/${path}`);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  const res = await getAnswer(
    u.toString(),
    { 'Access-Token': source.credentials.accessToken ?? '' },
    TIMEOUT_MS,
  );
  return classifyTikTokAnswer(res);
}

async function advertiserInfo(
  config: Config,
  source: SpendSource,
): Promise<Verdict | { kind: 'info'; currency: string; timeZone: string; name?: string }> {
  const v = await get(config, source, 'advertiser/info/', {
    advertiser_ids: JSON.stringify([source.accountRef]),
    fields: JSON.stringify(['name', 'currency', 'timezone']),
  });
  if (v.kind !== 'ok') return v;
  const list = Array.isArray(v.data.list) ? v.data.list.filter(isRecord) : [];
  const a = list.find((x) => String(x.advertiser_id ?? '') === source.accountRef) ?? list[0];
  const currency = stringField(a, 'currency');
  const timeZone = stringField(a, 'timezone');
  if (!currency || !timeZone)
    return {
      kind: 'refused',
      reason: `tiktok: advertiser ${source.accountRef} is not one this token may read`,
    };
  const name = stringField(a, 'name');
  return { kind: 'info', currency, timeZone, ...(name ? { name } : {}) };
}

async function check(config: Config, source: SpendSource): Promise<CheckOutcome> {
  const a = await advertiserInfo(config, source);
  if (a.kind === 'info')
    return { kind: 'ok', currency: a.currency, timeZone: a.timeZone, ...(a.name ? { name: a.name } : {}) };
  return { kind: 'refused', reason: a.kind === 'ok' ? 'tiktok: no advertiser' : a.reason };
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
  let currency = source.currency;
  if (!currency) {
    const a = await advertiserInfo(config, source);
    if (a.kind !== 'info')
      return stop(a.kind === 'ok' ? { kind: 'refused', reason: 'tiktok: no advertiser' } : a);
    currency = a.currency;
  }
  const parts = splitWindow(window, TIKTOK_MAX_DAYS);
  const cursor = await resumeCursor<Cursor>(pool, source.id, window);
  let i = cursor
    ? Math.max(
        0,
        parts.findIndex((p) => p.from === cursor.from),
      )
    : 0;
  let page = cursor && parts[i]?.from === cursor.from ? cursor.page : 1;
  while (i < parts.length) {
    const part = parts[i]!;
    const v = await get(config, source, 'report/integrated/get/', {
      advertiser_id: source.accountRef,
      report_type: 'BASIC',
      data_level: 'AUCTION_CAMPAIGN',
      dimensions: JSON.stringify(TIKTOK_DIMENSIONS),
      metrics: JSON.stringify(TIKTOK_METRICS),
      start_date: part.from,
      end_date: part.to,
      page: String(page),
      page_size: String(TIKTOK_PAGE_SIZE),
    });
    if (v.kind !== 'ok') return stop(v);
    const list = Array.isArray(v.data.list) ? v.data.list : [];
    const out: SpendRow[] = [];
    for (const r of list) {
      const row = tiktokRow(r, currency);
      if (!row)
        return stop({
          kind: 'refused',
          reason: truncateError(`tiktok: an unreadable row: ${JSON.stringify(r).slice(0, 200)}`),
        });
      out.push(row);
    }
    const info = isRecord(v.data.page_info) ? v.data.page_info : {};
    const totalPages = typeof info.total_page === 'number' ? info.total_page : 1;
    let next: Cursor | null;
    if (page < totalPages) next = { from: part.from, page: page + 1 };
    else next = i + 1 < parts.length ? { from: parts[i + 1]!.from, page: 1 } : null;
    await writeSpendPage(pool, source.id, window, out, next);
    rows += out.length;
    addPage(spend, out);
    if (next === null) break;
    if (next.from !== part.from) i++;
    page = next.page;
  }
  return { kind: 'done', rows, spend };
}

export const tiktokSpendImporter: SpendImporter = { platform: 'tiktok', check, importDays };
