// Fake of Meta's Conversions API (Graph API `/{version}/{pixel_id}/events`). Like Meta, one bad
// event rejects the whole request, and errors come as Graph error objects with code/subcode.
import {
  FakeServer,
  Invalid,
  dedupStats,
  isRecord,
  looksLikeMilliseconds,
  matchesEach,
  randomId,
  type DedupStats,
  type FakeOptions,
  type ReceivedRequest,
  type Reply,
  type ReplyFailure,
} from './base.js';

export interface MetaFakeOptions extends FakeOptions {
  /** Tokens accepted as `access_token`. Default `['meta-test-token']`. */
  accessTokens?: string[];
  /** When set, a pixel not listed is answered like Meta answers an unknown object. */
  pixelIds?: string[];
  /** Clock for the event_time window, in ms. Default `Date.now`. */
  now?: () => number;
}

export interface MetaServerEvent {
  event_name: string;
  event_time: number;
  action_source: string;
  event_id?: string;
  event_source_url?: string;
  user_data: Record<string, unknown>;
  custom_data?: Record<string, unknown>;
  [field: string]: unknown;
}

export interface MetaAcceptedEvent {
  pixelId: string;
  version: string;
  testEventCode?: string;
  /** `performance.now()` when the carrying request arrived. */
  receivedAt: number;
  event: MetaServerEvent;
}

const HASHED_FIELDS = ['em', 'ph', 'fn', 'ln', 'external_id', 'ct', 'st', 'zp', 'country', 'db', 'ge'];
// The current SDK may append "." plus a short base64url suffix to a hash.
const META_HASH = /^[0-9a-f]{64}(\.[A-Za-z0-9_-]+)?$/;
const FBC = /^fb\.[0-9]\.[0-9]{13}\..+$/;
const FBP = /^fb\.[0-9]\.[0-9]{13}\.[0-9]+$/;
const ACTION_SOURCES = [
  'email',
  'website',
  'app',
  'phone_call',
  'chat',
  'physical_store',
  'system_generated',
  'business_messaging',
  'other',
];
const MAX_AGE_SEC = 7 * 24 * 3600;
const MAX_FUTURE_SEC = 5 * 60; // tolerance for clock skew
const PATH = /^\/(v\d+\.\d+)\/([^/]+)\/events$/;
const NODE_PATH = /^\/(v\d+\.\d+)\/(\d+)$/;
/**
 * The Conversions API is a Marketing API endpoint: its versions end on the Marketing API's
 * schedule (its version table: v24.0 until 2026-11-10, v25.0 until 2027-02-23), and a call with an ended version is
 * refused with code 2635. Versions older than v24.0 ended before it.
 */
const MARKETING_API_SUNSETS: Readonly<Record<string, string>> = {
  'v24.0': '2026-11-10',
  'v25.0': '2027-02-23',
};
const OLDEST_KNOWN_MAJOR = 24;

export class MetaFake extends FakeServer {
  readonly accessTokens: Set<string>;
  private readonly pixelIds: Set<string> | undefined;
  private readonly now: () => number;
  private accepted: MetaAcceptedEvent[] = [];

  constructor(options: MetaFakeOptions = {}) {
    super('meta', options);
    this.accessTokens = new Set(options.accessTokens ?? ['meta-test-token']);
    this.pixelIds = options.pixelIds && new Set(options.pixelIds);
    this.now = options.now ?? Date.now;
  }

  /** Every accepted event, across requests, optionally of one pixel. */
  events(pixelId?: string): MetaAcceptedEvent[] {
    return pixelId === undefined ? [...this.accepted] : this.accepted.filter((e) => e.pixelId === pixelId);
  }

  /** How many accepted events Meta would keep after deduplicating on event_name + event_id. */
  dedupStats(pixelId?: string): DedupStats {
    return dedupStats(this.events(pixelId), (e) =>
      e.event.event_id === undefined ? undefined : `${e.pixelId}|${e.event.event_name}|${e.event.event_id}`,
    );
  }

  protected resetState(): void {
    this.accepted = [];
  }

  protected route(req: ReceivedRequest): Reply {
    // Reading the pixel (Graph API AdsPixel node): what a token may do with it, without an event.
    const node = NODE_PATH.exec(req.path);
    if (node && req.method === 'GET') return this.readPixel(node[2] ?? '', req);
    const match = PATH.exec(req.path);
    if (!match) return graphError(400, 2500, `Unknown path components: ${req.path}`);
    const [, version = '', pixelId = ''] = match;
    if (req.method !== 'POST')
      return graphError(400, 100, `Unsupported ${req.method.toLowerCase()} request.`);
    const sunset = MARKETING_API_SUNSETS[version];
    if (
      Number(version.slice(1).split('.')[0]) < OLDEST_KNOWN_MAJOR ||
      (sunset !== undefined && this.now() >= Date.parse(`${sunset}T00:00:00Z`))
    ) {
      return graphError(
        400,
        2635,
        `(#2635) You are calling a deprecated version of the Ads API. Please update to the latest version: v26.0.`,
      );
    }

    const body = isRecord(req.body) ? req.body : {};
    const token =
      req.query.access_token ?? (typeof body.access_token === 'string' ? body.access_token : undefined);
    if (!token) return graphError(401, 190, 'An access token is required to request this resource.');
    if (!this.accessTokens.has(token))
      return graphError(401, 190, 'Invalid OAuth access token - Cannot parse access token');
    if (this.pixelIds && !this.pixelIds.has(pixelId)) {
      return graphError(
        400,
        100,
        `Unsupported post request. Object with ID '${pixelId}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`,
        { subcode: 33 },
      );
    }
    if (req.bodyError)
      return graphError(400, 100, `Invalid parameter: request body is not valid JSON (${req.bodyError})`);

    let events: MetaServerEvent[];
    try {
      events = this.validate(body);
    } catch (e) {
      if (!(e instanceof Invalid)) throw e;
      const d = e.detail as { subcode?: number; title?: string; userMsg?: string };
      return graphError(400, 100, e.message, {
        subcode: d.subcode,
        userTitle: d.title ?? 'Invalid parameter',
        userMsg: d.userMsg ?? e.message,
      });
    }
    const testEventCode = typeof body.test_event_code === 'string' ? body.test_event_code : undefined;
    for (const event of events)
      this.accepted.push({ pixelId, version, testEventCode, receivedAt: req.receivedAt, event });
    return { status: 200, body: { events_received: events.length, messages: [], fbtrace_id: fbtraceId() } };
  }

  /** `GET /{version}/{pixel_id}?fields=…`: the pixel's fields, or Graph's error for a bad token or an object it cannot see. */
  private readPixel(pixelId: string, req: ReceivedRequest): Reply {
    const token = req.query.access_token;
    if (!token) return graphError(400, 104, 'An access token is required to request this resource.');
    if (!this.accessTokens.has(token))
      return graphError(401, 190, 'Invalid OAuth access token - Cannot parse access token');
    if (this.pixelIds && !this.pixelIds.has(pixelId)) {
      return graphError(
        400,
        100,
        `Unsupported get request. Object with ID '${pixelId}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`,
        { subcode: 33 },
      );
    }
    const fields = (req.query.fields ?? 'id').split(',');
    return {
      status: 200,
      body: { id: pixelId, ...(fields.includes('name') ? { name: `Pixel ${pixelId}` } : {}) },
    };
  }

  private validate(body: Record<string, unknown>): MetaServerEvent[] {
    // The SDK may send `data` as a JSON-encoded string (form posts); Graph accepts both.
    let data = body.data;
    if (typeof data === 'string') {
      try {
        data = JSON.parse(data);
      } catch {
        throw new Invalid('Invalid parameter: data must be a JSON array of events');
      }
    }
    if (!Array.isArray(data) || data.length === 0)
      throw new Invalid('Invalid parameter: data must be a non-empty array of events');
    if (data.length > 1000)
      throw new Invalid(
        `Invalid parameter: data has ${data.length} events; at most 1000 are allowed per request`,
      );
    data.forEach((event, i) => this.validateEvent(event, `data[${i}]`));
    return data as MetaServerEvent[];
  }

  private validateEvent(e: unknown, at: string): void {
    if (!isRecord(e)) throw new Invalid(`Invalid parameter: ${at} must be an object`);
    if (typeof e.event_name !== 'string' || e.event_name === '')
      throw new Invalid(`Invalid parameter: ${at}.event_name is required`);
    this.validateTime(e.event_time, at);
    if (typeof e.action_source !== 'string' || !ACTION_SOURCES.includes(e.action_source)) {
      throw new Invalid(`Invalid parameter: ${at}.action_source must be one of ${ACTION_SOURCES.join(', ')}`);
    }
    if (e.event_id !== undefined && typeof e.event_id !== 'string')
      throw new Invalid(`Invalid parameter: ${at}.event_id must be a string`);
    if (
      e.referrer_url !== undefined &&
      !(typeof e.referrer_url === 'string' && /^https?:\/\//.test(e.referrer_url))
    ) {
      throw new Invalid(`Invalid parameter: ${at}.referrer_url must be a URL`);
    }
    const ud = e.user_data;
    if (!isRecord(ud)) throw new Invalid(`Invalid parameter: ${at}.user_data is required`);
    if (e.action_source === 'website') {
      if (typeof e.event_source_url !== 'string' || e.event_source_url === '') {
        throw new Invalid(`Invalid parameter: ${at}.event_source_url is required for action_source website`);
      }
      if (typeof ud.client_user_agent !== 'string' || ud.client_user_agent === '') {
        throw new Invalid(
          `Invalid parameter: ${at}.user_data.client_user_agent is required for action_source website`,
        );
      }
    }
    for (const field of HASHED_FIELDS) {
      if (ud[field] !== undefined && !matchesEach(ud[field], META_HASH)) {
        throw new Invalid(
          `Invalid parameter: ${at}.user_data.${field} must be a SHA-256 hash (64 lowercase hex characters), or an array of them`,
        );
      }
    }
    if (ud.fbc !== undefined && !(typeof ud.fbc === 'string' && FBC.test(ud.fbc))) {
      throw new Invalid(
        `Invalid parameter: ${at}.user_data.fbc must look like fb.1.<creation time in ms>.<fbclid>`,
      );
    }
    if (ud.fbp !== undefined && !(typeof ud.fbp === 'string' && FBP.test(ud.fbp))) {
      throw new Invalid(
        `Invalid parameter: ${at}.user_data.fbp must look like fb.1.<creation time in ms>.<random digits>`,
      );
    }
    this.validateCustomData(e.custom_data, e.event_name, at);
    this.validateDataProcessing(e, at);
  }

  /**
   * Limited Data Use as Meta documents it: `data_processing_options` an array holding `LDU` (or
   * empty, for none); with `LDU`, `data_processing_options_country` 0 (Meta geolocates) or 1 (the
   * US) and `data_processing_options_state` 0 (geolocated) or a US state code (1000 California
   * and the codes after it), the state never without the country.
   */
  private validateDataProcessing(e: Record<string, unknown>, at: string): void {
    const options = e.data_processing_options;
    const country = e.data_processing_options_country;
    const state = e.data_processing_options_state;
    if (options === undefined) {
      if (country !== undefined || state !== undefined)
        throw new Invalid(
          `Invalid parameter: ${at}.data_processing_options_country and _state need data_processing_options`,
        );
      return;
    }
    if (!Array.isArray(options) || options.some((o) => o !== 'LDU'))
      throw new Invalid(
        `Invalid parameter: ${at}.data_processing_options must be an array of "LDU" or empty`,
      );
    if (options.length === 0) return;
    if (!(country === 0 || country === 1))
      throw new Invalid(`Invalid parameter: ${at}.data_processing_options_country must be 0 or 1 with LDU`);
    if (
      state !== undefined &&
      !(state === 0 || (Number.isInteger(state) && (state as number) >= 1000 && (state as number) < 1100))
    )
      throw new Invalid(
        `Invalid parameter: ${at}.data_processing_options_state must be 0 or a US state code`,
      );
  }

  private validateTime(t: unknown, at: string): void {
    if (typeof t !== 'number' || !Number.isInteger(t))
      throw new Invalid(`Invalid parameter: ${at}.event_time must be an integer Unix timestamp in seconds`);
    const nowSec = Math.floor(this.now() / 1000);
    if (looksLikeMilliseconds(t) || t > nowSec + MAX_FUTURE_SEC) {
      throw new Invalid(
        `Invalid parameter: ${at}.event_time ${t} is in the future (is it in milliseconds? it must be in seconds)`,
        {
          title: 'Event Timestamp In Future',
        },
      );
    }
    if (t < nowSec - MAX_AGE_SEC) {
      throw new Invalid(`Invalid parameter: ${at}.event_time ${t} is too old`, {
        subcode: 2804003,
        title: 'Event Timestamp Too Old',
        userMsg:
          'The timestamp for this event is too far in the past. Events need to be sent from your server within 7 days of when they occurred.',
      });
    }
  }

  private validateCustomData(cd: unknown, eventName: string, at: string): void {
    if (cd !== undefined && !isRecord(cd))
      throw new Invalid(`Invalid parameter: ${at}.custom_data must be an object`);
    const value = cd?.value;
    const currency = cd?.currency;
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value)))
      throw new Invalid(`Invalid parameter: ${at}.custom_data.value must be a number`);
    if (currency !== undefined && !(typeof currency === 'string' && /^[A-Za-z]{3}$/.test(currency))) {
      throw new Invalid(`Invalid parameter: ${at}.custom_data.currency must be a 3-letter ISO 4217 code`);
    }
    // `order_id` is a string (Meta's custom data parameters); a number would be refused.
    if (cd?.order_id !== undefined && (typeof cd.order_id !== 'string' || cd.order_id === ''))
      throw new Invalid(`Invalid parameter: ${at}.custom_data.order_id must be a non-empty string`);
    if (eventName === 'Purchase' && (value === undefined || currency === undefined)) {
      throw new Invalid(
        `Invalid parameter: ${at}.custom_data.value and custom_data.currency are required for Purchase events`,
      );
    }
  }

  protected failureReply(kind: ReplyFailure, req: ReceivedRequest): Reply {
    switch (kind.type) {
      case 'invalidToken':
        return graphError(401, 190, 'Error validating access token: Session has expired.', { subcode: 463 });
      case 'rateLimit': {
        const reply = graphError(429, 17, 'User request limit reached', {
          subcode: 2446079,
          transient: true,
        });
        // Meta has no Retry-After; it reports the wait, in minutes, in its usage header.
        const minutes = Math.ceil(kind.retryAfterSec / 60);
        reply.headers = {
          'x-business-use-case-usage': JSON.stringify({
            [PATH.exec(req.path)?.[2] ?? 'unknown']: [
              {
                type: 'ads_management',
                call_count: 100,
                total_cputime: 100,
                total_time: 100,
                estimated_time_to_regain_access: minutes,
              },
            ],
          }),
        };
        return reply;
      }
      case 'status':
        return graphError(
          kind.status,
          2,
          'An unexpected error has occurred. Please retry your request later.',
          { transient: true },
        );
    }
  }
}

export async function startMeta(options: MetaFakeOptions = {}): Promise<MetaFake> {
  return new MetaFake(options).listen();
}

function graphError(
  status: number,
  code: number,
  message: string,
  x: { subcode?: number; transient?: boolean; userTitle?: string; userMsg?: string } = {},
): Reply {
  const error: Record<string, unknown> = { message, type: 'OAuthException', code };
  if (x.subcode !== undefined) error.error_subcode = x.subcode;
  error.is_transient = x.transient ?? false;
  if (x.userTitle !== undefined) error.error_user_title = x.userTitle;
  if (x.userMsg !== undefined) error.error_user_msg = x.userMsg;
  error.fbtrace_id = fbtraceId();
  return { status, body: { error } };
}

function fbtraceId(): string {
  return randomId(27, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-');
}
