// Fake of TikTok's Events API 2.0. TikTok answers HTTP 200 to everything it handles and puts the
// outcome in the body's `code`, so a client that only checks the HTTP status is wrong; the fake
// keeps that behaviour for injected failures too (use `gateway: true` for a real HTTP 5xx).
import {
  FakeServer,
  Invalid,
  SHA256_HEX,
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

export interface TikTokFakeOptions extends FakeOptions {
  /** Values accepted in the `Access-Token` header. Default `['tiktok-test-token']`. */
  accessTokens?: string[];
  /** When set, an `event_source_id` not listed is refused with code 40001. */
  pixelCodes?: string[];
  /** Clock for the event_time checks, in ms. Default `Date.now`. */
  now?: () => number;
}

export interface TikTokEvent {
  event: string;
  event_time: number;
  event_id: string;
  user?: Record<string, unknown>;
  /** Absent on an event without a page (a CRM stage matched on its identifiers). */
  page?: { url: string; referrer?: string; [field: string]: unknown };
  properties?: Record<string, unknown>;
  [field: string]: unknown;
}

export interface TikTokAcceptedEvent {
  pixelCode: string;
  testEventCode?: string;
  receivedAt: number;
  event: TikTokEvent;
}

/** Body codes TikTok uses; only 40100 and 40700 are worth retrying. */
export const TIKTOK_CODES = {
  OK: 0,
  NO_PERMISSION: 40001,
  INVALID: 40002,
  TOKEN_MISSING: 40104,
  TOKEN_INVALID: 40105,
  THROTTLED: 40100,
  SERVER: 40700,
} as const;

/** TikTok's standard events retired by its 2025 unification, and what replaced them. */
export const RETIRED_EVENTS: ReadonlyMap<string, string> = new Map([
  ['SubmitForm', 'Lead'],
  ['CompletePayment', 'Purchase'],
  ['ClickButton', 'a standard event or a custom event'],
  ['PlaceAnOrder', 'Purchase'],
]);

export const TIKTOK_TRACK_PATH = '/open_api/v1.3/event/track/';
const MAX_FUTURE_SEC = 5 * 60;

export class TikTokFake extends FakeServer {
  readonly accessTokens: Set<string>;
  private readonly pixelCodes: Set<string> | undefined;
  private readonly now: () => number;
  private accepted: TikTokAcceptedEvent[] = [];

  constructor(options: TikTokFakeOptions = {}) {
    super('tiktok', options);
    this.accessTokens = new Set(options.accessTokens ?? ['tiktok-test-token']);
    this.pixelCodes = options.pixelCodes && new Set(options.pixelCodes);
    this.now = options.now ?? Date.now;
  }

  events(pixelCode?: string): TikTokAcceptedEvent[] {
    return pixelCode === undefined
      ? [...this.accepted]
      : this.accepted.filter((e) => e.pixelCode === pixelCode);
  }

  /** Deduplicated as TikTok does: on pixel + `event` + `event_id`. */
  dedupStats(pixelCode?: string): DedupStats {
    return dedupStats(this.events(pixelCode), (e) => `${e.pixelCode}|${e.event.event}|${e.event.event_id}`);
  }

  protected resetState(): void {
    this.accepted = [];
  }

  protected route(req: ReceivedRequest): Reply {
    if (req.path !== TIKTOK_TRACK_PATH)
      return {
        status: 404,
        body: { code: 40400, message: `Not found: ${req.path}`, request_id: requestId() },
      };
    if (req.method !== 'POST') return body(TIKTOK_CODES.INVALID, `Method ${req.method} not allowed`);
    const token = req.headers['access-token'];
    if (typeof token !== 'string' || token === '')
      return body(TIKTOK_CODES.TOKEN_MISSING, 'Access token is null, please check.');
    if (!this.accessTokens.has(token))
      return body(TIKTOK_CODES.TOKEN_INVALID, 'Access token is incorrect or has been revoked.');
    if (!isRecord(req.body))
      return body(TIKTOK_CODES.INVALID, `Invalid request body${req.bodyError ? `: ${req.bodyError}` : ''}`);
    const b = req.body;
    try {
      if (!['web', 'app', 'offline', 'crm'].includes(b.event_source as string))
        throw new Invalid('event_source: Must be one of: web, app, offline, crm.');
      // A pixel code is a web event source; app, offline and CRM events go to their own sets.
      if (b.event_source !== 'web')
        throw new Invalid(
          `event_source_id: ${String(b.event_source_id)} is not a ${String(b.event_source)} event set; a pixel code takes event_source "web".`,
        );
      if (typeof b.event_source_id !== 'string' || b.event_source_id === '')
        throw new Invalid('event_source_id: Missing data for required field.');
      if (this.pixelCodes && !this.pixelCodes.has(b.event_source_id)) {
        return body(TIKTOK_CODES.NO_PERMISSION, `No permission to operate pixel code: ${b.event_source_id}`);
      }
      const data = b.data;
      if (!Array.isArray(data) || data.length === 0 || data.length > 1000)
        throw new Invalid('data: Length must be between 1 and 1000.');
      data.forEach((e, i) => this.validateEvent(e, `data[${i}]`));
      const testEventCode = typeof b.test_event_code === 'string' ? b.test_event_code : undefined;
      for (const event of data as TikTokEvent[])
        this.accepted.push({
          pixelCode: b.event_source_id,
          testEventCode,
          receivedAt: req.receivedAt,
          event,
        });
      return body(TIKTOK_CODES.OK, 'OK');
    } catch (e) {
      if (!(e instanceof Invalid)) throw e;
      return body(TIKTOK_CODES.INVALID, e.message);
    }
  }

  private validateEvent(e: unknown, at: string): void {
    if (!isRecord(e)) throw new Invalid(`${at}: Not a valid object.`);
    if (typeof e.event !== 'string' || e.event === '')
      throw new Invalid(`${at}.event: Missing data for required field.`);
    // TikTok unified its standard events in 2025: it still converts SubmitForm and CompletePayment
    // and sunsets ClickButton and PlaceAnOrder in 2027. Stricter than TikTok today, the fake
    // refuses all four (as TikTok answers an event it does not take), so a client still sending
    // a name on its way out fails here rather than on the day TikTok drops it.
    if (RETIRED_EVENTS.has(e.event))
      throw new Invalid(
        `${at}.event: ${e.event} is a retired standard event; use ${RETIRED_EVENTS.get(e.event)}.`,
      );
    const t = e.event_time;
    if (typeof t !== 'number' || !Number.isInteger(t))
      throw new Invalid(`${at}.event_time: Not a valid integer (Unix seconds).`);
    if (looksLikeMilliseconds(t) || t > Math.floor(this.now() / 1000) + MAX_FUTURE_SEC) {
      throw new Invalid(`${at}.event_time: ${t} is in the future; event_time must be in seconds.`);
    }
    if (typeof e.event_id !== 'string' || e.event_id === '')
      throw new Invalid(`${at}.event_id: Not a valid string.`);
    if (e.user !== undefined) {
      if (!isRecord(e.user)) throw new Invalid(`${at}.user: Not a valid object.`);
      for (const field of ['email', 'phone', 'external_id', 'first_name', 'last_name', 'zip_code']) {
        const v = e.user[field];
        if (v !== undefined && !matchesEach(v, SHA256_HEX))
          throw new Invalid(`${at}.user.${field}: must be a SHA-256 hash (64 lowercase hex characters).`);
      }
    }
    if (e.page !== undefined && (!isRecord(e.page) || typeof e.page.url !== 'string' || e.page.url === '')) {
      throw new Invalid(`${at}.page.url: Missing data for required field.`);
    }
    const p = e.properties;
    if (p !== undefined && !isRecord(p)) throw new Invalid(`${at}.properties: Not a valid object.`);
    if (p?.value !== undefined && typeof p.value !== 'number')
      throw new Invalid(`${at}.properties.value: Not a valid number.`);
    if (p?.currency !== undefined && !(typeof p.currency === 'string' && /^[A-Z]{3}$/.test(p.currency))) {
      throw new Invalid(`${at}.properties.currency: must be a 3-letter ISO 4217 code.`);
    }
    if (p?.order_id !== undefined && (typeof p.order_id !== 'string' || p.order_id === ''))
      throw new Invalid(`${at}.properties.order_id: Not a valid string.`);
    // Events API 2.0: a boolean on the event (not in `user` or `properties`).
    if (e.limited_data_use !== undefined && typeof e.limited_data_use !== 'boolean')
      throw new Invalid(`${at}.limited_data_use: Not a valid boolean.`);
    for (const nested of ['user', 'properties'] as const) {
      const o = e[nested];
      if (isRecord(o) && o.limited_data_use !== undefined)
        throw new Invalid(`${at}.${nested}.limited_data_use: Unknown field.`);
    }
  }

  protected failureReply(kind: ReplyFailure): Reply {
    switch (kind.type) {
      case 'invalidToken':
        return body(TIKTOK_CODES.TOKEN_INVALID, 'Access token is incorrect or has been revoked.');
      case 'rateLimit':
        return body(TIKTOK_CODES.THROTTLED, 'Too many requests. Please retry in some time.');
      case 'status':
        return body(TIKTOK_CODES.SERVER, 'Internal service error. Please retry later.');
    }
  }
}

export async function startTikTok(options: TikTokFakeOptions = {}): Promise<TikTokFake> {
  return new TikTokFake(options).listen();
}

function body(code: number, message: string): Reply {
  return { status: 200, body: { code, message, request_id: requestId(), data: {} } };
}

function requestId(): string {
  return `${new Date().toISOString().replace(/\D/g, '').slice(0, 14)}${randomId(18, '0123456789ABCDEF')}`;
}
