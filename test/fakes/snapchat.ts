// Fake of Snap's Conversions API v3. One invalid event makes the whole request INVALID (HTTP 400).
// Its Test Event Tool, `POST /v3/{pixel}/events/validate` (developers.snap.com, Conversions API →
// Verify Set Up), checks events the same way, answers VALID or INVALID (400) and records nothing
// as a conversion: the events it found valid are kept apart, in `validated()`.
import {
  FakeServer,
  Invalid,
  SHA256_HEX,
  dedupStats,
  isRecord,
  looksLikeMilliseconds,
  matchesEach,
  type DedupStats,
  type FakeOptions,
  type ReceivedRequest,
  type Reply,
  type ReplyFailure,
} from './base.js';

export interface SnapchatFakeOptions extends FakeOptions {
  /** Tokens accepted as `access_token`. Default `['snap-test-token']`. */
  accessTokens?: string[];
  /** When set, a pixel not listed is INVALID. */
  pixelIds?: string[];
  /** Clock for the event_time window, in ms. Default `Date.now`. */
  now?: () => number;
}

export interface SnapEvent {
  event_name: string;
  event_time: number;
  action_source: string;
  event_id?: string;
  event_source_url?: string;
  user_data: Record<string, unknown>;
  custom_data?: Record<string, unknown>;
  [field: string]: unknown;
}

export interface SnapAcceptedEvent {
  pixelId: string;
  receivedAt: number;
  event: SnapEvent;
}

export const SNAP_EVENT_NAMES: readonly string[] = [
  'PAGE_VIEW',
  'SIGN_UP',
  'PURCHASE',
  'SUBSCRIBE',
  'VIEW_CONTENT',
  'ADD_CART',
  'START_CHECKOUT',
  'ADD_BILLING',
  'SAVE',
  'SEARCH',
  'LIST_VIEW',
  'START_TRIAL',
  'LOGIN',
  'SHARE',
  'INVITE',
  'RESERVE',
  'ADD_TO_WISHLIST',
  'RATE',
  'COMPLETE_TUTORIAL',
  'LEVEL_COMPLETE',
  'ACHIEVEMENT_UNLOCKED',
  'SPENT_CREDITS',
  'APP_OPEN',
  'AD_CLICK',
  'AD_VIEW',
  'CUSTOM_EVENT_1',
  'CUSTOM_EVENT_2',
  'CUSTOM_EVENT_3',
  'CUSTOM_EVENT_4',
  'CUSTOM_EVENT_5',
];
const ACTION_SOURCES = ['WEB', 'MOBILE_APP', 'OFFLINE'];
const MAX_AGE_SEC = 37 * 24 * 3600;
const MAX_FUTURE_SEC = 5 * 60;
const PATH = /^\/v3\/([^/]+)\/events(\/validate)?$/;

export class SnapchatFake extends FakeServer {
  readonly accessTokens: Set<string>;
  private readonly pixelIds: Set<string> | undefined;
  private readonly now: () => number;
  private accepted: SnapAcceptedEvent[] = [];
  private validatedEvents: SnapAcceptedEvent[] = [];

  constructor(options: SnapchatFakeOptions = {}) {
    super('snapchat', options);
    this.accessTokens = new Set(options.accessTokens ?? ['snap-test-token']);
    this.pixelIds = options.pixelIds && new Set(options.pixelIds);
    this.now = options.now ?? Date.now;
  }

  events(pixelId?: string): SnapAcceptedEvent[] {
    return pixelId === undefined ? [...this.accepted] : this.accepted.filter((e) => e.pixelId === pixelId);
  }

  /** Deduplicated on pixel + event_name + event_id. */
  dedupStats(pixelId?: string): DedupStats {
    return dedupStats(this.events(pixelId), (e) =>
      e.event.event_id === undefined ? undefined : `${e.pixelId}|${e.event.event_name}|${e.event.event_id}`,
    );
  }

  /** Events the validate endpoint found valid (never conversions). */
  validated(pixelId?: string): SnapAcceptedEvent[] {
    return pixelId === undefined
      ? [...this.validatedEvents]
      : this.validatedEvents.filter((e) => e.pixelId === pixelId);
  }

  protected resetState(): void {
    this.accepted = [];
    this.validatedEvents = [];
  }

  protected route(req: ReceivedRequest): Reply {
    const match = PATH.exec(req.path);
    if (!match || req.method !== 'POST') return invalid(404, `No route for ${req.method} ${req.path}`);
    const pixelId = match[1] ?? '';
    const token = req.query.access_token;
    if (!token || !this.accessTokens.has(token))
      return invalid(401, 'Unauthorized: invalid or missing access_token');
    if (this.pixelIds && !this.pixelIds.has(pixelId)) return invalid(400, `Pixel ${pixelId} not found`);
    if (!isRecord(req.body))
      return invalid(400, `Request body is not a JSON object${req.bodyError ? `: ${req.bodyError}` : ''}`);
    const data = req.body.data;
    try {
      if (!Array.isArray(data) || data.length === 0 || data.length > 2000)
        throw new Invalid('data must be an array of 1 to 2000 events');
      data.forEach((e, i) => this.validateEvent(e, `data[${i}]`));
      // The validate endpoint also refuses a Purchase without its price and currency.
      if (match[2]) {
        (data as SnapEvent[]).forEach((e, i) => {
          if (
            e.event_name === 'PURCHASE' &&
            (e.custom_data?.value === undefined || e.custom_data?.currency === undefined)
          )
            throw new Invalid(`data[${i}]: a PURCHASE needs custom_data.value and custom_data.currency`);
        });
      }
    } catch (e) {
      if (!(e instanceof Invalid)) throw e;
      return invalid(400, e.message);
    }
    const into = match[2] ? this.validatedEvents : this.accepted;
    for (const event of data as SnapEvent[]) into.push({ pixelId, receivedAt: req.receivedAt, event });
    return { status: 200, body: { status: 'VALID' } };
  }

  private validateEvent(e: unknown, at: string): void {
    if (!isRecord(e)) throw new Invalid(`${at} must be an object`);
    if (typeof e.event_name !== 'string' || !SNAP_EVENT_NAMES.includes(e.event_name))
      throw new Invalid(`${at}.event_name ${JSON.stringify(e.event_name)} is not a supported event`);
    const t = e.event_time;
    if (typeof t !== 'number' || !Number.isInteger(t))
      throw new Invalid(`${at}.event_time must be an integer Unix timestamp in seconds`);
    const nowSec = Math.floor(this.now() / 1000);
    if (looksLikeMilliseconds(t) || t > nowSec + MAX_FUTURE_SEC)
      throw new Invalid(`${at}.event_time ${t} is in the future; it must be in seconds`);
    if (t < nowSec - MAX_AGE_SEC) throw new Invalid(`${at}.event_time ${t} is older than 37 days`);
    if (typeof e.action_source !== 'string' || !ACTION_SOURCES.includes(e.action_source))
      throw new Invalid(`${at}.action_source must be one of ${ACTION_SOURCES.join(', ')}`);
    const ud = e.user_data;
    if (!isRecord(ud)) throw new Invalid(`${at}.user_data is required`);
    if (e.action_source === 'WEB') {
      if (typeof e.event_source_url !== 'string' || e.event_source_url === '')
        throw new Invalid(`${at}.event_source_url is required for WEB events`);
      if (typeof ud.client_user_agent !== 'string' || ud.client_user_agent === '')
        throw new Invalid(`${at}.user_data.client_user_agent is required for WEB events`);
    }
    for (const field of ['em', 'ph', 'fn', 'ln', 'ge', 'db', 'ct', 'st', 'zp', 'country', 'external_id']) {
      if (ud[field] !== undefined && !matchesEach(ud[field], SHA256_HEX))
        throw new Invalid(`${at}.user_data.${field} must be SHA-256 hashed (64 lowercase hex characters)`);
    }
    const cd = e.custom_data;
    if (cd !== undefined && !isRecord(cd)) throw new Invalid(`${at}.custom_data must be an object`);
    if (cd?.value !== undefined && typeof cd.value !== 'number')
      throw new Invalid(`${at}.custom_data.value must be a number`);
    if (
      cd?.currency !== undefined &&
      !(typeof cd.currency === 'string' && /^[A-Za-z]{3}$/.test(cd.currency))
    ) {
      throw new Invalid(`${at}.custom_data.currency must be a 3-letter ISO 4217 code`);
    }
    for (const key of ['order_id', 'transaction_id'] as const)
      if (cd?.[key] !== undefined && (typeof cd[key] !== 'string' || cd[key] === ''))
        throw new Invalid(`${at}.custom_data.${key} must be a non-empty string`);
  }

  protected failureReply(kind: ReplyFailure): Reply {
    switch (kind.type) {
      case 'invalidToken':
        return invalid(401, 'Unauthorized: invalid or missing access_token');
      case 'rateLimit':
        return {
          ...invalid(429, 'Too many requests'),
          headers: { 'retry-after': String(kind.retryAfterSec) },
        };
      case 'status':
        return invalid(kind.status, 'Internal server error');
    }
  }
}

export async function startSnapchat(options: SnapchatFakeOptions = {}): Promise<SnapchatFake> {
  return new SnapchatFake(options).listen();
}

function invalid(status: number, reason: string): Reply {
  return { status, body: { status: 'INVALID', reason } };
}
