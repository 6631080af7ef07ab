// Fake of the Google Ads API's `customers/{cid}:uploadClickConversions` (REST). Rows fail
// individually: the answer is 200 with an empty result `{}` at each failed index and the reasons
// in `partialFailureError`, which is why `partialFailure: true` is mandatory.
// It also plays Google's OAuth token endpoint (`POST /token`, grant_type=refresh_token): the access
// tokens it issues are accepted by the upload endpoint until they expire or are expired on purpose.
import { isIP } from 'node:net';
import {
  FakeServer,
  isRecord,
  randomId,
  type FakeOptions,
  type ReceivedRequest,
  type Reply,
  type ReplyFailure,
} from './base.js';

export interface GoogleFakeOptions extends FakeOptions {
  /** Accepted `Authorization: Bearer …` tokens. Default `['google-oauth-token']`. */
  oauthTokens?: string[];
  /** Customers `customers:listAccessibleCustomers` lists. Default: those of `conversionActions`, else none. */
  accessibleCustomers?: string[];
  /** Developer tokens whose uploads are allowed; the others get CUSTOMER_NOT_ALLOWLISTED_FOR_THIS_FEATURE. Default: all. */
  allowlistedTokens?: string[];
  /** Accepted `developer-token` header values. Default `['google-dev-token']`. */
  developerTokens?: string[];
  /** When set, rows naming another conversion action fail with NO_CONVERSION_ACTION_FOUND. */
  conversionActions?: string[];
  /** OAuth clients `POST /token` accepts. Default one: `google-client-id` / `google-client-secret`. */
  oauthClients?: { clientId: string; clientSecret: string }[];
  /** Refresh tokens `POST /token` accepts. Default `['google-refresh-token']`. */
  refreshTokens?: string[];
  /** `expires_in` of issued access tokens, in seconds; they stop working after it. Default 3599. */
  accessTokenLifetimeSec?: number;
  /**
   * API versions that answer. Others are sunset (or never existed) and answer 404, as Google's do.
   * Default: those Google serves in November 2026 (v21 was sunset on 5 Aug 2026, v22 on 7 Oct 2026).
   */
  liveVersions?: string[];
}

export const GOOGLE_LIVE_VERSIONS = ['v23', 'v24', 'v25', 'v26'];

export interface ClickConversion {
  gclid?: string;
  gbraid?: string;
  wbraid?: string;
  conversionAction: string;
  conversionDateTime: string;
  conversionValue?: number;
  currencyCode?: string;
  orderId?: string;
  userIdentifiers?: Array<Record<string, string>>;
  consent?: { adUserData?: string };
  userIpAddress?: string;
  [field: string]: unknown;
}

/**
 * Field names of the v25 `UploadClickConversionsRequest`, `ClickConversion`, `UserIdentifier` and
 * `Consent` messages (google-ads-node 25.1.0 protos). JSON may spell them lowerCamel or snake_case;
 * any other name is refused with Google's "Cannot find field" error.
 */
const REQUEST_FIELDS = ['customerId', 'conversions', 'partialFailure', 'validateOnly', 'jobId'];
const CONVERSION_FIELDS = [
  'gclid',
  'gbraid',
  'wbraid',
  'conversionAction',
  'conversionDateTime',
  'conversionValue',
  'currencyCode',
  'orderId',
  'externalAttributionData',
  'customVariables',
  'cartData',
  'userIdentifiers',
  'conversionEnvironment',
  'consent',
  'customerType',
  'userIpAddress',
  'sessionAttributesEncoded',
  'sessionAttributesKeyValuePairs',
];
const IDENTIFIER_FIELDS = [
  'userIdentifierSource',
  'hashedEmail',
  'hashedPhoneNumber',
  'mobileId',
  'thirdPartyUserId',
  'addressInfo',
];
const CONSENT_FIELDS = ['adUserData', 'adPersonalization'];
const CONSENT_VALUES = new Set(['UNSPECIFIED', 'UNKNOWN', 'GRANTED', 'DENIED']);
const IDENTIFIER_SOURCES = new Set(['UNSPECIFIED', 'UNKNOWN', 'FIRST_PARTY', 'THIRD_PARTY']);
const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const camel = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/** The first key of `o` that is not a field of the message, in either spelling. */
function unknownField(o: Record<string, unknown>, fields: readonly string[]): string | undefined {
  return Object.keys(o).find((k) => !fields.includes(camel(k)) || (k !== camel(k) && k !== snake(camel(k))));
}

/** The request-level refusal of a JSON name the message does not have (400, google.rpc.BadRequest). */
function unknownName(name: string, at: string): Reply {
  const description = `Invalid JSON payload received. Unknown name "${name}" at '${at}': Cannot find field.`;
  return {
    status: 400,
    body: {
      error: {
        code: 400,
        message: description,
        status: 'INVALID_ARGUMENT',
        details: [
          {
            '@type': 'type.googleapis.com/google.rpc.BadRequest',
            fieldViolations: [{ field: at, description }],
          },
        ],
      },
    },
  };
}

function invalidEnum(value: unknown, at: string): Reply {
  const description = `Invalid value at '${at}', "${String(value)}"`;
  return {
    status: 400,
    body: {
      error: {
        code: 400,
        message: description,
        status: 'INVALID_ARGUMENT',
        details: [
          {
            '@type': 'type.googleapis.com/google.rpc.BadRequest',
            fieldViolations: [{ field: at, description }],
          },
        ],
      },
    },
  };
}

/** Google's JSON parser refuses unknown names and bad enum values for the whole request. */
function parseProblem(body: Record<string, unknown>): Reply | undefined {
  const top = unknownField(body, REQUEST_FIELDS);
  if (top !== undefined) return unknownName(top, '');
  const rows = body.conversions;
  if (!Array.isArray(rows)) return undefined;
  for (const [i, row] of rows.entries()) {
    if (!isRecord(row)) continue;
    const at = `conversions[${i}]`;
    const field = unknownField(row, CONVERSION_FIELDS);
    if (field !== undefined) return unknownName(field, at);
    const ids = row.userIdentifiers ?? row.user_identifiers;
    if (Array.isArray(ids)) {
      for (const [j, id] of ids.entries()) {
        if (!isRecord(id)) continue;
        const bad = unknownField(id, IDENTIFIER_FIELDS);
        if (bad !== undefined) return unknownName(bad, `${at}.user_identifiers[${j}]`);
        const source = id.userIdentifierSource ?? id.user_identifier_source;
        if (source !== undefined && !IDENTIFIER_SOURCES.has(String(source)))
          return invalidEnum(source, `${at}.user_identifiers[${j}].user_identifier_source`);
      }
    }
    const consent = row.consent;
    if (isRecord(consent)) {
      const bad = unknownField(consent, CONSENT_FIELDS);
      if (bad !== undefined) return unknownName(bad, `${at}.consent`);
      for (const [k, v] of Object.entries(consent)) {
        if (!CONSENT_VALUES.has(String(v))) return invalidEnum(v, `${at}.consent.${snake(camel(k))}`);
      }
    }
  }
  return undefined;
}

/** Canonical lowerCamel names, so that the checks below read one spelling. */
function camelRow(row: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(row).map(([k, v]) => [camel(k), v]));
}

/** `yyyy-mm-dd hh:mm:ss+|-hh:mm` naming a real calendar time and an offset Google knows (±14:00). */
export function validConversionDateTime(text: unknown): boolean {
  if (typeof text !== 'string') return false;
  const m = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})([+-])(\d{2}):(\d{2})$/.exec(text);
  if (!m) return false;
  const [y, mo, d, h, mi, s, , oh, om] = m.slice(1).map(Number) as number[];
  const date = new Date(Date.UTC(y!, mo! - 1, d!, h!, mi!, s!));
  const real =
    date.getUTCFullYear() === y &&
    date.getUTCMonth() === mo! - 1 &&
    date.getUTCDate() === d &&
    date.getUTCHours() === h &&
    date.getUTCMinutes() === mi &&
    date.getUTCSeconds() === s;
  return real && (oh! < 14 || (oh === 14 && om === 0)) && om! < 60;
}

export interface GoogleAcceptedConversion {
  customerId: string;
  version: string;
  receivedAt: number;
  conversion: ClickConversion;
}

export interface GoogleRowError {
  index: number;
  /** e.g. `{ conversionUploadError: 'UNPARSEABLE_GCLID' }` */
  errorCode: Record<string, string>;
  message: string;
}

/** Row outcomes a test can force with `setGclidOutcome`. Any other conversionUploadError name works too. */
export type GoogleRowErrorName =
  | 'UNPARSEABLE_GCLID'
  | 'CLICK_CONVERSION_ALREADY_EXISTS'
  | 'TOO_RECENT_CONVERSION_ACTION'
  | 'TOO_RECENT_EVENT'
  | 'EXPIRED_EVENT'
  | 'CONVERSION_PRECEDES_EVENT'
  | 'RESOURCE_EXHAUSTED'
  | (string & {});

const MESSAGES: Record<string, string> = {
  UNPARSEABLE_GCLID: 'The click identifier could not be decoded.',
  UNPARSEABLE_GBRAID:
    "Can't parse event import data. Check if your gbraid parameter was not modified and try again.",
  UNPARSEABLE_WBRAID:
    "Can't parse event import data. Check if your wbraid parameter was not modified and try again.",
  GBRAID_WBRAID_BOTH_SET: "Can't use both gbraid and wbraid parameters. Use only 1 and try again.",
  INVALID_USER_IDENTIFIER:
    'Make sure you hash user provided data using SHA-256 and ensure you are normalizing according to the guidelines.',
  UNSUPPORTED_USER_IDENTIFIER:
    'The provided user identifiers are not supported. Use only hashed email or phone number and try again.',
  CLICK_CONVERSION_ALREADY_EXISTS: 'This conversion has already been uploaded for this click.',
  TOO_RECENT_CONVERSION_ACTION:
    'The conversion action was created too recently. Try the upload again after 4-6 hours.',
  TOO_RECENT_EVENT:
    'The click associated with this conversion happened too recently. Try the upload again after 4-6 hours.',
  EXPIRED_EVENT:
    "The click associated with this conversion is too old for the conversion action's lookback window.",
  CONVERSION_PRECEDES_EVENT: 'The conversion happened before the click.',
  NO_CONVERSION_ACTION_FOUND: 'The conversion action specified in the upload request cannot be found.',
  RESOURCE_EXHAUSTED: 'Too many requests. Retry later.',
};

type RowFailure = { errorCode: Record<string, string>; message: string; field?: string };

const PATH = /^\/(v\d+)\/customers\/(\d+):uploadClickConversions$/;
const TOKEN_PATH = '/token';
const LIST_PATH = /^\/(v\d+)\/customers:listAccessibleCustomers$/;
const ACTION = /^customers\/(\d+)\/conversionActions\/(\d+)$/;

export class GoogleFake extends FakeServer {
  readonly oauthTokens: Set<string>;
  readonly developerTokens: Set<string>;
  /** Developer tokens Google still allowlists for conversion imports (the rest are refused uploads). */
  readonly allowlistedTokens: Set<string>;
  private readonly conversionActions: Set<string> | undefined;
  private accepted: GoogleAcceptedConversion[] = [];
  private rowErrors: GoogleRowError[][] = [];
  private outcomes = new Map<string, { code: string; remaining: number }>();
  /** Rows a `validateOnly` request found valid (and did not record). */
  validated = 0;
  private readonly oauthClients: Map<string, string>;
  private readonly initialRefreshTokens: string[];
  private refreshTokens: Set<string>;
  /** Issued access token → when it stops working (`Date.now()` ms). */
  private issued = new Map<string, number>();
  accessTokenLifetimeSec: number;
  private readonly liveVersions: Set<string>;
  private readonly accessibleCustomers: string[];

  constructor(options: GoogleFakeOptions = {}) {
    super('google', options);
    this.oauthTokens = new Set(options.oauthTokens ?? ['google-oauth-token']);
    this.developerTokens = new Set(options.developerTokens ?? ['google-dev-token']);
    this.allowlistedTokens = new Set(options.allowlistedTokens ?? this.developerTokens);
    this.conversionActions = options.conversionActions && new Set(options.conversionActions);
    this.oauthClients = new Map(
      (options.oauthClients ?? [{ clientId: 'google-client-id', clientSecret: 'google-client-secret' }]).map(
        (c) => [c.clientId, c.clientSecret],
      ),
    );
    this.initialRefreshTokens = options.refreshTokens ?? ['google-refresh-token'];
    this.refreshTokens = new Set(this.initialRefreshTokens);
    this.accessTokenLifetimeSec = options.accessTokenLifetimeSec ?? 3599;
    this.liveVersions = new Set(options.liveVersions ?? GOOGLE_LIVE_VERSIONS);
    this.accessibleCustomers = options.accessibleCustomers ?? [
      ...new Set(
        (options.conversionActions ?? [])
          .map((a) => ACTION.exec(a)?.[1])
          .filter((c): c is string => c !== undefined),
      ),
    ];
  }

  /** Every access token issued so far stops working at once, as when an hour has passed. */
  expireAccessTokens(): this {
    for (const token of this.issued.keys()) this.issued.set(token, 0);
    return this;
  }

  /** Later refreshes with this token answer `invalid_grant`, as after the user revoked access. */
  revokeRefreshToken(token: string): this {
    this.refreshTokens.delete(token);
    return this;
  }

  /** Whether this fake issued the access token and it still works (the Data Manager fake asks). */
  issuedTokenWorks(token: string): boolean {
    const expiresAt = this.issued.get(token);
    return expiresAt !== undefined && expiresAt > Date.now();
  }

  /** The `POST /token` requests received, answered or not. */
  tokenRequests(): ReceivedRequest[] {
    return this.received.filter((r) => r.path === TOKEN_PATH);
  }

  /** The upload requests received (everything but `/token`). */
  uploadRequests(): ReceivedRequest[] {
    return this.received.filter((r) => r.path !== TOKEN_PATH);
  }

  /** Rows with this click id (gclid, gbraid or wbraid; the order id of a row without one) fail with
   *  `code` for the next `times` uploads (default: always), so retryable outcomes such as
   *  TOO_RECENT_CONVERSION_ACTION can clear up on a later attempt. */
  setGclidOutcome(gclid: string, code: GoogleRowErrorName, times = Infinity): this {
    this.outcomes.set(gclid, { code, remaining: times });
    return this;
  }

  /** Rows accepted so far (failed rows are not included). */
  conversions(customerId?: string): GoogleAcceptedConversion[] {
    return customerId === undefined
      ? [...this.accepted]
      : this.accepted.filter((c) => c.customerId === customerId);
  }

  /** Row errors of each request that reached row validation, in order. */
  partialFailures(): GoogleRowError[][] {
    return this.rowErrors.map((r) => [...r]);
  }

  protected resetState(): void {
    this.accepted = [];
    this.rowErrors = [];
    this.outcomes.clear();
    this.validated = 0;
    this.issued.clear();
    this.refreshTokens = new Set(this.initialRefreshTokens);
  }

  private acceptsBearer(token: string): boolean {
    const expiresAt = this.issued.get(token);
    return this.oauthTokens.has(token) || (expiresAt !== undefined && expiresAt > Date.now());
  }

  /**
   * `CustomerService.ListAccessibleCustomers`: the customers the OAuth user may access directly
   * (no login-customer-id needed); it checks the bearer and developer tokens like any call.
   */
  private listAccessible(version: string, req: ReceivedRequest): Reply {
    if (!this.liveVersions.has(version))
      return {
        status: 404,
        body: {
          error: {
            code: 404,
            message: `Method not found: the Google Ads API ${version} is not available (sunset or unknown).`,
            status: 'NOT_FOUND',
          },
        },
      };
    const auth = req.headers.authorization;
    const bearer = typeof auth === 'string' && auth.startsWith('Bearer ') ? auth.slice(7) : undefined;
    if (!bearer || !this.acceptsBearer(bearer)) return unauthenticated(version, bearer === undefined);
    const devToken = req.headers['developer-token'];
    if (typeof devToken !== 'string' || !this.developerTokens.has(devToken)) {
      return adsError(403, 'PERMISSION_DENIED', 'The caller does not have permission', version, [
        {
          errorCode: { authenticationError: 'DEVELOPER_TOKEN_INVALID' },
          message: 'The developer token is not valid.',
        },
      ]);
    }
    return { status: 200, body: { resourceNames: this.accessibleCustomers.map((c) => `customers/${c}`) } };
  }

  /** RFC 6749 §6 refresh: the client authenticates with id and secret in the form body, as Google's libraries do. */
  private token(req: ReceivedRequest): Reply {
    if (req.method !== 'POST')
      return { status: 405, body: { error: 'invalid_request', error_description: 'Method not allowed' } };
    const form =
      isRecord(req.body) &&
      String(req.headers['content-type'] ?? '').includes('application/x-www-form-urlencoded')
        ? req.body
        : undefined;
    if (!form)
      return {
        status: 400,
        body: {
          error: 'invalid_request',
          error_description: 'Expected an application/x-www-form-urlencoded body.',
        },
      };
    if (form.grant_type !== 'refresh_token')
      return {
        status: 400,
        body: {
          error: 'unsupported_grant_type',
          error_description: `Invalid grant_type: ${String(form.grant_type ?? '')}`,
        },
      };
    const clientId = typeof form.client_id === 'string' ? form.client_id : '';
    if (!this.oauthClients.has(clientId) || this.oauthClients.get(clientId) !== form.client_secret) {
      return {
        status: 401,
        body: { error: 'invalid_client', error_description: 'The OAuth client was not found.' },
      };
    }
    if (typeof form.refresh_token !== 'string' || !this.refreshTokens.has(form.refresh_token)) {
      return {
        status: 400,
        body: { error: 'invalid_grant', error_description: 'Token has been expired or revoked.' },
      };
    }
    const accessToken = `ya29.fake-${randomId(32)}`;
    this.issued.set(accessToken, Date.now() + this.accessTokenLifetimeSec * 1000);
    return {
      status: 200,
      body: {
        access_token: accessToken,
        expires_in: this.accessTokenLifetimeSec,
        scope: 'https://www.googleapis.com/auth/adwords',
        token_type: 'Bearer',
      },
    };
  }

  protected route(req: ReceivedRequest): Reply {
    if (req.path === TOKEN_PATH) return this.token(req);
    const list = LIST_PATH.exec(req.path);
    if (list && req.method === 'GET') return this.listAccessible(list[1] ?? '', req);
    const match = PATH.exec(req.path);
    if (!match || req.method !== 'POST') {
      return {
        status: 404,
        body: {
          error: { code: 404, message: `Method not found: ${req.method} ${req.path}`, status: 'NOT_FOUND' },
        },
      };
    }
    const [, version = 'v17', customerId = ''] = match;
    if (!this.liveVersions.has(version)) {
      // A sunset version's URLs are gone: Google answers as for any unknown method.
      return {
        status: 404,
        body: {
          error: {
            code: 404,
            message: `Method not found: the Google Ads API ${version} is not available (sunset or unknown).`,
            status: 'NOT_FOUND',
          },
        },
      };
    }
    const auth = req.headers.authorization;
    const bearer = typeof auth === 'string' && auth.startsWith('Bearer ') ? auth.slice(7) : undefined;
    if (!bearer || !this.acceptsBearer(bearer)) return unauthenticated(version, bearer === undefined);
    const devToken = req.headers['developer-token'];
    if (typeof devToken !== 'string' || !this.developerTokens.has(devToken)) {
      return adsError(403, 'PERMISSION_DENIED', 'The caller does not have permission', version, [
        {
          errorCode: { authenticationError: 'DEVELOPER_TOKEN_INVALID' },
          message: 'The developer token is not valid.',
        },
      ]);
    }
    if (!this.allowlistedTokens.has(devToken))
      // Since 2026-06-15 a developer token that did not import offline conversions between
      // December 2025 and May 2026 is refused for them (Google Ads developer blog, 2026-05-15).
      return adsError(403, 'PERMISSION_DENIED', 'The caller does not have permission', version, [
        {
          errorCode: { notAllowlistedError: 'CUSTOMER_NOT_ALLOWLISTED_FOR_THIS_FEATURE' },
          message: 'Customer is not allowlisted for accessing this feature.',
        },
      ]);
    if (!isRecord(req.body))
      return {
        status: 400,
        body: {
          error: {
            code: 400,
            message: `Invalid JSON payload received. ${req.bodyError ?? 'Expected an object.'}`,
            status: 'INVALID_ARGUMENT',
          },
        },
      };
    const problem = parseProblem(req.body);
    if (problem) return problem;
    const { conversions, partialFailure } = camelRow(req.body);
    if (!Array.isArray(conversions) || conversions.length === 0) {
      return invalidArgument(
        version,
        { requestError: 'REQUIRED_FIELD_MISSING' },
        'The conversions field is required and must not be empty.',
      );
    }
    if (conversions.length > 2000) {
      return invalidArgument(
        version,
        { conversionUploadError: 'TOO_MANY_CONVERSIONS_IN_REQUEST' },
        'The request contains more than 2000 conversions.',
      );
    }
    if (partialFailure !== true) {
      return invalidArgument(
        version,
        { partialFailureError: 'PARTIAL_FAILURE_MODE_REQUIRED' },
        'The partial failure field must be set to true.',
      );
    }
    const validateOnly = camelRow(req.body).validateOnly === true;
    return this.upload(
      customerId,
      version,
      conversions.map((c) => (isRecord(c) ? camelRow(c) : c)),
      req.receivedAt,
      validateOnly,
    );
  }

  /**
   * Rows are checked one by one; with `validateOnly` nothing is recorded and, as Google does, no
   * results come back (only the errors).
   */
  private upload(
    customerId: string,
    version: string,
    rows: unknown[],
    receivedAt: number,
    validateOnly: boolean,
  ): Reply {
    const errors: (RowFailure & { index: number })[] = [];
    const results: Record<string, unknown>[] = [];
    rows.forEach((row, index) => {
      const failure = this.checkRow(customerId, row);
      if (failure) {
        errors.push({ index, ...failure });
        results.push({});
        return;
      }
      const c = row as ClickConversion;
      if (validateOnly) {
        this.validated++;
        return;
      }
      this.accepted.push({ customerId, version, receivedAt, conversion: c });
      results.push({
        gclid: c.gclid,
        gbraid: c.gbraid,
        wbraid: c.wbraid,
        conversionAction: c.conversionAction,
        conversionDateTime: c.conversionDateTime,
      });
    });
    this.rowErrors.push(errors.map(({ index, errorCode, message }) => ({ index, errorCode, message })));
    if (errors.length === 0) return { status: 200, body: validateOnly ? {} : { results } };
    const partialFailureError = {
      code: 3,
      message: errors
        .map((e) => `${e.message}, at conversions[${e.index}]${e.field ? `.${e.field}` : ''}`)
        .join('\n'),
      details: [
        {
          '@type': `type.googleapis.com/google.ads.googleads.${version}.errors.GoogleAdsFailure`,
          errors: errors.map((e) => ({
            errorCode: e.errorCode,
            message: e.message,
            location: {
              fieldPathElements: [
                { fieldName: 'conversions', index: e.index },
                ...(e.field ? [{ fieldName: e.field }] : []),
              ],
            },
          })),
          requestId: randomId(22),
        },
      ],
    };
    return { status: 200, body: validateOnly ? { partialFailureError } : { results, partialFailureError } };
  }

  /** Only hashed e-mails and phones, as 64 lowercase hex digits, at most five (ConversionUploadService). */
  private checkIdentifiers(ids: unknown[]): string | undefined {
    if (ids.length > 5) return 'INVALID_USER_IDENTIFIER';
    for (const raw of ids) {
      if (!isRecord(raw)) return 'INVALID_USER_IDENTIFIER';
      const id = camelRow(raw);
      const kinds = Object.keys(id).filter((k) => k !== 'userIdentifierSource');
      if (kinds.length !== 1) return 'INVALID_USER_IDENTIFIER';
      if (kinds[0] !== 'hashedEmail' && kinds[0] !== 'hashedPhoneNumber')
        return 'UNSUPPORTED_USER_IDENTIFIER';
      if (typeof id[kinds[0]] !== 'string' || !/^[0-9a-f]{64}$/.test(id[kinds[0]] as string))
        return 'INVALID_USER_IDENTIFIER';
    }
    return undefined;
  }

  /** Why a row fails, or undefined when it is accepted (accepting records its dedup keys). */
  private checkRow(customerId: string, row: unknown): RowFailure | undefined {
    const upload = (code: string, field?: string): RowFailure => ({
      errorCode: code === 'RESOURCE_EXHAUSTED' ? { quotaError: code } : { conversionUploadError: code },
      message: MESSAGES[code] ?? code,
      ...(field ? { field } : {}),
    });
    if (!isRecord(row))
      return { errorCode: { requestError: 'INVALID_INPUT' }, message: 'Each conversion must be an object.' };
    const clickIds = (['gclid', 'gbraid', 'wbraid'] as const).filter(
      (k) => row[k] !== undefined && row[k] !== '',
    );
    const identifiers = Array.isArray(row.userIdentifiers) ? row.userIdentifiers : [];
    if (row.gbraid !== undefined && row.wbraid !== undefined)
      return upload('GBRAID_WBRAID_BOTH_SET', 'wbraid');
    if (clickIds.length > 1)
      return {
        errorCode: { fieldError: 'VALUE_MUST_BE_UNSET' },
        message: 'The field must be unset: a conversion takes one of gclid, gbraid and wbraid.',
        field: clickIds[1],
      };
    const clickId = clickIds[0];
    // Without a click id, a conversion is matched by its user identifiers (enhanced conversions for leads).
    if (clickId === undefined && identifiers.length === 0)
      return {
        errorCode: { fieldError: 'REQUIRED' },
        message: 'The required field was not present.',
        field: 'gclid',
      };
    if (
      clickId !== undefined &&
      (typeof row[clickId] !== 'string' || !/^[A-Za-z0-9_-]+$/.test(row[clickId] as string))
    ) {
      return upload(
        clickId === 'gclid'
          ? 'UNPARSEABLE_GCLID'
          : clickId === 'gbraid'
            ? 'UNPARSEABLE_GBRAID'
            : 'UNPARSEABLE_WBRAID',
        clickId,
      );
    }
    const identifierProblem = this.checkIdentifiers(identifiers);
    if (identifierProblem) return upload(identifierProblem, 'user_identifiers');
    if (isRecord(row.consent) && row.consent.adPersonalization !== undefined) {
      return {
        errorCode: { fieldError: 'VALUE_MUST_BE_UNSET' },
        message: 'ad_personalization can only be set for OfflineUserDataJobService and UserDataService.',
        field: 'consent.ad_personalization',
      };
    }
    if (
      row.userIpAddress !== undefined &&
      (typeof row.userIpAddress !== 'string' || isIP(row.userIpAddress) === 0)
    ) {
      return {
        errorCode: { fieldError: 'INVALID_VALUE' },
        message: 'user_ip_address must be an IPv4 or IPv6 address.',
        field: 'user_ip_address',
      };
    }
    const action = typeof row.conversionAction === 'string' ? ACTION.exec(row.conversionAction) : null;
    if (!action)
      return {
        errorCode: { requestError: 'RESOURCE_NAME_MALFORMED' },
        message: 'The resource name is malformed.',
        field: 'conversion_action',
      };
    if (
      action[1] !== customerId ||
      (this.conversionActions && !this.conversionActions.has(row.conversionAction as string))
    ) {
      return upload('NO_CONVERSION_ACTION_FOUND', 'conversion_action');
    }
    if (!validConversionDateTime(row.conversionDateTime)) {
      return {
        errorCode: { dateError: 'INVALID_FIELD_VALUES_IN_DATE_TIME' },
        message: 'The field values in the date time are invalid (expected yyyy-mm-dd hh:mm:ss+|-hh:mm).',
        field: 'conversion_date_time',
      };
    }
    if (row.conversionValue !== undefined && typeof row.conversionValue !== 'number')
      return {
        errorCode: { fieldError: 'INVALID_VALUE' },
        message: 'conversionValue must be a number.',
        field: 'conversion_value',
      };
    if (
      row.currencyCode !== undefined &&
      !(typeof row.currencyCode === 'string' && /^[A-Z]{3}$/.test(row.currencyCode))
    ) {
      return {
        errorCode: { fieldError: 'INVALID_VALUE' },
        message: 'currencyCode must be a 3-letter ISO 4217 code.',
        field: 'currency_code',
      };
    }
    const forced = this.outcomes.get(String(clickId === undefined ? row.orderId : row[clickId]));
    if (forced && forced.remaining > 0) {
      forced.remaining--;
      return upload(forced.code, clickId ?? 'order_id');
    }
    // Google refuses the same click (click id + action + time) twice, and an order id reused within an action.
    const duplicate = this.accepted.some(
      ({ conversion: c }) =>
        c.conversionAction === row.conversionAction &&
        ((clickId !== undefined &&
          c[clickId] === row[clickId] &&
          c.conversionDateTime === row.conversionDateTime) ||
          (row.orderId !== undefined && c.orderId === row.orderId)),
    );
    if (duplicate) return upload('CLICK_CONVERSION_ALREADY_EXISTS');
    return undefined;
  }

  protected failureReply(kind: ReplyFailure, req: ReceivedRequest): Reply {
    if (req.path === TOKEN_PATH) return tokenFailure(kind);
    const version = PATH.exec(req.path)?.[1] ?? 'v17';
    switch (kind.type) {
      case 'invalidToken':
        return unauthenticated(version, false);
      case 'rateLimit':
        return adsError(
          429,
          'RESOURCE_EXHAUSTED',
          'Resource has been exhausted (e.g. check quota).',
          version,
          [
            {
              errorCode: { quotaError: 'RESOURCE_EXHAUSTED' },
              message: `Too many requests. Retry in ${kind.retryAfterSec} seconds.`,
              details: {
                quotaErrorDetails: {
                  rateScope: 'ACCOUNT',
                  rateName: 'Number of operations for basic access',
                  retryDelay: `${kind.retryAfterSec}s`,
                },
              },
            },
          ],
        );
      case 'status':
        return kind.status === 500
          ? {
              status: 500,
              body: { error: { code: 500, message: 'Internal error encountered.', status: 'INTERNAL' } },
            }
          : {
              status: kind.status,
              body: {
                error: {
                  code: kind.status,
                  message: 'The service is currently unavailable.',
                  status: 'UNAVAILABLE',
                },
              },
            };
    }
  }
}

export async function startGoogle(options: GoogleFakeOptions = {}): Promise<GoogleFake> {
  return new GoogleFake(options).listen();
}

function adsError(
  code: number,
  status: string,
  message: string,
  version: string,
  errors: Record<string, unknown>[],
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
            errors,
            requestId: randomId(22),
          },
        ],
      },
    },
  };
}

/** Injected failures of the token endpoint, in its OAuth shapes. */
function tokenFailure(kind: ReplyFailure): Reply {
  switch (kind.type) {
    case 'invalidToken':
      return {
        status: 400,
        body: { error: 'invalid_grant', error_description: 'Token has been expired or revoked.' },
      };
    case 'rateLimit':
      return {
        status: 429,
        headers: { 'retry-after': String(kind.retryAfterSec) },
        body: { error: 'rate_limit_exceeded', error_description: 'Rate limit exceeded.' },
      };
    case 'status':
      return {
        status: kind.status,
        body: { error: 'internal_failure', error_description: 'Backend error.' },
      };
  }
}

function invalidArgument(version: string, errorCode: Record<string, string>, message: string): Reply {
  return adsError(400, 'INVALID_ARGUMENT', 'Request contains an invalid argument.', version, [
    { errorCode, message },
  ]);
}

function unauthenticated(version: string, missing: boolean): Reply {
  return missing
    ? adsError(
        401,
        'UNAUTHENTICATED',
        'Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
        version,
        [
          {
            errorCode: { authenticationError: 'OAUTH_TOKEN_HEADER_INVALID' },
            message: 'Oauth token HTTP header is malformed.',
          },
        ],
      )
    : adsError(
        401,
        'UNAUTHENTICATED',
        'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
        version,
        [{ errorCode: { authenticationError: 'OAUTH_TOKEN_INVALID' }, message: 'Oauth token is invalid.' }],
      );
}
