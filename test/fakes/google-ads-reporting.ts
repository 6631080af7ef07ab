// A loopback fake of the Google Ads API's reporting side: `GoogleAdsService.Search` and
// `SearchStream` (`POST /{version}/customers/{id}/googleAds:search|:searchStream`) answering GAQL
// over `campaign` and `customer`, and Google's OAuth token endpoint (`POST /token`,
// grant_type=refresh_token). Built from googleapis/google/ads/googleads/{version}/services/
// google_ads_service.proto (SearchGoogleAdsRequest: customer_id, query, page_token, page_size
// (refused since v17: PAGE_SIZE_NOT_SUPPORTED), validate_only, return_total_results_count,
// summary_row_setting; SearchGoogleAdsResponse: results, next_page_token, field_mask,
// total_results_count, query_resource_consumption), the errors/*.proto enums, and proto3 JSON as
// the REST API writes it (lowerCamelCase names, int64 as strings, zero values left out).
//
// Strict: a missing or unknown developer-token (RequestError.DEVELOPER_TOKEN_PARAMETER_MISSING,
// AuthenticationError.DEVELOPER_TOKEN_INVALID), one not approved for production accounts
// (AuthorizationError.DEVELOPER_TOKEN_NOT_APPROVED), a bearer it did not issue (UNAUTHENTICATED),
// a field it does not know (QueryError.UNRECOGNIZED_FIELD), `segments.date` selected without a
// finite BETWEEN range, a date that is not 'YYYY-MM-DD' (QueryError.INVALID_VALUE_WITH_BETWEEN_OPERATOR),
// an unknown body field. Search pages hold `pageSize` rows (Google's is a fixed 10,000; smaller
// here so paging is exercised), page tokens are bound to their query.
import { randomBytes } from 'node:crypto';
import { FakeServer, type ReceivedRequest, type Reply, type ReplyFailure } from './base.js';

export interface GoogleSpendRow {
  campaignId: string;
  campaignName: string;
  date: string;
  costMicros: string;
  impressions: string;
  clicks: string;
}

interface Customer {
  currencyCode: string;
  timeZone: string;
  descriptiveName: string;
  rows: GoogleSpendRow[];
  /** Developer tokens in test mode are refused for this (production) account. */
  production: boolean;
}

const FIELDS: Record<string, string[]> = {
  campaign: [
    'campaign.id',
    'campaign.name',
    'campaign.status',
    'segments.date',
    'metrics.cost_micros',
    'metrics.impressions',
    'metrics.clicks',
    'customer.id',
    'customer.currency_code',
    'customer.time_zone',
  ],
  customer: ['customer.id', 'customer.currency_code', 'customer.time_zone', 'customer.descriptive_name'],
};
const BODY_FIELDS = new Set([
  'query',
  'pageToken',
  'pageSize',
  'validateOnly',
  'returnTotalResultsCount',
  'summaryRowSetting',
]);
const GAQL =
  /^SELECT\s+(.+?)\s+FROM\s+(\w+)(?:\s+WHERE\s+segments\.date\s+BETWEEN\s+'([^']*)'\s+AND\s+'([^']*)')?\s*$/i;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

export class GoogleAdsReportingFake extends FakeServer {
  readonly customers = new Map<string, Customer>();
  /** Rows per Search page (Google's is a fixed 10,000). */
  pageSize = 10_000;
  /** Developer tokens Google knows, and which of them are approved beyond test accounts. */
  readonly developerTokens = new Map<string, { approved: boolean }>([['dev-token', { approved: true }]]);
  readonly oauthClients = new Map([['client-id', 'client-secret']]);
  readonly refreshTokens = new Set(['refresh-token']);
  /** Access tokens accepted: issued by /token, or given. */
  readonly accessTokens = new Set<string>();
  /** Quota retry delay sent with an injected rate limit (Google's `quotaErrorDetails.retryDelay`). */
  retryDelaySec = 30;
  private pageTokens = new Map<string, { query: string; offset: number }>();
  private limitAfter: number | null = null;

  constructor() {
    super('google-ads-reporting');
  }

  /** Later refreshes answer invalid_grant and issued access tokens stop working: access revoked. */
  revoke(refreshToken: string): void {
    this.refreshTokens.delete(refreshToken);
    this.accessTokens.clear();
  }

  /** After `n` more searches are answered, the next one gets the quota answer (a limit struck mid-import). */
  rateLimitAfter(n: number): this {
    this.limitAfter = n;
    return this;
  }

  searches(): ReceivedRequest[] {
    return this.received.filter((r) => r.path.includes('googleAds:search'));
  }

  protected resetState(): void {
    this.pageTokens.clear();
    this.accessTokens.clear();
    this.limitAfter = null;
  }

  protected route(req: ReceivedRequest): Reply {
    if (req.path === '/token') return this.token(req);
    const m = /^\/(v\d+)\/customers\/(\d+)\/googleAds:(search|searchStream)$/.exec(req.path);
    if (req.method !== 'POST' || !m)
      return { status: 404, body: { error: { code: 404, message: 'Not Found', status: 'NOT_FOUND' } } };
    const [, version, cid, method] = m as unknown as [string, string, string, string];
    if (this.limitAfter !== null && this.limitAfter-- <= 0) {
      this.limitAfter = null;
      return this.failureReply({ type: 'rateLimit', retryAfterSec: this.retryDelaySec }, req);
    }
    const auth = String(req.headers.authorization ?? '');
    if (!auth.startsWith('Bearer ') || !this.accessTokens.has(auth.slice(7)))
      return adsError(
        401,
        'UNAUTHENTICATED',
        'Request had invalid authentication credentials.',
        version,
        {
          authenticationError: 'OAUTH_TOKEN_INVALID',
        },
        'Oauth token is invalid.',
      );
    const dev = req.headers['developer-token'];
    if (typeof dev !== 'string' || dev === '')
      return adsError(
        400,
        'INVALID_ARGUMENT',
        'Request contains an invalid argument.',
        version,
        {
          requestError: 'DEVELOPER_TOKEN_PARAMETER_MISSING',
        },
        'The developer-token parameter is required for all requests.',
      );
    const token = this.developerTokens.get(dev);
    if (!token)
      return adsError(
        401,
        'UNAUTHENTICATED',
        'Request had invalid authentication credentials.',
        version,
        {
          authenticationError: 'DEVELOPER_TOKEN_INVALID',
        },
        'The developer token is not valid.',
      );
    const customer = this.customers.get(cid);
    if (!customer)
      return adsError(
        403,
        'PERMISSION_DENIED',
        'The caller does not have permission',
        version,
        {
          authorizationError: 'USER_PERMISSION_DENIED',
        },
        "User doesn't have permission to access customer.",
      );
    if (customer.production && !token.approved)
      return adsError(
        403,
        'PERMISSION_DENIED',
        'The caller does not have permission',
        version,
        {
          authorizationError: 'DEVELOPER_TOKEN_NOT_APPROVED',
        },
        'The developer token is only approved for use with test accounts. To access non-test accounts, apply for Basic or Standard access.',
      );
    const body = req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      return invalid(version, { requestError: 'INVALID_INPUT' }, 'The request body is not a JSON object.');
    const b = body as Record<string, unknown>;
    const unknown = Object.keys(b).find((k) => !BODY_FIELDS.has(k));
    if (unknown !== undefined)
      return {
        status: 400,
        body: {
          error: {
            code: 400,
            message: `Invalid JSON payload received. Unknown name "${unknown}": Cannot find field.`,
            status: 'INVALID_ARGUMENT',
          },
        },
      };
    if (b.pageSize !== undefined)
      return invalid(
        version,
        { requestError: 'PAGE_SIZE_NOT_SUPPORTED' },
        "Setting the page size is not supported. Search Responses will have fixed page size of '10000' rows.",
      );
    if (method === 'searchStream' && b.pageToken !== undefined)
      return {
        status: 400,
        body: {
          error: {
            code: 400,
            message: 'Invalid JSON payload received. Unknown name "pageToken": Cannot find field.',
            status: 'INVALID_ARGUMENT',
          },
        },
      };
    const query = typeof b.query === 'string' ? b.query.trim() : '';
    const q = GAQL.exec(query);
    if (!q)
      return invalid(
        version,
        { queryError: 'UNEXPECTED_INPUT' },
        `Error in query: unexpected input ${query.slice(0, 40)}.`,
      );
    const [, select, resource, since, until] = q as unknown as [string, string, string, string?, string?];
    const allowed = FIELDS[resource];
    if (!allowed)
      return invalid(
        version,
        { queryError: 'INVALID_RESOURCE_NAME' },
        `Error in query: invalid resource name '${resource}'.`,
      );
    const fields = select.split(',').map((f) => f.trim());
    const bad = fields.find((f) => !allowed.includes(f));
    if (bad !== undefined)
      return invalid(
        version,
        { queryError: 'UNRECOGNIZED_FIELD' },
        `Unrecognized field in the query: '${bad}'.`,
      );
    if (since !== undefined && (!DATE.test(since) || !DATE.test(until ?? '')))
      return invalid(
        version,
        { queryError: 'INVALID_VALUE_WITH_BETWEEN_OPERATOR' },
        `Error in segments.date: invalid value '${since}' with BETWEEN operator.`,
      );
    if (fields.includes('segments.date') && since === undefined)
      return invalid(
        version,
        { queryError: 'EXPECTED_FILTERS_ON_DATE_RANGE' },
        'Error in query: segments.date is selected without a finite date range filter.',
      );

    const results =
      resource === 'customer'
        ? [project(fields, cid, customer, undefined)]
        : customer.rows
            .filter((r) => r.date >= (since ?? '') && r.date <= (until ?? ''))
            .sort((a, c) => a.date.localeCompare(c.date) || a.campaignId.localeCompare(c.campaignId))
            .map((r) => project(fields, cid, customer, r));
    const fieldMask = fields.map(camel).join(',');
    const requestId = randomBytes(11).toString('base64url');
    if (method === 'searchStream') {
      const batches = [];
      for (let i = 0; i < Math.max(results.length, 1); i += this.pageSize)
        batches.push({ results: results.slice(i, i + this.pageSize), fieldMask, requestId });
      return { status: 200, body: batches };
    }
    let offset = 0;
    if (b.pageToken !== undefined) {
      const t = this.pageTokens.get(String(b.pageToken));
      if (!t || t.query !== query)
        return invalid(version, { requestError: 'INVALID_PAGE_TOKEN' }, 'Page token is invalid.');
      offset = t.offset;
    }
    const page = results.slice(offset, offset + this.pageSize);
    const out: Record<string, unknown> = {
      results: page,
      fieldMask,
      requestId,
      queryResourceConsumption: String(page.length),
    };
    if (b.returnTotalResultsCount === true) out.totalResultsCount = String(results.length);
    if (offset + page.length < results.length) {
      const next = randomBytes(12).toString('base64url');
      this.pageTokens.set(next, { query, offset: offset + page.length });
      out.nextPageToken = next;
    }
    return { status: 200, body: out };
  }

  /** RFC 6749 §6 refresh with the client's id and secret in the form body, as Google's libraries send it. */
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
        body: { error: 'unsupported_grant_type', error_description: 'Invalid grant_type.' },
      };
    if (this.oauthClients.get(form.client_id ?? '') !== form.client_secret)
      return {
        status: 401,
        body: { error: 'invalid_client', error_description: 'The OAuth client was not found.' },
      };
    if (!this.refreshTokens.has(form.refresh_token ?? ''))
      return {
        status: 400,
        body: { error: 'invalid_grant', error_description: 'Token has been expired or revoked.' },
      };
    const accessToken = `ya29.${randomBytes(12).toString('base64url')}`;
    this.accessTokens.add(accessToken);
    return {
      status: 200,
      body: {
        access_token: accessToken,
        expires_in: 3599,
        scope: 'https://www.googleapis.com/auth/adwords',
        token_type: 'Bearer',
      },
    };
  }

  protected failureReply(kind: ReplyFailure, req: ReceivedRequest): Reply {
    const version = /^\/(v\d+)\//.exec(req.path)?.[1] ?? 'v21';
    switch (kind.type) {
      case 'rateLimit':
        return {
          status: 429,
          body: {
            error: {
              code: 429,
              message: 'Resource has been exhausted (e.g. check quota).',
              status: 'RESOURCE_EXHAUSTED',
              details: [
                {
                  '@type': `type.googleapis.com/google.ads.googleads.${version}.errors.GoogleAdsFailure`,
                  errors: [
                    {
                      errorCode: { quotaError: 'RESOURCE_EXHAUSTED' },
                      message: 'Too many requests. Retry in 30 seconds.',
                      details: {
                        quotaErrorDetails: {
                          rateScope: 'DEVELOPER',
                          rateName: 'Number of operations for basic access',
                          retryDelay: `${this.retryDelaySec}s`,
                        },
                      },
                    },
                  ],
                  requestId: randomBytes(11).toString('base64url'),
                },
              ],
            },
          },
        };
      case 'invalidToken':
        return adsError(
          401,
          'UNAUTHENTICATED',
          'Request had invalid authentication credentials.',
          version,
          {
            authenticationError: 'OAUTH_TOKEN_REVOKED',
          },
          'The OAuth token has been revoked.',
        );
      case 'status':
        return adsError(
          kind.status,
          kind.status === 503 ? 'UNAVAILABLE' : 'INTERNAL',
          'Internal error encountered.',
          version,
          {
            internalError: 'INTERNAL_ERROR',
          },
          'An internal error has occurred.',
        );
    }
  }
}

/** `campaign.cost_micros` → the JSON path a REST answer uses: `metrics.costMicros`. */
function camel(field: string): string {
  return field.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** One result as proto3 JSON: only the selected fields, int64 as strings, zeros left out. */
function project(
  fields: string[],
  cid: string,
  c: Customer,
  r: GoogleSpendRow | undefined,
): Record<string, unknown> {
  const out: Record<string, Record<string, unknown>> = {};
  const put = (obj: string, key: string, value: unknown) => {
    if (value === undefined || value === '0' || value === '') return;
    out[obj] ??= {};
    out[obj][key] = value;
  };
  for (const f of fields) {
    const [obj, name] = f.split('.') as [string, string];
    const key = camel(name);
    const value =
      f === 'campaign.id'
        ? r?.campaignId
        : f === 'campaign.name'
          ? r?.campaignName
          : f === 'campaign.status'
            ? 'ENABLED'
            : f === 'segments.date'
              ? r?.date
              : f === 'metrics.cost_micros'
                ? r?.costMicros
                : f === 'metrics.impressions'
                  ? r?.impressions
                  : f === 'metrics.clicks'
                    ? r?.clicks
                    : f === 'customer.id'
                      ? cid
                      : f === 'customer.currency_code'
                        ? c.currencyCode
                        : f === 'customer.time_zone'
                          ? c.timeZone
                          : c.descriptiveName;
    put(obj, key, value);
  }
  if (out.campaign && r) out.campaign.resourceName = `customers/${cid}/campaigns/${r.campaignId}`;
  if (out.customer) out.customer.resourceName = `customers/${cid}`;
  return out;
}

function adsError(
  code: number,
  status: string,
  message: string,
  version: string,
  errorCode: Record<string, string>,
  detail: string,
): Reply {
  return {
    status: code,
    body: {
      error: {
        code,
        message,
        status,
        details: [
          {
            '@type': `type.googleapis.com/google.ads.googleads.${version}.errors.GoogleAdsFailure`,
            errors: [{ errorCode, message: detail }],
            requestId: randomBytes(11).toString('base64url'),
          },
        ],
      },
    },
  };
}

function invalid(version: string, errorCode: Record<string, string>, detail: string): Reply {
  return adsError(
    400,
    'INVALID_ARGUMENT',
    'Request contains an invalid argument.',
    version,
    errorCode,
    detail,
  );
}
