/**
 * Wire shapes of the keyless tracker surface (`{site_url}/backend/track/*`), shared by the backend
 * routes that parse them and by the clients that build them (the reverse proxy, tests).
 *
 * These schemas check types and sizes only. Semantics stay with the backend: domain validation of
 * `href`, the `visitRequestId`/`gatewayRequestId` agreement (a 400 with its own code, see
 * `resolveVisitRequestId`), and whether an unknown `websiteId` exists. A malformed `_fbc` cookie,
 * for instance, is still a string that fits, so the visit is recorded instead of refused.
 *
 * Unknown keys are stripped (zod's default), so older and newer clients keep working.
 */
import { z } from 'zod';
import { storableText } from './text.js';

/**
 * Maximum lengths of the string fields, in characters as zod counts them (Unicode code points).
 * Clients that measure UTF-16 units (the proxy, `tracker.js`) stay within them.
 */
export const WIRE_LIMITS = {
  websiteId: 128,
  channelId: 128,
  url: 2048,
  userAgent: 1024,
  clickId: 512,
  utm: 256,
} as const;

// Every string is one PostgreSQL can store: a NUL (`\u0000` in JSON, `%00` in a query) is a 400
// here, not a failed statement later.

const websiteId = storableText(WIRE_LIMITS.websiteId).min(1);
const channelId = storableText(WIRE_LIMITS.channelId).min(1);
const uuid = z.uuid();
const url = storableText(WIRE_LIMITS.url);
const clickId = storableText(WIRE_LIMITS.clickId);
const utm = storableText(WIRE_LIMITS.utm);

/**
 * The visitor's consent to tracking (docs/consent.md). Absent: the site's `--consent` mode decides
 * (`implied`: granted; `required`: denied). A visit without consent is counted, and nothing
 * identifying of it is stored or sent.
 */
export const consentSchema = z.enum(['granted', 'denied']);
export type Consent = z.infer<typeof consentSchema>;

/** A site's consent mode, as `GET track/consent` answers it (the proxy decides its cookies by it). */
export const consentModeSchema = z.enum(['implied', 'required']);
export type ConsentMode = z.infer<typeof consentModeSchema>;

/** Optional attribution fields common to `track/init` and `track/direct-invite`. */
export const attributionFieldsSchema = z.object({
  /** Full page URL the visitor saw, on the site's own host. */
  href: url.optional(),
  /** Path plus query of the landing page. */
  landingPage: url.optional(),
  referrer: url.optional(),
  userAgent: storableText(WIRE_LIMITS.userAgent).optional(),
  fbc: clickId.optional(),
  fbp: clickId.optional(),
  gclid: clickId.optional(),
  /** Google's click ids for iOS traffic (app and web), sent where there is no gclid. */
  gbraid: clickId.optional(),
  wbraid: clickId.optional(),
  ttclid: clickId.optional(),
  sccid: clickId.optional(),
  /** TikTok's `_ttp` cookie and Snapchat's `_scid` cookie, read on the landing page. */
  ttp: clickId.optional(),
  scid: clickId.optional(),
  utmSource: utm.optional(),
  utmMedium: utm.optional(),
  utmCampaign: utm.optional(),
  utmContent: utm.optional(),
  utmTerm: utm.optional(),
});
export type AttributionFields = z.infer<typeof attributionFieldsSchema>;

/** The attribution field names, for code that copies or fills them one by one. */
export const ATTRIBUTION_FIELDS = attributionFieldsSchema.keyof().options;

/** `POST /backend/track/init`. `visitRequestId` makes it retry-safe; `gatewayRequestId` is its legacy alias. */
export const trackInitBodySchema = z.object({
  websiteId,
  tempId: uuid,
  sessionId: uuid,
  visitRequestId: uuid.optional(),
  gatewayRequestId: uuid.optional(),
  consent: consentSchema.optional(),
  ...attributionFieldsSchema.shape,
});
export type TrackInitBody = z.infer<typeof trackInitBodySchema>;

/** `POST /backend/track/update-fbp`: adds `fbp` to the browser's latest visit. */
export const trackUpdateFbpBodySchema = z.object({
  websiteId,
  tempId: uuid,
  fbp: clickId.min(1),
});
export type TrackUpdateFbpBody = z.infer<typeof trackUpdateFbpBodySchema>;

/**
 * `POST /backend/track/direct-invite`: one visit, one PageView and one invitation per
 * `visitRequestId`. `channelId` picks the channel (omitted: the site's default channel).
 */
export const trackDirectInviteBodySchema = z
  .object({
    websiteId,
    tempId: uuid,
    sessionId: uuid,
    visitRequestId: uuid.optional(),
    gatewayRequestId: uuid.optional(),
    channelId: channelId.optional(),
    consent: consentSchema.optional(),
    ...attributionFieldsSchema.shape,
  })
  // Either name carries the request id: legacy clients send only `gatewayRequestId`.
  .refine((b) => b.visitRequestId !== undefined || b.gatewayRequestId !== undefined, {
    path: ['visitRequestId'],
    message: 'visitRequestId is required',
  });
/** @public The wire shape of the body of `track/direct-invite`, for clients written in TypeScript. */
export type TrackDirectInviteBody = z.infer<typeof trackDirectInviteBodySchema>;

/** `GET /backend/track/invite` query: `channel` omitted means the site's default channel. */
export const trackInviteQuerySchema = z.object({
  website: websiteId,
  tid: uuid,
  sid: uuid,
  channel: channelId.optional(),
  /** `denied`: a click without consent (its visit is recorded without identifiers, its join is organic). */
  consent: consentSchema.optional(),
  /** `json`: answer 200 `{visitId, inviteUrl}` instead of the 302 (tracker.js, to fall back on its own). */
  format: z.literal('json').optional(),
});
export type TrackInviteQuery = z.infer<typeof trackInviteQuerySchema>;

/** `GET track/entry`: a click that sends the visitor to a bot or its Mini App (the site's default entry without `entry`). */
export const trackEntryQuerySchema = z.object({
  website: websiteId,
  tid: uuid,
  sid: uuid,
  entry: channelId.optional(),
  consent: consentSchema.optional(),
  /** `json`: answer 200 `{visitId, url}` instead of the 302 (tracker.js, to fall back on its own). */
  format: z.literal('json').optional(),
});
export type TrackEntryQuery = z.infer<typeof trackEntryQuerySchema>;

/** `POST track/app`: a Mini App reports its launch with Telegram's signed `initData`. */
export const trackAppBodySchema = z.object({ initData: z.string().min(1).max(8192) });

/** `GET /backend/track/consent?website=…`: the site's consent mode (the proxy asks it at start). */
export const trackConsentQuerySchema = z.object({ website: websiteId });
export const trackConsentResponseSchema = z.object({ consentMode: consentModeSchema });
/** @public The wire shape of the answer of `track/consent`, for clients written in TypeScript. */
export type TrackConsentResponse = z.infer<typeof trackConsentResponseSchema>;

/** 200 from `track/init`; a retry with the same `visitRequestId` returns the same `visitId`. */
export const trackInitResponseSchema = z.object({
  visitId: z.string().min(1),
  /** The `event_id` of the Meta PageView queued for this visit (null: none), for a browser pixel's `eventID`. */
  pageViewEventId: z.string().min(1).nullish(),
});
export type TrackInitResponse = z.infer<typeof trackInitResponseSchema>;

/** 200 from `track/update-fbp`; `updated` is false when there was nothing to patch. */
export const trackUpdateFbpResponseSchema = z.object({ updated: z.boolean() });
export type TrackUpdateFbpResponse = z.infer<typeof trackUpdateFbpResponseSchema>;

/** 200 from `track/direct-invite`. */
export const trackDirectInviteResponseSchema = z.object({
  visitId: z.string().min(1),
  inviteUrl: z.string().min(1),
});
/** @public The wire shape of the answer of `track/direct-invite`, for clients written in TypeScript. */
export type TrackDirectInviteResponse = z.infer<typeof trackDirectInviteResponseSchema>;

export type VisitRequestIdResolution =
  | { ok: true; visitRequestId: string | undefined }
  | { ok: false; visitRequestId: string; gatewayRequestId: string };

/**
 * Merges `visitRequestId` and its alias. Both present and different (UUIDs compare
 * case-insensitively) is the spec's HTTP 400 (`REQUEST_ID_MISMATCH`). The result is lower-case.
 */
export function resolveVisitRequestId(body: {
  visitRequestId?: string | undefined;
  gatewayRequestId?: string | undefined;
}): VisitRequestIdResolution {
  const visit = body.visitRequestId?.toLowerCase();
  const gateway = body.gatewayRequestId?.toLowerCase();
  if (visit !== undefined && gateway !== undefined && visit !== gateway) {
    return { ok: false, visitRequestId: visit, gatewayRequestId: gateway };
  }
  return { ok: true, visitRequestId: visit ?? gateway };
}
