import { organicReason } from './organic-reason.js';
import { deliveryLabel } from '../outbox/capi-status.js';
import { pixelLabel } from '../reports/pixel-health.js';
import type { Queryable } from '../../db/pool.js';

/**
 * One Telegram user across every site: their lead rows, joins and leaves (with the visit each
 * attributed join came through and which signals that visit carried), and conversions with their
 * sends. For the operator answering "why was this purchase not attributed?". Reads only; the
 * visit's IP and User-Agent are shown as present or not, never as values.
 */
const JOURNEY_LIMIT = 100;

interface JourneyLead {
  siteId: string;
  siteName: string;
  firstSeenAt: Date;
  lastSeenAt: Date;
  externalUserId: string | null;
}

export interface VisitSignals {
  at: Date;
  landingPage: string | null;
  utmSource: string | null;
  utmCampaign: string | null;
  /** Which attribution signals the visit carried. */
  signals: string[];
}

interface JourneyMembership {
  at: Date;
  siteName: string;
  channelTitle: string;
  kind: string;
  attributed: boolean;
  viaJoinRequest: boolean;
  /** For a join no visit was credited with: why (organic-reason.ts). */
  organicReason: string | null;
  visit: VisitSignals | null;
}

interface JourneySend {
  platform: string;
  /** The pixel, by the platform's own id of it. */
  pixel: string;
  status: string;
  attempts: number;
  reason: string | null;
}

interface JourneyConversion {
  conversionId: string;
  receivedAt: Date;
  siteName: string;
  channelTitle: string | null;
  eventType: string;
  value: number | null;
  currency: string | null;
  source: string;
  capiStatus: string;
  awaitingValue: boolean;
  coldLead: boolean;
  visit: VisitSignals | null;
  /** Fields of the cold lead's `apiVisitOverride` that are present. */
  override: string[];
  sends: JourneySend[];
  /** What of the conversion's PII was not sent, and why (e.g. a phone without a country): never the value. */
  piiWarnings: string[];
}

export interface LeadJourney {
  telegramUserId: string;
  leads: JourneyLead[];
  memberships: JourneyMembership[];
  conversions: JourneyConversion[];
}

const VISIT_FIELDS = `v.created_at AS visit_at, v.landing_page, v.utm_source, v.utm_campaign,
  v.fbc IS NOT NULL AS has_fbc, v.fbp IS NOT NULL AS has_fbp, v.gclid IS NOT NULL AS has_gclid, v.ttclid IS NOT NULL AS has_ttclid,
  v.sccid IS NOT NULL AS has_sccid, v.client_ip IS NOT NULL AS has_ip, v.user_agent IS NOT NULL AS has_ua`;

interface VisitColumns {
  visit_at: Date | null;
  landing_page: string | null;
  utm_source: string | null;
  utm_campaign: string | null;
  has_fbc: boolean | null;
  has_fbp: boolean | null;
  has_gclid: boolean | null;
  has_ttclid: boolean | null;
  has_sccid: boolean | null;
  has_ip: boolean | null;
  has_ua: boolean | null;
}

const SIGNAL_NAMES: Array<[keyof VisitColumns, string]> = [
  ['has_fbc', 'fbc'],
  ['has_fbp', 'fbp'],
  ['has_gclid', 'gclid'],
  ['has_ttclid', 'ttclid'],
  ['has_sccid', 'sccid'],
  ['has_ip', 'IP'],
  ['has_ua', 'User-Agent'],
];

function visitOf(r: VisitColumns): VisitSignals | null {
  if (r.visit_at === null) return null;
  return {
    at: r.visit_at,
    landingPage: r.landing_page,
    utmSource: r.utm_source,
    utmCampaign: r.utm_campaign,
    signals: SIGNAL_NAMES.filter(([column]) => r[column] === true).map(([, name]) => name),
  };
}

/** The journey of a Telegram user (a positive safe integer), newest first, at most JOURNEY_LIMIT of each kind. */
export async function leadJourney(
  db: Queryable,
  telegramUserId: number,
  within: { accountId: string | null; siteId: string | null } = { accountId: null, siteId: null },
): Promise<LeadJourney> {
  // A user limited to an account or a site sees the journey within it only.
  const scoped = (a: number) =>
    `AND ($${a}::uuid IS NULL OR s.account_id = $${a}) AND ($${a + 1}::uuid IS NULL OR s.id = $${a + 1})`;
  const [leads, memberships, conversions] = await Promise.all([
    db.query<{
      site_id: string;
      site_name: string;
      first_seen_at: Date;
      last_seen_at: Date;
      external_user_id: string | null;
    }>(
      `SELECT l.site_id, s.name AS site_name, l.first_seen_at, l.last_seen_at, l.external_user_id
       FROM leads l JOIN sites s ON s.id = l.site_id WHERE l.telegram_user_id = $1 ${scoped(2)} ORDER BY l.first_seen_at, s.name`,
      [telegramUserId, within.accountId, within.siteId],
    ),
    db.query<
      VisitColumns & {
        occurred_at: Date;
        site_name: string;
        channel_title: string;
        kind: string;
        attributed: boolean;
        via_join_request: boolean;
        through_our_link: boolean;
        fallback_link: boolean;
        visit_without_consent: boolean;
        chat_is_public: boolean;
      }
    >(
      `SELECT m.occurred_at, s.name AS site_name, ch.title AS channel_title, m.kind, m.attributed, m.via_join_request,
         m.invitation_id IS NOT NULL AS through_our_link, COALESCE(i.unattributed, false) AS fallback_link,
         COALESCE(NOT v.consented, false) AS visit_without_consent, COALESCE(ch.chat_is_public, false) AS chat_is_public, ${VISIT_FIELDS}
       FROM memberships m JOIN channels ch ON ch.id = m.channel_id JOIN sites s ON s.id = ch.site_id
       LEFT JOIN invitations i ON i.id = m.invitation_id
       LEFT JOIN visits v ON v.id = m.visit_id
       WHERE m.telegram_user_id = $1 ${scoped(3)} ORDER BY m.occurred_at DESC LIMIT $2`,
      [telegramUserId, JOURNEY_LIMIT, within.accountId, within.siteId],
    ),
    db.query<
      VisitColumns & {
        id: string;
        received_at: Date;
        site_name: string;
        channel_title: string | null;
        event_type: string;
        custom_event_name: string | null;
        value: number | null;
        currency: string | null;
        source: string;
        capi_status: string;
        awaiting_manual_input: boolean;
        cold_lead: boolean;
        override: Record<string, unknown> | null;
        sends: (Omit<JourneySend, 'pixel'> & { config: Record<string, unknown> })[] | null;
        pii_warnings: string[];
      }
    >(
      `SELECT c.id, c.received_at, s.name AS site_name, ch.title AS channel_title, c.event_type, c.custom_event_name, c.value::float8 AS value,
         c.currency, c.source, c.capi_status, c.awaiting_manual_input, c.cold_lead, c.api_visit_override AS override, c.pii_warnings, ${VISIT_FIELDS},
         (SELECT json_agg(json_build_object('platform', x.platform, 'status', x.status, 'attempts', x.attempts, 'reason', COALESCE(x.last_error, x.skip_reason),
                                            'config', p.public_config) ORDER BY x.platform, p.created_at)
          FROM sends x JOIN pixels p ON p.id = x.pixel_id WHERE x.conversion_id = c.id) AS sends
       FROM conversions c JOIN sites s ON s.id = c.site_id LEFT JOIN channels ch ON ch.id = c.channel_id
       LEFT JOIN visits v ON v.id = c.visit_id
       WHERE c.telegram_user_id = $1 ${scoped(3)} ORDER BY c.received_at DESC, c.id LIMIT $2`,
      [telegramUserId, JOURNEY_LIMIT, within.accountId, within.siteId],
    ),
  ]);
  return {
    telegramUserId: String(telegramUserId),
    leads: leads.rows.map((r) => ({
      siteId: r.site_id,
      siteName: r.site_name,
      firstSeenAt: r.first_seen_at,
      lastSeenAt: r.last_seen_at,
      externalUserId: r.external_user_id,
    })),
    memberships: memberships.rows.map((r) => ({
      at: r.occurred_at,
      siteName: r.site_name,
      channelTitle: r.channel_title,
      kind: r.kind,
      attributed: r.attributed,
      viaJoinRequest: r.via_join_request,
      organicReason:
        (r.kind !== 'join' && r.kind !== 'approved') || r.attributed
          ? null
          : organicReason({
              throughOurLink: r.through_our_link,
              fallbackLink: r.fallback_link,
              visitWithoutConsent: r.visit_without_consent,
              viaJoinRequest: r.via_join_request,
              chatIsPublic: r.chat_is_public,
            }),
      visit: visitOf(r),
    })),
    conversions: conversions.rows.map((r) => ({
      conversionId: r.id,
      receivedAt: r.received_at,
      siteName: r.site_name,
      channelTitle: r.channel_title,
      eventType:
        r.event_type === 'Custom' && r.custom_event_name ? `Custom: ${r.custom_event_name}` : r.event_type,
      value: r.value,
      currency: r.currency?.trim() ?? null,
      source: r.source,
      capiStatus: deliveryLabel(
        r.capi_status,
        (r.sends ?? []).map((x) => x.status),
      ),
      awaitingValue: r.awaiting_manual_input,
      coldLead: r.cold_lead,
      visit: visitOf(r),
      override: Object.entries(r.override ?? {})
        .filter(([, v]) => typeof v === 'string' && v !== '')
        .map(([k]) => k),
      sends: (r.sends ?? []).map(({ config, ...x }) => ({ ...x, pixel: pixelLabel(x.platform, config) })),
      piiWarnings: r.pii_warnings,
    })),
  };
}
