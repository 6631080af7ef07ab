// A loopback fake of Snap's Marketing API (https://adsapi.snapchat.com/v1) for spend: an ad account
// (`GET /v1/adaccounts/{id}`), its campaigns (`GET /v1/adaccounts/{id}/campaigns`, paged with
// `limit` and `paging.next_link`) and its measurement (`GET /v1/adaccounts/{id}/stats` with
// `granularity`, `breakdown`, `fields`, `start_time`, `end_time`), in the shapes the Marketing API
// reference gives: `request_status`, `request_id`, one `sub_request_status` per entity,
// `timeseries_stats[].timeseries_stat.breakdown_stats.campaign[].timeseries[].stats`, spend in
// micro-currency, swipes for clicks.
//
// Strict: a missing or unknown bearer is 401; an account the token may not read is 403; an unknown
// parameter or field, a `limit` outside 50–1000, DAY stats whose start or end is not midnight in
// the account's own time zone ("Timeseries queries with DAY granularity must have a start time
// that is the start of day (00:00:00) for the account's timezone"), or that span more than 32
// days, are 400 with Snap's error shape. Can be told to answer 429 and to restate a day.
import { randomBytes } from 'node:crypto';
import { FakeServer, type ReceivedRequest, type Reply, type ReplyFailure } from './base.js';

export interface SnapSpendRow {
  campaignId: string;
  date: string;
  /** Micro-currency. */
  spend: number;
  impressions: number;
  swipes: number;
}

interface AdAccount {
  token: string;
  name: string;
  currency: string;
  timezone: string;
  campaigns: { id: string; name: string }[];
  rows: SnapSpendRow[];
}

const STATS_PARAMS = new Set([
  'granularity',
  'breakdown',
  'fields',
  'start_time',
  'end_time',
  'swipe_up_attribution_window',
  'view_attribution_window',
  'action_report_time',
  'omit_empty',
  'conversion_source_types',
]);
const STATS_FIELDS = new Set([
  'impressions',
  'swipes',
  'spend',
  'video_views',
  'quartile_1',
  'paid_impressions',
]);
const MAX_DAY_RANGE = 32;
const DAY_MS = 86_400_000;

export class SnapchatReportingFake extends FakeServer {
  readonly accounts = new Map<string, AdAccount>();
  private limitAfter: number | null = null;
  retryAfterSec = 30;
  /** Snap may answer fewer campaigns than `limit` asks: smaller pages here exercise `next_link`. */
  campaignPageSize = 1000;
  /** OAuth clients and the refresh tokens Snap's OAuth server accepts (refresh token → ad account). */
  readonly oauthClients = new Map([['snap-client', 'snap-secret']]);
  readonly refreshTokens = new Map<string, string>();
  /** Access tokens issued from refresh tokens → the ad account they may read. */
  private issued = new Map<string, string>();

  /** The refresh token stops working and the access tokens issued from it too: access revoked. */
  revokeRefreshToken(refreshToken: string): void {
    const account = this.refreshTokens.get(refreshToken);
    this.refreshTokens.delete(refreshToken);
    for (const [t, a] of this.issued) if (a === account) this.issued.delete(t);
  }

  tokenRequests(): ReceivedRequest[] {
    return this.received.filter((r) => r.path === '/login/oauth2/access_token');
  }

  constructor() {
    super('snapchat-reporting');
  }

  /** After `n` more answers, the next request gets 429: a limit struck mid-import. */
  rateLimitAfter(n: number): this {
    this.limitAfter = n;
    return this;
  }

  stats(): ReceivedRequest[] {
    return this.received.filter((r) => r.path.endsWith('/stats'));
  }

  protected resetState(): void {
    this.limitAfter = null;
    this.issued.clear();
  }

  protected route(req: ReceivedRequest): Reply {
    if (req.path === '/login/oauth2/access_token') return this.token(req);
    const m = /^\/v1\/adaccounts\/([0-9a-f-]{36})(\/campaigns|\/stats)?$/.exec(req.path);
    if (req.method !== 'GET' || !m) return error(404, 'E1005', `Resource not found: ${req.path}`);
    const auth = String(req.headers.authorization ?? '');
    const token = auth.startsWith('Bearer ') ? auth.slice(7) : '';
    if (!token || (!this.issued.has(token) && ![...this.accounts.values()].some((a) => a.token === token)))
      return error(401, 'E3001', 'Unauthorized: the access token is invalid or has expired.');
    const a = this.accounts.get(m[1]!);
    if (!a || (a.token !== token && this.issued.get(token) !== m[1]))
      return error(403, 'E3003', 'None of the requested actions [READ_CONTAINER_ENTITY] can be authorized.');
    if (this.limitAfter !== null && this.limitAfter-- <= 0) {
      this.limitAfter = null;
      return this.failureReply({ type: 'rateLimit', retryAfterSec: this.retryAfterSec });
    }
    if (m[2] === '/campaigns') return this.campaigns(req, m[1]!, a);
    if (m[2] === '/stats') return this.statsOf(req, m[1]!, a);
    return ok({
      adaccounts: [
        {
          sub_request_status: 'SUCCESS',
          adaccount: {
            id: m[1],
            updated_at: '2026-01-01T00:00:00.000Z',
            created_at: '2026-01-01T00:00:00.000Z',
            name: a.name,
            type: 'PARTNER',
            status: 'ACTIVE',
            organization_id: '507d7a57-94de-4239-8a74-e93c00ca53e6',
            currency: a.currency,
            timezone: a.timezone,
          },
        },
      ],
    });
  }

  /** RFC 6749 §6 refresh at Snap's OAuth server, the client's id and secret in the form body. */
  private token(req: ReceivedRequest): Reply {
    const form = req.body as Record<string, string> | undefined;
    if (
      req.method !== 'POST' ||
      !String(req.headers['content-type'] ?? '').includes('application/x-www-form-urlencoded') ||
      !form
    )
      return { status: 400, body: { error: 'invalid_request', error_description: 'Expected a form body.' } };
    if (form.grant_type !== 'refresh_token')
      return {
        status: 400,
        body: { error: 'unsupported_grant_type', error_description: 'Unsupported grant type.' },
      };
    if (this.oauthClients.get(form.client_id ?? '') !== form.client_secret)
      return {
        status: 401,
        body: { error: 'invalid_client', error_description: 'Client authentication failed.' },
      };
    const account = this.refreshTokens.get(form.refresh_token ?? '');
    if (account === undefined)
      return { status: 400, body: { error: 'invalid_grant', error_description: 'Invalid refresh token.' } };
    const accessToken = randomBytes(24).toString('base64url');
    this.issued.set(accessToken, account);
    return {
      status: 200,
      body: {
        access_token: accessToken,
        token_type: 'Bearer',
        expires_in: 1800,
        refresh_token: form.refresh_token,
        scope: 'snapchat-marketing-api',
      },
    };
  }

  private campaigns(req: ReceivedRequest, id: string, a: AdAccount): Reply {
    const unknown = Object.keys(req.query).find((k) => k !== 'limit' && k !== 'cursor');
    if (unknown !== undefined) return error(400, 'E1008', `Unsupported query parameter: ${unknown}`);
    const limit = Number(req.query.limit ?? '1000');
    if (!Number.isInteger(limit) || limit < 50 || limit > 1000)
      return error(400, 'E1008', 'limit must be an integer between 50 and 1000');
    const start = req.query.cursor ? Number(Buffer.from(req.query.cursor, 'base64url').toString()) : 0;
    const page = a.campaigns.slice(start, start + Math.min(limit, this.campaignPageSize));
    const body: Record<string, unknown> = {
      campaigns: page.map((c) => ({
        sub_request_status: 'SUCCESS',
        campaign: {
          id: c.id,
          name: c.name,
          ad_account_id: id,
          status: 'ACTIVE',
          objective: 'BRAND_AWARENESS',
        },
      })),
    };
    if (start + page.length < a.campaigns.length) {
      const cursor = Buffer.from(String(start + page.length)).toString('base64url');
      body.paging = {
        next_link: `${this.url}/v1/adaccounts/${id}/campaigns?cursor=${cursor}&limit=${limit}`,
      };
    } else body.paging = {};
    return ok(body);
  }

  private statsOf(req: ReceivedRequest, id: string, a: AdAccount): Reply {
    const q = req.query;
    const unknown = Object.keys(q).find((k) => !STATS_PARAMS.has(k));
    if (unknown !== undefined) return error(400, 'E1008', `Unsupported query parameter: ${unknown}`);
    if (q.granularity !== 'DAY') return error(400, 'E1008', 'this fake answers granularity=DAY only');
    if (q.breakdown !== 'campaign') return error(400, 'E1008', 'this fake answers breakdown=campaign only');
    const fields = (q.fields ?? '').split(',');
    const bad = fields.find((f) => !STATS_FIELDS.has(f));
    if (bad !== undefined) return error(400, 'E1008', `Unsupported stats field: ${bad}`);
    const start = Date.parse(q.start_time ?? '');
    const end = Date.parse(q.end_time ?? '');
    if (!/[+-]\d{2}:\d{2}$|Z$/.test(q.start_time ?? '') || Number.isNaN(start) || Number.isNaN(end))
      return error(400, 'E1008', 'start_time and end_time must be ISO 8601 date-times with an offset');
    for (const t of [start, end])
      if (localTime(a.timezone, t) !== '00:00:00')
        return error(
          400,
          'E1008',
          `Unsupported Stats Query: Timeseries queries with DAY granularity must have a start time that is the start of day (00:00:00) for the account's timezone. This account's timezone is: ${a.timezone}`,
        );
    const firstDay = localDay(a.timezone, start);
    const endDay = localDay(a.timezone, end);
    const days = Math.round((Date.parse(endDay) - Date.parse(firstDay)) / DAY_MS);
    if (days < 1 || days > MAX_DAY_RANGE)
      return error(
        400,
        'E1008',
        `Unsupported Stats Query: DAY granularity supports a range of 1 to ${MAX_DAY_RANGE} days`,
      );
    const dayList = Array.from({ length: days }, (_, i) =>
      new Date(Date.parse(firstDay) + i * DAY_MS).toISOString().slice(0, 10),
    );
    const campaign = a.campaigns.map((c) => ({
      id: c.id,
      type: 'CAMPAIGN',
      granularity: 'DAY',
      start_time: q.start_time,
      end_time: q.end_time,
      timeseries: dayList.map((d, i) => {
        const r = a.rows.find((x) => x.campaignId === c.id && x.date === d);
        const all: Record<string, number> = {
          impressions: r?.impressions ?? 0,
          swipes: r?.swipes ?? 0,
          spend: r?.spend ?? 0,
          video_views: 0,
          quartile_1: 0,
          paid_impressions: r?.impressions ?? 0,
        };
        return {
          start_time: withOffset(d, a.timezone),
          end_time: i + 1 < dayList.length ? withOffset(dayList[i + 1]!, a.timezone) : q.end_time,
          stats: Object.fromEntries(fields.map((f) => [f, all[f]])),
        };
      }),
    }));
    return ok({
      timeseries_stats: [
        {
          sub_request_status: 'SUCCESS',
          timeseries_stat: {
            id,
            type: 'AD_ACCOUNT',
            granularity: 'DAY',
            start_time: q.start_time,
            end_time: q.end_time,
            finalized_data_end_time: q.end_time,
            breakdown_stats: { campaign },
          },
        },
      ],
    });
  }

  protected failureReply(kind: ReplyFailure): Reply {
    switch (kind.type) {
      case 'rateLimit':
        return {
          ...error(429, 'E1010', 'Too many requests'),
          headers: { 'retry-after': String(kind.retryAfterSec) },
        };
      case 'invalidToken':
        return error(401, 'E3001', 'Unauthorized: the access token is invalid or has expired.');
      case 'status':
        return error(kind.status, 'E2001', 'Internal server error');
    }
  }
}

function ok(body: Record<string, unknown>): Reply {
  return { status: 200, body: { request_status: 'SUCCESS', request_id: requestId(), ...body } };
}

function error(status: number, code: string, message: string): Reply {
  return {
    status,
    body: {
      request_status: 'ERROR',
      request_id: requestId(),
      debug_message: message,
      display_message: message,
      error_code: code,
    },
  };
}

function requestId(): string {
  return randomBytes(24).toString('hex');
}

const formats = new Map<string, Intl.DateTimeFormat>();
const midnights = new Map<string, string>();

function parts(timeZone: string, ms: number): Record<string, string> {
  let f = formats.get(timeZone);
  if (!f) formats.set(timeZone, (f = formatFor(timeZone)));
  return Object.fromEntries(f.formatToParts(ms).map((p) => [p.type, p.value]));
}

function formatFor(timeZone: string): Intl.DateTimeFormat {
  return new Intl.DateTimeFormat('en-CA', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    timeZoneName: 'longOffset',
  });
}

function localTime(timeZone: string, ms: number): string {
  const p = parts(timeZone, ms);
  return `${p.hour}:${p.minute}:${p.second}`;
}

function localDay(timeZone: string, ms: number): string {
  const p = parts(timeZone, ms);
  return `${p.year}-${p.month}-${p.day}`;
}

/** Local midnight of `day` in `timeZone`, written as Snap writes interval bounds. */
function withOffset(day: string, timeZone: string): string {
  const key = `${timeZone} ${day}`;
  const known = midnights.get(key);
  if (known) return known;
  // Try the offsets a zone can have; the right one puts local midnight on this day.
  for (let m = -14 * 60; m <= 14 * 60; m += 15) {
    const t = Date.parse(`${day}T00:00:00Z`) - m * 60_000;
    if (localDay(timeZone, t) === day && localTime(timeZone, t) === '00:00:00') {
      const off = parts(timeZone, t).timeZoneName?.replace('GMT', '') || '+00:00';
      midnights.set(key, `${day}T00:00:00.000${off}`);
      return `${day}T00:00:00.000${off}`;
    }
  }
  throw new Error(`no midnight on ${day} in ${timeZone}`);
}
