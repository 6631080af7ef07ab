// A loopback fake of Meta's Insights API for ad spend: GET /{version}/act_{id}/insights, as the
// Marketing API reference ("Ad Account Insights", "Insights API: Pagination", "Limits and Best
// Practices", "Rate Limiting") and the AdsInsights object of facebook-nodejs-business-sdk
// (src/objects/ads-insights.js: its Fields and Level enums) describe it. Checked line by line:
// - `fields` must name AdsInsights fields (a subset here: the ones a spend import may ask for);
//   another is `(#100) … is not valid for fields param`.
// - `level` is one of account, adset, ad, campaign (AdsInsights.Level); this fake answers
//   campaign level only and says so for the others.
// - `time_increment` defaults to `all_days` (one row per campaign for the whole range); `1` gives
//   one row per campaign and day; other values (2–90, monthly) are refused here as unsupported.
// - every row carries `date_start` and `date_stop`, asked for or not; numbers are strings.
// - paging is cursor-based: `paging.cursors.{before,after}`, `paging.next` while rows remain,
//   `paging.previous` after the first page; `limit` (default 25) caps a page.
// - every answer carries `X-Business-Use-Case-Usage` ({business id: [{type, call_count,
//   total_cputime, total_time, estimated_time_to_regain_access}]}); over the limit, the insights
//   endpoint answers code 80000 (ads_insights), error_subcode 2446079, is_transient true.
// - an unknown or revoked token is code 190 (OAuthException).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface InsightsRow {
  campaign_id: string;
  campaign_name: string;
  date_start: string;
  spend: string;
  impressions: string;
  clicks: string;
}

/** Fields AdsInsights has (a subset of AdsInsights.Fields: the ones a spend import may ask for). */
const FIELDS = new Set([
  'account_currency',
  'account_id',
  'campaign_id',
  'campaign_name',
  'adset_id',
  'adset_name',
  'spend',
  'impressions',
  'clicks',
  'date_start',
  'date_stop',
  'reach',
  'cpc',
  'cpm',
  'ctr',
  'objective',
]);
const LEVELS = new Set(['account', 'adset', 'ad', 'campaign']);
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/**
 * An ad account as the fake knows it. `name` and `timeZone` are what `GET /act_N` answers (Meta's
 * `timezone_name`, an IANA zone); `adsRead: false` is a token Meta knows that was not granted
 * `ads_read` on the account (code 200).
 */
export interface MetaAdAccount {
  token: string;
  currency: string;
  rows: InsightsRow[];
  name?: string;
  timeZone?: string;
  adsRead?: boolean;
}

/** AdAccount fields `GET /act_N?fields=` may ask for (a subset of the reference's). */
const ACCOUNT_FIELDS = new Set([
  'id',
  'account_id',
  'name',
  'currency',
  'timezone_name',
  'account_status',
  'amount_spent',
  'business_name',
]);

export class MetaInsightsFake {
  private server: Server | null = null;
  url = '';
  /** Rows per ad account (`act_N`) and the token that may read it. */
  readonly accounts = new Map<string, MetaAdAccount>();
  readonly requests: URL[] = [];
  pageSize = 25;
  /** The next N requests answer the business-use-case limit. */
  rateLimited = 0;
  /** Pages answered before `rateLimited` starts counting (a limit struck in the middle of an import). */
  pagesBeforeLimit = 0;
  regainMinutes = 3;

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://fake');
      this.requests.push(u);
      const m = /^\/v\d+\.\d+\/(act_\d+)\/insights$/.exec(u.pathname);
      const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        if (m && !res.hasHeader('x-business-use-case-usage'))
          res.setHeader('x-business-use-case-usage', usage(m[1]!, 12, 0));
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(body));
      };
      const error = (status: number, code: number, message: string, extra: object = {}) =>
        send(status, { error: { message, type: 'OAuthException', code, fbtrace_id: 'Afake', ...extra } });
      const acct = /^\/v\d+\.\d+\/(act_\d+)$/.exec(u.pathname);
      if (req.method === 'GET' && acct)
        return this.answerAccount(acct[1]!, req.headers.authorization, u, send);
      if (req.method !== 'GET' || !m) return error(400, 100, 'Unsupported get request.');
      const token =
        (req.headers.authorization ?? '').replace(/^Bearer /, '') || u.searchParams.get('access_token');
      const account = this.accounts.get(m[1]!);
      if (!token || !account || account.token !== token)
        return error(400, 190, 'Error validating access token: The session has been invalidated.', {
          error_subcode: 460,
        });
      if (account.adsRead === false)
        return error(403, 200, '(#200) Ad account owner has NOT grant ads_management or ads_read permission');
      if (this.rateLimited > 0 && this.pagesBeforeLimit > 0) this.pagesBeforeLimit--;
      else if (this.rateLimited > 0) {
        this.rateLimited--;
        res.setHeader('x-business-use-case-usage', usage(m[1]!, 100, this.regainMinutes));
        return error(
          400,
          80000,
          'There have been too many calls from this ad-account. Wait a bit and try again. For more info, please refer to https://developers.facebook.com/docs/graph-api/overview/rate-limiting#ads-insights.',
          { error_subcode: 2446079, is_transient: true },
        );
      }
      const level = u.searchParams.get('level') ?? 'ad';
      if (!LEVELS.has(level))
        return error(400, 100, '(#100) param level must be one of {ad, adset, campaign, account}');
      if (level !== 'campaign')
        return error(400, 100, `(#100) this fake answers level=campaign only, not ${level}`);
      const increment = u.searchParams.get('time_increment') ?? 'all_days';
      if (increment !== '1' && increment !== 'all_days')
        return error(400, 100, `(#100) this fake answers time_increment 1 or all_days, not ${increment}`);
      const fields = (u.searchParams.get('fields') ?? '').split(',');
      const bad = fields.find((f) => !FIELDS.has(f));
      if (bad !== undefined)
        return error(
          400,
          100,
          `(#100) ${bad} is not valid for fields param. please check https://developers.facebook.com/docs/marketing-api/reference/ads-insights/ for all valid values`,
        );
      let range: { since?: unknown; until?: unknown };
      try {
        range = JSON.parse(u.searchParams.get('time_range') ?? '');
      } catch {
        return error(400, 100, '(#100) time_range must be a JSON object');
      }
      const since = String(range.since);
      const until = String(range.until);
      if (!DATE.test(since) || !DATE.test(until) || since > until)
        return error(400, 100, '(#100) time_range is invalid');
      const daily = account.rows
        .filter((r) => r.date_start >= since && r.date_start <= until)
        .sort(
          (a, b) => a.date_start.localeCompare(b.date_start) || a.campaign_id.localeCompare(b.campaign_id),
        );
      const all =
        increment === '1'
          ? daily.map((r) => ({ ...r, date_stop: r.date_start }))
          : wholeRange(daily, since, until);
      const limit = Math.min(Number(u.searchParams.get('limit') ?? this.pageSize), this.pageSize);
      const after = u.searchParams.get('after');
      const start = after === null ? 0 : Number(Buffer.from(after, 'base64url').toString());
      const page = all.slice(start, start + limit);
      const data = page.map((r) => ({
        ...Object.fromEntries(fields.filter((f) => f in r).map((f) => [f, r[f as keyof InsightsRow]])),
        ...(fields.includes('account_currency') ? { account_currency: account.currency } : {}),
        ...(fields.includes('account_id') ? { account_id: m[1]!.slice(4) } : {}),
        date_start: r.date_start,
        date_stop: r.date_stop,
      }));
      const paging: Record<string, unknown> = {
        cursors: {
          before: Buffer.from(String(start)).toString('base64url'),
          after: Buffer.from(String(start + page.length)).toString('base64url'),
        },
      };
      if (start + page.length < all.length) {
        const next = new URL(u.toString(), this.url);
        next.searchParams.set('after', Buffer.from(String(start + page.length)).toString('base64url'));
        paging.next = `${this.url}${next.pathname}${next.search}`;
      }
      if (start > 0) {
        const prev = new URL(u.toString(), this.url);
        prev.searchParams.delete('after');
        prev.searchParams.set('before', Buffer.from(String(start)).toString('base64url'));
        paging.previous = `${this.url}${prev.pathname}${prev.search}`;
      }
      send(200, { data, paging });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /**
   * `GET /{version}/act_N?fields=…`: the AdAccount node. An unknown token is code 190 (as for
   * Insights), a token without ads_read on the account code 200, an unknown field code 100.
   */
  private answerAccount(
    id: string,
    authorization: string | undefined,
    u: URL,
    send: (status: number, body: unknown) => void,
  ): undefined {
    const error = (status: number, code: number, message: string, extra: object = {}): undefined => {
      send(status, { error: { message, type: 'OAuthException', code, fbtrace_id: 'Afake', ...extra } });
    };
    const token = (authorization ?? '').replace(/^Bearer /, '') || u.searchParams.get('access_token');
    const account = this.accounts.get(id);
    if (!token || !account || account.token !== token)
      return error(400, 190, 'Error validating access token: The session has been invalidated.', {
        error_subcode: 460,
      });
    if (account.adsRead === false)
      return error(403, 200, '(#200) Ad account owner has NOT grant ads_management or ads_read permission');
    const fields = (u.searchParams.get('fields') ?? 'id').split(',');
    const bad = fields.find((f) => !ACCOUNT_FIELDS.has(f));
    if (bad !== undefined)
      return error(400, 100, `(#100) Tried accessing nonexisting field (${bad}) on node type (AdAccount)`);
    const node: Record<string, unknown> = {
      id,
      account_id: id.slice(4),
      name: account.name ?? `Account ${id.slice(4)}`,
      currency: account.currency,
      timezone_name: account.timeZone ?? 'America/Los_Angeles',
      account_status: 1,
      amount_spent: '0',
      business_name: '',
    };
    send(200, { ...Object.fromEntries(fields.map((f) => [f, node[f]])), id });
    return undefined;
  }

  async stop(): Promise<void> {
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}

/** `X-Business-Use-Case-Usage` for an ad account: usage in percent, and the wait once over it. */
function usage(act: string, percent: number, regainMinutes: number): string {
  return JSON.stringify({
    [act.slice(4)]: [
      {
        type: 'ads_insights',
        call_count: percent,
        total_cputime: Math.min(percent, 40),
        total_time: Math.min(percent, 60),
        estimated_time_to_regain_access: regainMinutes,
      },
    ],
  });
}

/** time_increment=all_days: one row per campaign for the whole range, sums written as Meta writes them. */
function wholeRange(
  rows: InsightsRow[],
  since: string,
  until: string,
): (InsightsRow & { date_stop: string })[] {
  const by = new Map<string, InsightsRow & { date_stop: string }>();
  for (const r of rows) {
    const t = by.get(r.campaign_id);
    if (!t) {
      by.set(r.campaign_id, { ...r, date_start: since, date_stop: until });
      continue;
    }
    t.spend = (Math.round((Number(t.spend) + Number(r.spend)) * 100) / 100).toFixed(2);
    t.impressions = String(Number(t.impressions) + Number(r.impressions));
    t.clicks = String(Number(t.clicks) + Number(r.clicks));
  }
  return [...by.values()].sort((a, b) => a.campaign_id.localeCompare(b.campaign_id));
}
