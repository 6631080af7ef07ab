import type { Queryable } from '../db/pool.js';
import { ApiError } from '../errors.js';
import type { CapiStatus } from './outbox/capi-status.js';
import type { ApiVisitOverride, EventTypeName } from './outbox/conversion-record.js';
import { resolveSiteRef, type ApiCaller, type SiteRef } from './conversions/site-scope.js';

/** The Lead resource of the business API: what is known about one Telegram user on one site. */
export interface ConversionSummary {
  conversionId: string;
  channelId: string | null;
  eventType: EventTypeName;
  customEventName?: string;
  capiStatus: CapiStatus;
  awaitingManualInput: boolean;
  coldLead: boolean;
  attributedAt: number;
  eventTime: number;
  eventValue?: number;
  eventCurrency?: string;
  contentName?: string;
  source: 'tracker' | 'webhook' | 'api';
  apiVisitOverride?: ApiVisitOverride;
}

export interface LeadResource {
  telegramUserId: number;
  siteId: string;
  firstSeenAt: number;
  lastSeenAt: number;
  externalUserId?: string;
  conversions: ConversionSummary[];
}

/** A lead's history can be long; the resource lists the most recent ones. */
export const LEAD_CONVERSIONS_LIMIT = 500;

/**
 * The lead on the resolved site. An account-scoped key that names no site gets the one site the
 * user has conversions on; several sites are ambiguous (400 SITE_REQUIRED), none is 404.
 */
export async function getLead(
  db: Queryable,
  caller: ApiCaller,
  telegramUserId: number,
  ref: SiteRef,
): Promise<LeadResource> {
  const siteId =
    (await resolveSiteRef(db, caller, ref)) ?? (await onlySiteOf(db, caller.accountId, telegramUserId));
  const { rows: leads } = await db.query<{
    first_seen_at: Date;
    last_seen_at: Date;
    external_user_id: string | null;
  }>(
    'SELECT first_seen_at, last_seen_at, external_user_id FROM leads WHERE site_id = $1 AND telegram_user_id = $2',
    [siteId, telegramUserId],
  );
  const { rows } = await db.query<{
    id: string;
    channel_id: string | null;
    event_type: EventTypeName;
    custom_event_name: string | null;
    capi_status: CapiStatus;
    awaiting_manual_input: boolean;
    cold_lead: boolean;
    attributed_at: Date;
    event_time: Date;
    value: number | null;
    currency: string | null;
    content_name: string | null;
    source: ConversionSummary['source'];
    api_visit_override: ApiVisitOverride | null;
  }>(
    `SELECT * FROM (
       SELECT id, channel_id, event_type, custom_event_name, capi_status, awaiting_manual_input, cold_lead, attributed_at, event_time,
              value, currency, content_name, source, api_visit_override, received_at
       FROM conversions WHERE site_id = $1 AND telegram_user_id = $2 ORDER BY received_at DESC, id DESC LIMIT $3
     ) c ORDER BY received_at, id`,
    [siteId, telegramUserId, LEAD_CONVERSIONS_LIMIT],
  );
  const lead = leads[0];
  if (!lead || rows.length === 0)
    throw new ApiError('LEAD_NOT_FOUND', 'this user has no conversion on the resolved site');
  return {
    telegramUserId,
    siteId,
    firstSeenAt: lead.first_seen_at.getTime(),
    lastSeenAt: lead.last_seen_at.getTime(),
    ...(lead.external_user_id ? { externalUserId: lead.external_user_id } : {}),
    conversions: rows.map((r) => ({
      conversionId: r.id,
      channelId: r.channel_id,
      eventType: r.event_type,
      ...(r.custom_event_name ? { customEventName: r.custom_event_name } : {}),
      capiStatus: r.capi_status,
      awaitingManualInput: r.awaiting_manual_input,
      coldLead: r.cold_lead,
      attributedAt: r.attributed_at.getTime(),
      eventTime: r.event_time.getTime(),
      ...(r.value !== null ? { eventValue: r.value } : {}),
      ...(r.currency ? { eventCurrency: r.currency.trim() } : {}),
      ...(r.content_name ? { contentName: r.content_name } : {}),
      source: r.source,
      ...(r.api_visit_override ? { apiVisitOverride: r.api_visit_override } : {}),
    })),
  };
}

async function onlySiteOf(db: Queryable, accountId: string, telegramUserId: number): Promise<string> {
  const { rows } = await db.query<{ site_id: string }>(
    `SELECT DISTINCT c.site_id FROM conversions c JOIN sites s ON s.id = c.site_id
     WHERE c.telegram_user_id = $1 AND s.account_id = $2 LIMIT 2`,
    [telegramUserId, accountId],
  );
  if (rows.length === 0) throw new ApiError('LEAD_NOT_FOUND', 'this user has no conversion in the account');
  if (rows.length > 1)
    throw new ApiError(
      'SITE_REQUIRED',
      'this user is a lead on several sites of the account: pass siteId or websiteId',
    );
  return rows[0]!.site_id;
}
