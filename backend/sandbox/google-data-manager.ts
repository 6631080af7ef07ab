import { createHash, randomUUID } from 'node:crypto';
import { isIP } from 'node:net';

/**
 * The rules of the Data Manager API's `POST /v1/events:ingest`, as its protos
 * (`googleapis/googleapis`, `google/ads/datamanager/v1/`: ingestion_service, event, destination,
 * user_data, consent, device_info, error) and its REST reference state them, written once so that
 * the demo's sandbox and the tests' fake refuse the same requests in the same shapes.
 *
 * A request is refused as a whole (Google's "fast-fail model"): `400 INVALID_ARGUMENT` with a
 * `google.rpc.ErrorInfo` (the first `ErrorReason`) and a `google.rpc.BadRequest` listing every
 * field violation, its path in the JSON names (`events[3].adIdentifiers.gclid`). JSON field names
 * are the protos' lowerCamelCase; a name the message does not have is refused as ESF refuses it.
 */
export const DATA_MANAGER_SCOPE = 'https://www.googleapis.com/auth/datamanager';
export const MAX_EVENTS = 2000;
const MAX_IDENTIFIERS = 10;

export interface FieldViolation {
  field: string;
  description: string;
  reason: string;
}

/** The fields each message has, by JSON name (proto3 JSON mapping of the v1 protos). */
const MESSAGE_FIELDS = {
  IngestEventsRequest: ['destinations', 'events', 'consent', 'validateOnly', 'encoding', 'encryptionInfo'],
  Destination: ['reference', 'loginAccount', 'linkedAccount', 'operatingAccount', 'productDestinationId'],
  ProductAccount: ['product', 'accountId', 'accountType'],
  Event: [
    'destinationReferences',
    'transactionId',
    'eventTimestamp',
    'lastUpdatedTimestamp',
    'userData',
    'consent',
    'adIdentifiers',
    'currency',
    'conversionValue',
    'conversionCount',
    'eventSource',
    'eventDeviceInfo',
    'cartData',
    'customVariables',
    'experimentalFields',
    'userProperties',
    'eventName',
    'clientId',
    'userId',
    'additionalEventParameters',
    'thirdPartyUserData',
    'eventLocation',
    'appInstanceId',
  ],
  AdIdentifiers: [
    'sessionAttributes',
    'gclid',
    'gbraid',
    'wbraid',
    'landingPageDeviceInfo',
    'mobileDeviceId',
    'dclid',
    'impressionId',
    'matchId',
    'encryptedUserIds',
  ],
  DeviceInfo: [
    'userAgent',
    'ipAddress',
    'category',
    'languageCode',
    'screenHeight',
    'screenWidth',
    'operatingSystem',
    'operatingSystemVersion',
    'model',
    'brand',
    'browser',
    'browserVersion',
  ],
  UserData: ['userIdentifiers'],
  UserIdentifier: ['emailAddress', 'phoneNumber', 'address'],
  AddressInfo: [
    'givenName',
    'familyName',
    'regionCode',
    'postalCode',
    'addressLine',
    'city',
    'administrativeArea',
  ],
  Consent: ['adUserData', 'adPersonalization'],
} as const;

const ACCOUNT_TYPES = [
  'GOOGLE_ADS',
  'DISPLAY_VIDEO_PARTNER',
  'DISPLAY_VIDEO_ADVERTISER',
  'DATA_PARTNER',
  'GOOGLE_ANALYTICS_PROPERTY',
  'GOOGLE_AD_MANAGER_AUDIENCE_LINK',
  'FLOODLIGHT_CONFIG',
];
const EVENT_SOURCES = ['WEB', 'APP', 'IN_STORE', 'PHONE', 'MESSAGE', 'OTHER'];
const CONSENT_STATUSES = ['CONSENT_STATUS_UNSPECIFIED', 'CONSENT_GRANTED', 'CONSENT_DENIED'];
const ENCODINGS = ['HEX', 'BASE64'];
/** RFC 3339 as `google.protobuf.Timestamp`'s JSON form: `Z` or an offset, up to nine fractional digits. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;
const BASE64_SHA256 = /^[A-Za-z0-9+/]{43}=$/;
const CURRENCIES = new Set(Intl.supportedValuesOf('currency'));

type Json = Record<string, unknown>;
const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What the checker knows beyond the protos: the accounts and actions that exist, and people whose digests it can check. */
export interface IngestRules {
  /** Customer id → its conversion action ids; when set, other customers and actions are refused. */
  conversionActions?: Record<string, readonly string[]>;
  /** E-mails and phones (as a person types them) whose wrongly normalised digests are recognised and refused. */
  knownPeople?: readonly string[];
  /** Now, for refusing events in the future. */
  nowMs?: number;
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

/**
 * Digests of wrongly normalised forms of a person's e-mail or phone (not trimmed or lowercased,
 * Gmail dots kept, a phone without its `+` or with spaces), which Google cannot match: a digest
 * among them means the sender normalised wrongly.
 */
export function wrongDigests(people: readonly string[]): Map<string, string> {
  const wrong = new Map<string, string>();
  for (const raw of people) {
    if (raw.includes('@')) {
      const right = googleEmail(raw);
      for (const w of [raw, raw.trim(), raw.trim().toLowerCase(), ` ${raw}`]) {
        if (w !== right)
          wrong.set(sha256(w), `e-mail not normalised (trim, lowercase, no dots in a Gmail local part)`);
      }
    } else {
      const digits = raw.replace(/\D/g, '');
      const right = `+${digits}`;
      for (const w of [raw, digits, raw.replace(/[^\d+]/g, ' ')]) {
        if (w !== right) wrong.set(sha256(w), 'phone number not normalised (E.164: + and digits only)');
      }
    }
  }
  return wrong;
}

/** Google's normal form of an e-mail: trimmed, lowercase, dots dropped from a gmail.com / googlemail.com local part. */
export function googleEmail(raw: string): string {
  const e = raw.trim().toLowerCase();
  const at = e.lastIndexOf('@');
  const domain = e.slice(at + 1);
  if (at > 0 && (domain === 'gmail.com' || domain === 'googlemail.com'))
    return `${e.slice(0, at).replace(/\./g, '')}@${domain}`;
  return e;
}

class Checker {
  readonly violations: FieldViolation[] = [];
  private readonly wrong: Map<string, string>;
  constructor(private readonly rules: IngestRules) {
    this.wrong = wrongDigests(rules.knownPeople ?? []);
  }

  add(field: string, reason: string, description: string): void {
    this.violations.push({ field, reason, description });
  }

  /** The object's own names must be fields of the message. */
  fields(obj: unknown, message: keyof typeof MESSAGE_FIELDS, at: string): obj is Json {
    if (!isRecord(obj)) {
      this.add(at, 'INVALID_ARGUMENT', `Invalid value at '${at}': expected an object (${message})`);
      return false;
    }
    const known: readonly string[] = MESSAGE_FIELDS[message];
    for (const k of Object.keys(obj)) {
      if (!known.includes(k))
        this.add(
          at,
          'INVALID_ARGUMENT',
          `Invalid JSON payload received. Unknown name "${k}" at '${at || 'request'}': Cannot find field.`,
        );
    }
    return true;
  }

  enumValue(v: unknown, values: readonly string[], at: string, type: string, required = false): void {
    if (v === undefined) {
      if (required) this.add(at, 'REQUIRED_FIELD_MISSING', `${at} is required`);
      return;
    }
    if (typeof v !== 'string' || !values.includes(v))
      this.add(
        at,
        'INVALID_ENUM_VALUE',
        `Invalid value at '${at}' (type.googleapis.com/google.ads.datamanager.v1.${type}), ${JSON.stringify(v)}`,
      );
  }

  string(v: unknown, at: string, required = false): v is string {
    if (v === undefined) {
      if (required) this.add(at, 'REQUIRED_FIELD_MISSING', `${at} is required`);
      return false;
    }
    if (typeof v !== 'string') {
      this.add(at, 'INVALID_ARGUMENT', `Invalid value at '${at}' (TYPE_STRING), ${JSON.stringify(v)}`);
      return false;
    }
    return true;
  }

  timestamp(v: unknown, at: string, required: boolean): void {
    if (!this.string(v, at, required)) return;
    const ms = Date.parse(v as string);
    if (!RFC3339.test(v as string) || Number.isNaN(ms)) {
      this.add(
        at,
        'INVALID_ARGUMENT',
        `Invalid value at '${at}' (type.googleapis.com/google.protobuf.Timestamp), Field '${at}', Invalid time format: ${JSON.stringify(v)}`,
      );
      return;
    }
    if (ms > (this.rules.nowMs ?? Date.now()) + 5 * 60_000)
      this.add(at, 'EVENT_TIME_INVALID', `${at} is in the future`);
  }

  device(v: unknown, at: string): void {
    if (!this.fields(v, 'DeviceInfo', at)) return;
    if (this.string(v.userAgent, `${at}.userAgent`) && v.userAgent === '')
      this.add(`${at}.userAgent`, 'INVALID_FORMAT', 'userAgent is empty');
    if (this.string(v.ipAddress, `${at}.ipAddress`) && isIP(v.ipAddress as string) === 0)
      this.add(
        `${at}.ipAddress`,
        'INVALID_FORMAT',
        `${JSON.stringify(v.ipAddress)} is not an IPv4 or IPv6 address`,
      );
  }

  digest(v: unknown, at: string, encoding: unknown, what: string): void {
    if (!this.string(v, at, true)) return;
    const s = v as string;
    if (s.includes('@') || (/^\+?[\d\s().-]{6,}$/.test(s) && !HEX_SHA256.test(s))) {
      this.add(
        at,
        'INVALID_FORMAT',
        `${what} must be hashed with SHA-256 after normalising; it looks unhashed`,
      );
      return;
    }
    if (encoding === 'BASE64' ? !BASE64_SHA256.test(s) : !HEX_SHA256.test(s)) {
      this.add(
        at,
        encoding === 'BASE64' ? 'INVALID_BASE64_ENCODING' : 'INVALID_HEX_ENCODING',
        `${what} is not a ${encoding === 'BASE64' ? 'base64' : 'hex'}-encoded SHA-256 digest`,
      );
      return;
    }
    const wrong = this.wrong.get(s.toLowerCase());
    if (wrong) this.add(at, 'INVALID_FORMAT', `${what}: ${wrong}`);
  }

  userData(v: unknown, at: string, encoding: unknown): void {
    if (!this.fields(v, 'UserData', at)) return;
    const ids = v.userIdentifiers;
    if (!Array.isArray(ids) || ids.length === 0) {
      this.add(`${at}.userIdentifiers`, 'REQUIRED_FIELD_MISSING', 'at least one user identifier is required');
      return;
    }
    if (ids.length > MAX_IDENTIFIERS)
      this.add(
        `${at}.userIdentifiers`,
        'TOO_MANY_USER_IDENTIFIERS',
        `at most ${MAX_IDENTIFIERS} user identifiers`,
      );
    if (encoding === undefined)
      this.add('encoding', 'REQUIRED_FIELD_MISSING', 'encoding is required for UserData uploads');
    else this.enumValue(encoding, ENCODINGS, 'encoding', 'Encoding');
    ids.forEach((id, i) => {
      const p = `${at}.userIdentifiers[${i}]`;
      if (!this.fields(id, 'UserIdentifier', p)) return;
      const set = Object.keys(id);
      if (set.length !== 1) {
        this.add(p, 'INVALID_ARGUMENT', 'exactly one of emailAddress, phoneNumber, address must be set');
        return;
      }
      if (id.emailAddress !== undefined)
        this.digest(id.emailAddress, `${p}.emailAddress`, encoding, 'emailAddress');
      if (id.phoneNumber !== undefined)
        this.digest(id.phoneNumber, `${p}.phoneNumber`, encoding, 'phoneNumber');
      if (id.address !== undefined && this.fields(id.address, 'AddressInfo', `${p}.address`)) {
        const a = id.address;
        this.digest(a.givenName, `${p}.address.givenName`, encoding, 'givenName');
        this.digest(a.familyName, `${p}.address.familyName`, encoding, 'familyName');
        if (
          this.string(a.regionCode, `${p}.address.regionCode`, true) &&
          !/^[A-Z]{2}$/.test(a.regionCode as string)
        )
          this.add(
            `${p}.address.regionCode`,
            'INVALID_REGION_CODE',
            'regionCode must be an ISO-3166-1 alpha-2 code, unhashed',
          );
        this.string(a.postalCode, `${p}.address.postalCode`, true);
      }
    });
  }

  consent(v: unknown, at: string): void {
    if (!this.fields(v, 'Consent', at)) return;
    this.enumValue(v.adUserData, CONSENT_STATUSES, `${at}.adUserData`, 'ConsentStatus');
    this.enumValue(v.adPersonalization, CONSENT_STATUSES, `${at}.adPersonalization`, 'ConsentStatus');
  }

  account(v: unknown, at: string, required: boolean): string | undefined {
    if (v === undefined) {
      if (required) this.add(at, 'REQUIRED_FIELD_MISSING', `${at} is required`);
      return undefined;
    }
    if (!this.fields(v, 'ProductAccount', at)) return undefined;
    this.enumValue(v.accountType, ACCOUNT_TYPES, `${at}.accountType`, 'ProductAccount.AccountType', true);
    if (!this.string(v.accountId, `${at}.accountId`, true)) return undefined;
    if (v.accountType === 'GOOGLE_ADS' && !/^\d{10}$/.test(v.accountId as string)) {
      this.add(`${at}.accountId`, 'INVALID_ARGUMENT', 'a Google Ads account id is 10 digits without dashes');
      return undefined;
    }
    return v.accountId as string;
  }
}

/** The field violations of an `IngestEventsRequest` body; empty when Google would accept it. */
export function checkIngestRequest(body: unknown, rules: IngestRules = {}): FieldViolation[] {
  const c = new Checker(rules);
  if (!c.fields(body, 'IngestEventsRequest', '')) return c.violations;
  if (body.validateOnly !== undefined && typeof body.validateOnly !== 'boolean')
    c.add(
      'validateOnly',
      'INVALID_ARGUMENT',
      `Invalid value at 'validate_only' (TYPE_BOOL), ${JSON.stringify(body.validateOnly)}`,
    );
  if (body.consent !== undefined) c.consent(body.consent, 'consent');
  const references = new Set<string>();
  const destinations = Array.isArray(body.destinations) ? body.destinations : [];
  if (destinations.length === 0)
    c.add('destinations', 'REQUIRED_FIELD_MISSING', 'at least one destination is required');
  destinations.forEach((d, i) => {
    const at = `destinations[${i}]`;
    if (!c.fields(d, 'Destination', at)) return;
    const customer = c.account(d.operatingAccount, `${at}.operatingAccount`, true);
    c.account(d.loginAccount, `${at}.loginAccount`, false);
    c.account(d.linkedAccount, `${at}.linkedAccount`, false);
    if (c.string(d.reference, `${at}.reference`)) {
      if (references.has(d.reference as string))
        c.add(
          `${at}.reference`,
          'DUPLICATE_DESTINATION_REFERENCE',
          `reference ${JSON.stringify(d.reference)} is used twice`,
        );
      references.add(d.reference as string);
    }
    if (c.string(d.productDestinationId, `${at}.productDestinationId`, true)) {
      const id = d.productDestinationId as string;
      if (!/^\d+$/.test(id))
        c.add(
          `${at}.productDestinationId`,
          'INVALID_CONVERSION_ACTION_ID',
          'a Google Ads conversion action id is digits',
        );
      else if (customer !== undefined && rules.conversionActions) {
        const actions = rules.conversionActions[customer];
        if (actions === undefined)
          c.add(
            `${at}.operatingAccount.accountId`,
            'PERMISSION_DENIED',
            `the caller does not have permission on account ${customer}`,
          );
        else if (!actions.includes(id))
          c.add(
            `${at}.productDestinationId`,
            'INVALID_CONVERSION_ACTION_ID',
            `no conversion action ${id} in account ${customer}`,
          );
      }
    }
  });
  const events = Array.isArray(body.events) ? body.events : undefined;
  if (events === undefined || events.length === 0) {
    c.add('events', 'REQUIRED_FIELD_MISSING', 'at least one event is required');
    return c.violations;
  }
  if (events.length > MAX_EVENTS) {
    c.add(
      'events',
      'TOO_MANY_EVENTS',
      `at most ${MAX_EVENTS} events can be sent in a single request; got ${events.length}`,
    );
    return c.violations;
  }
  events.forEach((e, i) => {
    const at = `events[${i}]`;
    if (!c.fields(e, 'Event', at)) return;
    if (e.destinationReferences !== undefined) {
      const refs = Array.isArray(e.destinationReferences) ? e.destinationReferences : [null];
      for (const r of refs)
        if (typeof r !== 'string' || !references.has(r))
          c.add(
            `${at}.destinationReferences`,
            'INVALID_DESTINATION',
            `no destination has the reference ${JSON.stringify(r)}`,
          );
    } else if (destinations.length > 1 && references.size > 0) {
      // Without references an event goes to every destination: fine, nothing to check.
    }
    c.string(e.transactionId, `${at}.transactionId`);
    c.timestamp(e.eventTimestamp, `${at}.eventTimestamp`, true);
    c.timestamp(e.lastUpdatedTimestamp, `${at}.lastUpdatedTimestamp`, false);
    c.enumValue(e.eventSource, EVENT_SOURCES, `${at}.eventSource`, 'EventSource');
    if (e.consent !== undefined) c.consent(e.consent, `${at}.consent`);
    if (e.userData !== undefined) c.userData(e.userData, `${at}.userData`, body.encoding);
    if (e.eventDeviceInfo !== undefined) c.device(e.eventDeviceInfo, `${at}.eventDeviceInfo`);
    if (
      e.conversionValue !== undefined &&
      (typeof e.conversionValue !== 'number' || !Number.isFinite(e.conversionValue))
    )
      c.add(
        `${at}.conversionValue`,
        'INVALID_NUMBER_FORMAT',
        `Invalid value at '${at}.conversion_value' (TYPE_DOUBLE), ${JSON.stringify(e.conversionValue)}`,
      );
    if (e.currency !== undefined && (typeof e.currency !== 'string' || !CURRENCIES.has(e.currency)))
      c.add(
        `${at}.currency`,
        'INVALID_CURRENCY_CODE',
        `${JSON.stringify(e.currency)} is not an ISO 4217 currency code`,
      );
    if (e.adIdentifiers !== undefined && c.fields(e.adIdentifiers, 'AdIdentifiers', `${at}.adIdentifiers`)) {
      const a = e.adIdentifiers;
      for (const k of ['sessionAttributes', 'gclid', 'gbraid', 'wbraid'] as const)
        c.string(a[k], `${at}.adIdentifiers.${k}`);
      const clicks = (['gclid', 'gbraid', 'wbraid'] as const).filter((k) => a[k] !== undefined);
      if (clicks.length > 1)
        c.add(
          `${at}.adIdentifiers`,
          'INVALID_ARGUMENT',
          `only one of gclid, gbraid and wbraid may be set; got ${clicks.join(', ')}`,
        );
      if (a.landingPageDeviceInfo !== undefined)
        c.device(a.landingPageDeviceInfo, `${at}.adIdentifiers.landingPageDeviceInfo`);
    }
  });
  return c.violations;
}

/** A `google.rpc.Status` error body in its REST form. */
export function rpcErrorBody(
  code: number,
  status: string,
  message: string,
  o: { reason?: string; violations?: FieldViolation[]; domain?: string } = {},
): { error: Record<string, unknown> } {
  const details: Record<string, unknown>[] = [];
  if (o.reason)
    details.push({
      '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
      reason: o.reason,
      domain: o.domain ?? 'datamanager.googleapis.com',
    });
  if (o.violations && o.violations.length > 0)
    details.push({
      '@type': 'type.googleapis.com/google.rpc.BadRequest',
      fieldViolations: o.violations.map((v) => ({
        field: v.field,
        description: v.description,
        reason: v.reason,
      })),
    });
  details.push({ '@type': 'type.googleapis.com/google.rpc.RequestInfo', requestId: randomUUID() });
  return { error: { code, message, status, details } };
}

/** The 400 a refused ingest gets. */
export function invalidArgument(violations: FieldViolation[]): { error: Record<string, unknown> } {
  return rpcErrorBody(400, 'INVALID_ARGUMENT', 'Request contains an invalid argument.', {
    reason: violations[0]?.reason ?? 'INVALID_ARGUMENT',
    violations,
  });
}

/** Why a bearer token may not call the Data Manager API, as Google answers it; undefined when it may. */
export function authProblem(
  authorization: string | undefined,
  scopesOf: (token: string) => readonly string[] | undefined,
): { status: 401 | 403; body: { error: Record<string, unknown> } } | undefined {
  const token = /^Bearer (\S+)$/.exec(authorization ?? '')?.[1];
  if (token === undefined)
    return {
      status: 401,
      body: rpcErrorBody(
        401,
        'UNAUTHENTICATED',
        'Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
        { reason: 'CREDENTIALS_MISSING', domain: 'googleapis.com' },
      ),
    };
  const scopes = scopesOf(token);
  if (scopes === undefined)
    return {
      status: 401,
      body: rpcErrorBody(
        401,
        'UNAUTHENTICATED',
        'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
        { reason: 'ACCESS_TOKEN_TYPE_UNSUPPORTED', domain: 'googleapis.com' },
      ),
    };
  if (!scopes.includes(DATA_MANAGER_SCOPE))
    return {
      status: 403,
      body: rpcErrorBody(403, 'PERMISSION_DENIED', 'Request had insufficient authentication scopes.', {
        reason: 'ACCESS_TOKEN_SCOPE_INSUFFICIENT',
        domain: 'googleapis.com',
      }),
    };
  return undefined;
}

/** The events of an accepted request, by destination reference (an event without references goes to all). */
export function eventsByDestination(body: Json): { destination: Json; events: Json[] }[] {
  const destinations = (Array.isArray(body.destinations) ? body.destinations : []).filter(isRecord);
  const events = (Array.isArray(body.events) ? body.events : []).filter(isRecord);
  return destinations.map((d) => ({
    destination: d,
    events: events.filter((e) => {
      const refs = Array.isArray(e.destinationReferences) ? e.destinationReferences : [];
      return refs.length === 0 || refs.includes(d.reference);
    }),
  }));
}
