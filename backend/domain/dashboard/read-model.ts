import { deliveryLabel } from '../outbox/capi-status.js';
import { pixelLabel } from '../reports/pixel-health.js';
import type { Queryable } from '../../db/pool.js';
import { installStates, type SiteInstallState } from '../tracker/install-signals.js';
import { listChannels, type ChannelListItem } from '../admin/channels.js';
import { listPixels, type PixelSummary } from '../admin/pixels.js';
import { findSite, type SiteRow } from '../admin/sites.js';

/**
 * What the operator dashboard shows: every site with what needs attention, and one site in detail.
 * Reads only. Raw PII is never stored, so none can be shown; hashed PII is not shown either.
 */

export interface SiteOverview {
  siteId: string;
  websiteId: string;
  name: string;
  accountId: string;
  accountName: string;
  domains: string[];
  channels: number;
  /** Channels whose bot is known to have lost admin rights or the right to invite: joins go unseen. */
  channelsWithoutInviteRights: number;
  activePixels: number;
  awaitingValue: number;
  /** Sends created since `since`, by status. */
  sends: Record<'pending' | 'sent' | 'failed' | 'skipped', number>;
  /** Failed sends of any age (what `sends retry` would act on). */
  failedSends: number;
  /** Install checks: visits seen, hosts refused. */
  install: SiteInstallState;
  /** Since midnight UTC of `today`'s day: visits, channel joins (attributed or not), conversions. */
  today: { visits: number; joins: number; conversions: number };
  /** The same counts for yesterday from midnight UTC to this time of day: a fair comparison. */
  yesterdayByNow: { visits: number; joins: number; conversions: number };
}

/** Every site, grouped by account, with the counts that tell whether it is working. */
export async function dashboardOverview(db: Queryable, since: Date, now: Date): Promise<SiteOverview[]> {
  const midnight = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  const { rows } = await db.query<{
    id: string;
    website_id: string;
    name: string;
    account_id: string;
    account_name: string;
    domains: string[];
    channels: number;
    no_invite: number;
    active_pixels: number;
    awaiting: number;
    failed_all: number;
    pending: number;
    sent: number;
    failed: number;
    skipped: number;
    visits_today: number;
    joins_today: number;
    conversions_today: number;
    visits_yesterday: number;
    joins_yesterday: number;
    conversions_yesterday: number;
  }>(
    `SELECT s.id, s.website_id, s.name, s.account_id, a.name AS account_name, s.domains,
       (SELECT count(*)::int FROM channels c WHERE c.site_id = s.id AND c.active) AS channels,
       (SELECT count(*)::int FROM channels c WHERE c.site_id = s.id AND c.active AND (c.bot_is_admin = false OR c.bot_can_invite = false)) AS no_invite,
       (SELECT count(*)::int FROM pixels p WHERE p.site_id = s.id AND p.active) AS active_pixels,
       (SELECT count(*)::int FROM conversions c WHERE c.site_id = s.id AND c.awaiting_manual_input) AS awaiting,
       (SELECT count(*)::int FROM sends x JOIN pixels p ON p.id = x.pixel_id WHERE p.site_id = s.id AND x.status = 'failed') AS failed_all,
       (SELECT count(*)::int FROM visits v WHERE v.site_id = s.id AND v.created_at >= $2) AS visits_today,
       (SELECT count(*)::int FROM channels c JOIN memberships m ON m.channel_id = c.id
         WHERE c.site_id = s.id AND m.kind = 'join' AND m.occurred_at >= $2) AS joins_today,
       (SELECT count(*)::int FROM conversions c WHERE c.site_id = s.id AND c.received_at >= $2) AS conversions_today,
       (SELECT count(*)::int FROM visits v WHERE v.site_id = s.id AND v.created_at >= $2::timestamptz - interval '1 day'
         AND v.created_at < $3::timestamptz - interval '1 day') AS visits_yesterday,
       (SELECT count(*)::int FROM channels c JOIN memberships m ON m.channel_id = c.id
         WHERE c.site_id = s.id AND m.kind = 'join' AND m.occurred_at >= $2::timestamptz - interval '1 day'
         AND m.occurred_at < $3::timestamptz - interval '1 day') AS joins_yesterday,
       (SELECT count(*)::int FROM conversions c WHERE c.site_id = s.id AND c.received_at >= $2::timestamptz - interval '1 day'
         AND c.received_at < $3::timestamptz - interval '1 day') AS conversions_yesterday,
       COALESCE(r.pending, 0) AS pending, COALESCE(r.sent, 0) AS sent, COALESCE(r.failed, 0) AS failed, COALESCE(r.skipped, 0) AS skipped
     FROM sites s JOIN accounts a ON a.id = s.account_id
     LEFT JOIN LATERAL (
       SELECT count(*) FILTER (WHERE x.status = 'pending')::int AS pending, count(*) FILTER (WHERE x.status = 'sent')::int AS sent,
              count(*) FILTER (WHERE x.status = 'failed')::int AS failed, count(*) FILTER (WHERE x.status = 'skipped')::int AS skipped
       FROM sends x JOIN pixels p ON p.id = x.pixel_id
       WHERE p.site_id = s.id AND x.created_at >= $1) r ON true
     WHERE s.removed_at IS NULL
     ORDER BY a.name, a.id, s.name, s.id`,
    [since, midnight, now],
  );
  const install = await installStates(
    db,
    rows.map((r) => r.id),
  );
  return rows.map((r) => ({
    siteId: r.id,
    websiteId: r.website_id,
    name: r.name,
    accountId: r.account_id,
    accountName: r.account_name,
    domains: r.domains,
    channels: r.channels,
    channelsWithoutInviteRights: r.no_invite,
    activePixels: r.active_pixels,
    awaitingValue: r.awaiting,
    sends: { pending: r.pending, sent: r.sent, failed: r.failed, skipped: r.skipped },
    failedSends: r.failed_all,
    install: install.get(r.id) ?? NOTHING_SEEN,
    today: { visits: r.visits_today, joins: r.joins_today, conversions: r.conversions_today },
    yesterdayByNow: {
      visits: r.visits_yesterday,
      joins: r.joins_yesterday,
      conversions: r.conversions_yesterday,
    },
  }));
}

const NOTHING_SEEN: SiteInstallState = { firstVisitAt: null, lastVisitAt: null, refusedHosts: [] };

export interface ConversionLine {
  conversionId: string;
  telegramUserId: string;
  eventType: string;
  customEventName: string | null;
  value: number | null;
  currency: string | null;
  channelTitle: string | null;
  /** False for a conversion of a bot or Mini App entry, which has no channel (not a deleted one). */
  hasChannel: boolean;
  source: string;
  capiStatus: string;
  coldLead: boolean;
  awaitingValue: boolean;
  attributed: boolean;
  receivedAt: Date;
}

interface FailedSendLine {
  sendId: string;
  platform: string;
  attempts: number;
  reason: string | null;
  subject: string;
  updatedAt: Date;
}

export interface SiteDetail {
  site: SiteRow & { accountName: string };
  channels: ChannelListItem[];
  pixels: PixelSummary[];
  awaiting: ConversionLine[];
  recent: ConversionLine[];
  failedSends: FailedSendLine[];
  /** How many of each list are shown at most. */
  failedLimit: number;
  install: SiteInstallState;
}

const CONVERSION_FIELDS = `c.id, c.telegram_user_id::text AS telegram_user_id, c.event_type, c.custom_event_name, c.value::float8 AS value, c.currency,
  ch.title AS channel_title, c.channel_id IS NOT NULL AS has_channel, c.source, c.capi_status, c.cold_lead, c.awaiting_manual_input,
  (c.visit_id IS NOT NULL OR c.api_visit_override IS NOT NULL) AS attributed, c.received_at,
  ARRAY(SELECT x.status FROM sends x WHERE x.conversion_id = c.id) AS send_statuses`;

type ConversionRow = {
  id: string;
  telegram_user_id: string;
  event_type: string;
  custom_event_name: string | null;
  value: number | null;
  currency: string | null;
  channel_title: string | null;
  has_channel: boolean;
  source: string;
  capi_status: string;
  cold_lead: boolean;
  awaiting_manual_input: boolean;
  attributed: boolean;
  received_at: Date;
  send_statuses: string[];
};

function conversionLine(r: ConversionRow): ConversionLine {
  return {
    conversionId: r.id,
    telegramUserId: r.telegram_user_id,
    eventType: r.event_type,
    customEventName: r.custom_event_name,
    value: r.value,
    currency: r.currency?.trim() ?? null,
    channelTitle: r.channel_title,
    hasChannel: r.has_channel,
    source: r.source,
    capiStatus: deliveryLabel(r.capi_status, r.send_statuses),
    coldLead: r.cold_lead,
    awaitingValue: r.awaiting_manual_input,
    attributed: r.attributed,
    receivedAt: r.received_at,
  };
}

/** One site: its set-up, what waits on the operator, and its latest conversions; null when unknown. */
export async function dashboardSite(
  db: Queryable,
  siteIdOrWebsiteId: string,
  limit = 25,
): Promise<SiteDetail | null> {
  const site = await findSite(db, siteIdOrWebsiteId);
  if (!site) return null;
  const [account, { channels }, { pixels }, awaiting, recent, failed, install] = await Promise.all([
    db.query<{ name: string }>('SELECT name FROM accounts WHERE id = $1', [site.account_id]),
    listChannels(db, site.id),
    listPixels(db, site.id),
    db.query<ConversionRow>(
      `SELECT ${CONVERSION_FIELDS} FROM conversions c LEFT JOIN channels ch ON ch.id = c.channel_id
       WHERE c.site_id = $1 AND c.awaiting_manual_input ORDER BY c.received_at DESC, c.id LIMIT $2`,
      [site.id, limit],
    ),
    // No index of its own: a top-N sort over the site's conversions, so that the write path of
    // every conversion pays nothing for a page an operator opens now and then.
    db.query<ConversionRow>(
      `SELECT ${CONVERSION_FIELDS} FROM conversions c LEFT JOIN channels ch ON ch.id = c.channel_id
       WHERE c.site_id = $1 ORDER BY c.received_at DESC, c.id LIMIT $2`,
      [site.id, limit],
    ),
    db.query<{
      id: string;
      platform: string;
      config: Record<string, unknown>;
      attempts: number;
      reason: string | null;
      conversion_id: string | null;
      visit_id: string | null;
      updated_at: Date;
    }>(
      `SELECT x.id, x.platform, p.public_config AS config, x.attempts, COALESCE(x.last_error, x.skip_reason) AS reason, x.conversion_id, x.visit_id, x.updated_at
       FROM sends x JOIN pixels p ON p.id = x.pixel_id
       WHERE p.site_id = $1 AND x.status = 'failed' ORDER BY x.updated_at DESC, x.id LIMIT $2`,
      [site.id, limit],
    ),
    installStates(db, [site.id]),
  ]);
  return {
    install: install.get(site.id) ?? NOTHING_SEEN,
    site: { ...site, accountName: account.rows[0]?.name ?? '' },
    channels,
    pixels,
    awaiting: awaiting.rows.map(conversionLine),
    recent: recent.rows.map(conversionLine),
    failedLimit: limit,
    failedSends: failed.rows.map((r) => ({
      sendId: r.id,
      platform: pixelLabel(r.platform, r.config),
      attempts: r.attempts,
      reason: r.reason,
      subject: r.conversion_id ? `conversion ${r.conversion_id}` : `PageView of visit ${r.visit_id}`,
      updatedAt: r.updated_at,
    })),
  };
}

/** The Telegram user a conversion belongs to, within a site; null when the conversion is not the site's. */
export async function conversionOwner(
  db: Queryable,
  siteId: string,
  conversionId: string,
): Promise<{ telegramUserId: number; accountId: string } | null> {
  const { rows } = await db.query<{ telegram_user_id: string; account_id: string }>(
    `SELECT c.telegram_user_id::text AS telegram_user_id, s.account_id FROM conversions c JOIN sites s ON s.id = c.site_id
     WHERE c.id = $1 AND c.site_id = $2`,
    [conversionId, siteId],
  );
  const r = rows[0];
  return r ? { telegramUserId: Number(r.telegram_user_id), accountId: r.account_id } : null;
}

/** Whether a send belongs to one of the site's pixels. */
export async function sendOfSite(db: Queryable, siteId: string, sendId: string): Promise<boolean> {
  const { rows } = await db.query(
    'SELECT 1 FROM sends x JOIN pixels p ON p.id = x.pixel_id WHERE x.id = $1 AND p.site_id = $2',
    [sendId, siteId],
  );
  return rows.length > 0;
}
