// A loopback fake of TikTok's API for Business v1.3 reporting: `GET /open_api/v1.3/report/integrated/get/`
// (synchronous BASIC report) and `GET /open_api/v1.3/advertiser/info/`, as the API reference
// ("Create a synchronous report", "Get ad account details") and the field names of TikTok's
// business-api-sdk describe them. Every answer is HTTP 200 with `{code, message, request_id, data}`.
//
// Strict: the token goes in the `Access-Token` header (missing: 40104, unknown or revoked: 40105);
// an advertiser the token may not read is 40001; `dimensions`, `metrics`, `advertiser_ids` and
// `fields` are JSON arrays; an unknown parameter, dimension or metric, a date that is not
// YYYY-MM-DD, a daily report over more than 30 days, a `page_size` over 1000 are 40002. Pages with
// `page`/`page_size` and answers `page_info {page, page_size, total_number, total_page}`; spend is a
// decimal string, counts are strings, `stat_time_day` is "YYYY-MM-DD 00:00:00". Can be told to
// throttle (40100) and to restate a day (change a row).
import { randomBytes } from 'node:crypto';
import { FakeServer, type ReceivedRequest, type Reply, type ReplyFailure } from './base.js';

export interface TikTokSpendRow {
  campaignId: string;
  campaignName: string;
  date: string;
  spend: string;
  impressions: string;
  clicks: string;
}

interface Advertiser {
  token: string;
  name: string;
  currency: string;
  timezone: string;
  rows: TikTokSpendRow[];
}

const REPORT_PARAMS = new Set([
  'advertiser_id',
  'service_type',
  'report_type',
  'data_level',
  'dimensions',
  'metrics',
  'start_date',
  'end_date',
  'query_lifetime',
  'order_field',
  'order_type',
  'filtering',
  'page',
  'page_size',
  'query_mode',
]);
const DIMENSIONS = new Set([
  'campaign_id',
  'adgroup_id',
  'ad_id',
  'advertiser_id',
  'stat_time_day',
  'stat_time_hour',
]);
const METRICS = new Set([
  'campaign_name',
  'spend',
  'impressions',
  'clicks',
  'ctr',
  'cpc',
  'cpm',
  'reach',
  'conversion',
  'currency',
]);
const INFO_FIELDS = new Set([
  'name',
  'currency',
  'timezone',
  'display_timezone',
  'advertiser_id',
  'status',
  'company',
  'country',
]);
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DAY_MS = 86_400_000;

export class TikTokReportingFake extends FakeServer {
  readonly advertisers = new Map<string, Advertiser>();
  private limitAfter: number | null = null;

  constructor() {
    super('tiktok-reporting');
  }

  /** After `n` more answers, the next request is throttled (40100): a limit struck mid-import. */
  rateLimitAfter(n: number): this {
    this.limitAfter = n;
    return this;
  }

  reports(): ReceivedRequest[] {
    return this.received.filter((r) => r.path.endsWith('/report/integrated/get/'));
  }

  protected resetState(): void {
    this.limitAfter = null;
  }

  protected route(req: ReceivedRequest): Reply {
    const m = /^\/open_api\/v1\.3\/(report\/integrated\/get|advertiser\/info)\/$/.exec(req.path);
    if (!m)
      return {
        status: 404,
        body: { code: 40400, message: `Not found: ${req.path}`, request_id: requestId() },
      };
    if (req.method !== 'GET') return answer(40002, 'Request method not allowed.');
    const token = req.headers['access-token'];
    if (typeof token !== 'string' || token === '')
      return answer(40104, 'Access token is null, please provide a valid access token.');
    if (![...this.advertisers.values()].some((a) => a.token === token))
      return answer(40105, 'Access token is incorrect or has been revoked.');
    if (this.limitAfter !== null && this.limitAfter-- <= 0) {
      this.limitAfter = null;
      return this.failureReply({ type: 'rateLimit', retryAfterSec: 60 });
    }
    return m[1] === 'advertiser/info' ? this.info(req, token) : this.report(req, token);
  }

  private info(req: ReceivedRequest, token: string): Reply {
    const ids = jsonArray(req.query.advertiser_ids);
    if (!ids || ids.length === 0)
      return answer(40002, 'advertiser_ids: Field must be a JSON array of advertiser ids.');
    const fields =
      req.query.fields === undefined ? ['name', 'currency', 'timezone'] : jsonArray(req.query.fields);
    if (!fields) return answer(40002, 'fields: Not a valid list.');
    const bad = fields.find((f) => !INFO_FIELDS.has(f));
    if (bad !== undefined) return answer(40002, `fields: Invalid field: ${bad}.`);
    const list = [];
    for (const id of ids) {
      const a = this.advertisers.get(id);
      if (!a || a.token !== token) return answer(40001, `No permission to operate advertiser ${id}.`);
      const all: Record<string, string> = {
        advertiser_id: id,
        name: a.name,
        currency: a.currency,
        timezone: a.timezone,
        display_timezone: a.timezone,
        status: 'STATUS_ENABLE',
        company: 'Company',
        country: 'DE',
      };
      list.push(Object.fromEntries(['advertiser_id', ...fields].map((f) => [f, all[f]])));
    }
    return answer(0, 'OK', { list });
  }

  private report(req: ReceivedRequest, token: string): Reply {
    const q = req.query;
    const unknown = Object.keys(q).find((k) => !REPORT_PARAMS.has(k));
    if (unknown !== undefined) return answer(40002, `${unknown}: Unknown field.`);
    const a = this.advertisers.get(q.advertiser_id ?? '');
    if (!q.advertiser_id) return answer(40002, 'advertiser_id: Missing data for required field.');
    if (!a || a.token !== token)
      return answer(40001, `No permission to operate advertiser ${q.advertiser_id}.`);
    if (q.report_type !== 'BASIC') return answer(40002, 'report_type: Not a valid choice.');
    if (q.data_level !== 'AUCTION_CAMPAIGN')
      return answer(40002, 'data_level: this fake answers AUCTION_CAMPAIGN only.');
    const dims = jsonArray(q.dimensions);
    const metrics = jsonArray(q.metrics);
    if (!dims || dims.length === 0 || dims.length > 4) return answer(40002, 'dimensions: Not a valid list.');
    const badDim = dims.find((d) => !DIMENSIONS.has(d));
    if (badDim !== undefined) return answer(40002, `dimensions: Invalid dimension: ${badDim}.`);
    if (dims.join() !== 'campaign_id,stat_time_day')
      return answer(40002, 'dimensions: this fake answers campaign_id,stat_time_day only.');
    if (!metrics) return answer(40002, 'metrics: Not a valid list.');
    const badMetric = metrics.find((x) => !METRICS.has(x));
    if (badMetric !== undefined) return answer(40002, `metrics: Invalid metric: ${badMetric}.`);
    const start = q.start_date ?? '';
    const end = q.end_date ?? '';
    if (!DATE.test(start) || !DATE.test(end))
      return answer(40002, 'start_date, end_date: Invalid date format, the format should be YYYY-MM-DD.');
    if (end < start) return answer(40002, 'end_date: end_date must be later than start_date.');
    if ((Date.parse(end) - Date.parse(start)) / DAY_MS + 1 > 30)
      return answer(
        40002,
        'The time span between start_date and end_date cannot exceed 30 days when stat_time_day is a dimension.',
      );
    const page = Number(q.page ?? '1');
    const pageSize = Number(q.page_size ?? '10');
    if (!Number.isInteger(page) || page < 1)
      return answer(40002, 'page: Must be greater than or equal to 1.');
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000)
      return answer(40002, 'page_size: Must be between 1 and 1000.');
    const all = a.rows
      .filter((r) => r.date >= start && r.date <= end)
      .sort((x, y) => x.date.localeCompare(y.date) || x.campaignId.localeCompare(y.campaignId));
    const list = all.slice((page - 1) * pageSize, page * pageSize).map((r) => {
      const values: Record<string, string> = {
        campaign_name: r.campaignName,
        spend: r.spend,
        impressions: r.impressions,
        clicks: r.clicks,
        ctr: '0.00',
        cpc: '0.00',
        cpm: '0.00',
        reach: '0',
        conversion: '0',
        currency: a.currency,
      };
      return {
        dimensions: { campaign_id: r.campaignId, stat_time_day: `${r.date} 00:00:00` },
        metrics: Object.fromEntries(metrics.map((x) => [x, values[x]])),
      };
    });
    return answer(0, 'OK', {
      list,
      page_info: {
        page,
        page_size: pageSize,
        total_number: all.length,
        total_page: Math.ceil(all.length / pageSize),
      },
    });
  }

  protected failureReply(kind: ReplyFailure): Reply {
    switch (kind.type) {
      case 'rateLimit':
        return answer(
          40100,
          'Too many requests. The request frequency exceeds the limit. Please retry later.',
        );
      case 'invalidToken':
        return answer(40105, 'Access token is incorrect or has been revoked.');
      case 'status':
        return {
          status: kind.status,
          body: { code: 50000, message: 'System error.', request_id: requestId() },
        };
    }
  }
}

function answer(code: number, message: string, data: unknown = {}): Reply {
  return { status: 200, body: { code, message, request_id: requestId(), data } };
}

function requestId(): string {
  return `2026112811${randomBytes(10).toString('hex').toUpperCase()}`;
}

function jsonArray(v: string | undefined): string[] | null {
  if (v === undefined) return null;
  try {
    const a: unknown = JSON.parse(v);
    return Array.isArray(a) && a.every((x) => typeof x === 'string') ? a : null;
  } catch {
    return null;
  }
}
