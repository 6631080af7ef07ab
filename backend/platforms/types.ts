import { z } from 'zod';

export const PLATFORMS = ['meta', 'tiktok', 'snapchat', 'google'] as const;
export type Platform = (typeof PLATFORMS)[number];

/**
 * The conversions Capigram records and sends: the business API's event types, the Telegram join's
 * Subscribe, the Google action mappings. The one list; the API schema, the CLI, the writer and the
 * event builder all take it from here.
 */
export const CONVERSION_EVENT_TYPES = [
  'Contact',
  'Lead',
  'Purchase',
  'CompleteRegistration',
  'Subscribe',
  'Custom',
] as const;
export type ConversionEventType = (typeof CONVERSION_EVENT_TYPES)[number];
/** What a send carries: a conversion, or a landing page's view. */
export const EVENT_TYPES = ['PageView', ...CONVERSION_EVENT_TYPES] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/**
 * SHA-256 digests (lowercase hex) of normalised PII, produced by `domain/pii/normalize.ts` on receipt.
 * `ph` hashes the digits with country code and no `+` (Meta, Snapchat); `phE164` hashes the
 * E.164 form with the `+` (TikTok, Google). Adapters send these as they are and never hash again.
 */
export interface HashedPii {
  em?: string;
  /** The e-mail as Google normalises it (dots dropped from gmail.com / googlemail.com local parts). */
  emGoogle?: string;
  ph?: string;
  phE164?: string;
  fn?: string;
  ln?: string;
  /** The request's own external id (the CRM's); the Telegram user id is added at delivery. */
  externalId?: string;
  /** City: lowercase, no spaces or punctuation. */
  ct?: string;
  /** State: the two-letter code in the US and Canada, else the name without spaces or punctuation. */
  st?: string;
  /** Postal code: lowercase without spaces or dash; five digits in the US. */
  zp?: string;
  /** ISO 3166-1 alpha-2, lowercase. */
  country?: string;
  /** Date of birth `YYYYMMDD`. */
  db?: string;
  /** Gender `f` or `m`. */
  ge?: string;
}

/** The keys of `HashedPii`: every one holds a SHA-256 hex digest. */
export const HASHED_PII_KEYS = [
  'em',
  'emGoogle',
  'ph',
  'phE164',
  'fn',
  'ln',
  'externalId',
  'ct',
  'st',
  'zp',
  'country',
  'db',
  'ge',
] as const satisfies readonly (keyof HashedPii)[];

/**
 * How the conversion happened, in Meta's words (`action_source`): on the website (with the page's
 * URL and the browser's User-Agent), in a messaging app (`chat`: a Telegram join reported as
 * such), or recorded by the business's own systems with no browser at hand (`system_generated`).
 * TikTok and Snapchat map these to their own sources.
 */
export const ACTION_SOURCES = ['website', 'chat', 'system_generated'] as const;
export type ActionSource = (typeof ACTION_SOURCES)[number];

/** One event as the delivery pipeline hands it to an adapter (from a conversion or a visit). */
export interface DeliveryEvent {
  /** Stable per conversion (per visit for PageView) and reused on every retry: the platforms dedup on it. */
  eventId: string;
  eventType: EventType;
  customEventName?: string | null;
  /** Unix milliseconds; adapters send seconds. */
  eventTimeMs: number;
  eventSourceUrl?: string | null;
  referrer?: string | null;
  clientIp?: string | null;
  /** The IP of the visit (the device on the landing page), not of a later business request. */
  landingIp?: string | null;
  userAgent?: string | null;
  fbc?: string | null;
  fbp?: string | null;
  gclid?: string | null;
  /** Google's click ids for iOS app (`gbraid`) and web (`wbraid`) traffic, sent when there is no gclid. */
  gbraid?: string | null;
  wbraid?: string | null;
  ttclid?: string | null;
  sccid?: string | null;
  /** TikTok's first-party cookie `_ttp`, read on the landing page. */
  ttp?: string | null;
  /** Snapchat's first-party cookie `_scid` (sent as `sc_cookie1`). */
  scid?: string | null;
  /** Defaults to `website`. */
  actionSource?: ActionSource;
  /** The site's `--limited-data-use`: Meta's Limited Data Use, TikTok's `limited_data_use` (docs/consent.md). */
  limitedDataUse?: boolean;
  hashed: HashedPii;
  /**
   * Every external id of the lead, as digests: the CRM's (normalised as Meta's parameter builder
   * does) and the Telegram user id's, so that every event of one lead carries the same ids.
   * Empty or absent: `hashed.externalId` alone.
   */
  externalIds?: string[];
  value?: number | null;
  currency?: string | null;
  contentName?: string | null;
  /**
   * The transaction id (Google's): the business's order (`orderId` of the business event) when it
   * has one, else the conversion id. Falls back to `eventId` when absent.
   */
  orderId?: string | null;
  /**
   * The business's own order id alone (null without one): Meta `custom_data.order_id`, TikTok
   * `properties.order_id`, Snapchat `custom_data.order_id`. The event id is derived from it too.
   */
  businessOrderId?: string | null;
  /** The site's `ad_user_data` consent for Google (`GRANTED`/`DENIED`); null: the configured default. */
  adUserDataConsent?: 'GRANTED' | 'DENIED' | null;
  /** Google's `adPersonalization` consent for this event (`GRANTED`/`DENIED`); null: not known. */
  adPersonalizationConsent?: 'GRANTED' | 'DENIED' | null;
}

const nonEmpty = z.string().trim().min(1);

/** The APIs a Google pixel can send through (see the pixel config's `api`). */
export const GOOGLE_APIS = ['data-manager', 'ads'] as const;
export type GoogleApi = (typeof GOOGLE_APIS)[number];

/** A Google pixel's API; one stored before the choice existed uses the Google Ads API. */
export function googleApiOf(p: { api?: GoogleApi | undefined }): GoogleApi {
  return p.api ?? 'ads';
}

/** Decrypted credentials of one pixel; parse what comes out of the database with this. */
export const pixelConfigSchema = z.discriminatedUnion('platform', [
  z.object({
    platform: z.literal('meta'),
    pixelId: nonEmpty,
    accessToken: nonEmpty,
    testEventCode: z.string().nullish(),
  }),
  z.object({
    platform: z.literal('tiktok'),
    pixelCode: nonEmpty,
    accessToken: nonEmpty,
    testEventCode: z.string().nullish(),
  }),
  z.object({
    platform: z.literal('snapchat'),
    pixelId: nonEmpty,
    accessToken: nonEmpty,
  }),
  z
    .object({
      platform: z.literal('google'),
      customerId: nonEmpty,
      /**
       * Conversion action id (or full resource name `customers/{cid}/conversionActions/{id}`) per
       * event type, `Custom:<name>`, `Custom` or `*` (see `google-actions.ts`).
       */
      conversionActions: z
        .record(z.string(), nonEmpty)
        .refine((m) => Object.keys(m).length > 0, { message: 'at least one conversion action is required' }),
      /**
       * Which Google API takes the conversions: the Data Manager API (`events:ingest`, no developer
       * token) or the Google Ads API's `uploadClickConversions` (`ads`), which Google keeps only for
       * developer tokens it still allowlists. A stored pixel without it predates the choice: `ads`.
       */
      api: z.enum(GOOGLE_APIS).optional(),
      /** Uploads are validated by Google and not recorded (`validateOnly`): a pixel being tried out. */
      validateOnly: z.boolean().optional(),
      /** Send the visit's IP as `userIpAddress`, which Google accepts only from allowlisted accounts. */
      sendUserIpAddress: z.boolean().optional(),
      /** The Google Ads API's developer token: required on `ads`, not used by the Data Manager API. */
      developerToken: nonEmpty.optional(),
      /**
       * The OAuth access token sent as `Bearer`. Stored, it is short-lived (about an hour); with a
       * refresh token the delivery path fills it in with a fresh one before building the request.
       */
      oauthToken: nonEmpty.optional(),
      /** OAuth client credentials and refresh token: access tokens are obtained from them as needed. */
      refreshToken: nonEmpty.optional(),
      clientId: nonEmpty.optional(),
      clientSecret: nonEmpty.optional(),
      loginCustomerId: z.string().nullish(),
    })
    .refine(
      (p) =>
        p.oauthToken !== undefined ||
        (p.refreshToken !== undefined && p.clientId !== undefined && p.clientSecret !== undefined),
      {
        message: 'an OAuth access token, or a refresh token with its client id and secret, is required',
        path: ['oauthToken'],
      },
    )
    .refine((p) => googleApiOf(p) === 'data-manager' || p.developerToken !== undefined, {
      message: 'the Google Ads API (api ads) needs a developer token',
      path: ['developerToken'],
    }),
]);
export type PixelConfig = z.infer<typeof pixelConfigSchema>;
export type PixelConfigOf<P extends Platform> = Extract<PixelConfig, { platform: P }>;

export interface HttpRequestSpec {
  method: 'POST';
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** What came back from the platform: a response, or the reason there was none (timeout, refused, …). */
export type PlatformResponse =
  | { status: number; headers: Record<string, string>; bodyText: string }
  | { networkError: string };

export type EventOutcome =
  | { eventId: string; outcome: 'delivered' }
  | { eventId: string; outcome: 'retry'; delayMs?: number; error: string }
  | {
      eventId: string;
      outcome: 'failed';
      error: string;
      /**
       * Set when the platform rejected the whole request, most likely because of one event in
       * it, and the batch held more than one event: the other events may be fine. Resend the
       * batch split by `decideIsolation` instead of failing every event.
       */
      isolate?: true;
    };

export type PrecheckResult = { ok: true } | { ok: false; skipReason: string };

export interface BuildOptions {
  /** Google: the `ad_user_data` consent sent when the event's site sets none (from configuration). */
  adUserDataConsent?: 'GRANTED' | 'DENIED';
  /** Meta `vNN.0`, TikTok `v1.3`, Google `vNN`; the defaults are in `api-versions.ts`. */
  apiVersion?: string;
}

export interface PlatformAdapter {
  platform: Platform;
  /** Most events one request may carry. */
  maxBatch: number;
  /** Oldest event the platform accepts, measured from `nowMs` at send time. */
  maxEventAgeMs: number;
  /**
   * Whether the event can be valid at all for this platform (and, when given, this pixel: a Google
   * pixel takes only the event types it maps); a failed check means "skip the send".
   */
  precheck(e: DeliveryEvent, nowMs: number, pixel?: PixelConfig): PrecheckResult;
  /** Builds the request for 1..maxBatch prechecked events; throws on a programming error (wrong pixel, empty batch). */
  buildRequest(
    events: DeliveryEvent[],
    pixel: PixelConfig,
    baseUrl: string,
    opts?: BuildOptions,
  ): HttpRequestSpec;
  /**
   * One outcome per event, in the order of `events`. `nowMs` is needed to turn a `Retry-After`
   * HTTP date into a delay.
   */
  classify(res: PlatformResponse, events: DeliveryEvent[], nowMs: number): EventOutcome[];
}
