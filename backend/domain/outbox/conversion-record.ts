import type { ConversionEventType } from '../../platforms/types.js';
import type { Queryable } from '../../db/pool.js';
import type { PreparedCall } from '../../db/prepared-batch.js';
import type { HashedPiiRecord } from '../pii/hashed.js';
import { orderEventIdSql, sendsCte, type CreatedSend } from './sends.js';
import type { CapiStatus } from './capi-status.js';
import { claimsCarriedSql } from '../idempotency.js';

/**
 * The one place a conversion row is written, by the webhook (attributed joins) and the business
 * API alike. Rules about *whether* and *what* to record live in the callers; this keeps the row,
 * the lead and the sends consistent inside the caller's transaction.
 */
export type EventTypeName = ConversionEventType;

export interface ApiVisitOverride {
  fbc?: string | null;
  fbp?: string | null;
  clientIp?: string | null;
  userAgent?: string | null;
  gclid?: string | null;
  gbraid?: string | null;
  wbraid?: string | null;
  ttclid?: string | null;
  sccid?: string | null;
  /** TikTok's `_ttp` and Snapchat's `_scid` cookies, when the caller read them. */
  ttp?: string | null;
  scid?: string | null;
  /**
   * The page the first attributed event came from, carried to a cold lead's later events with the
   * rest (a visit's `href` plays this part for a warm lead); a follow-up's own URL wins over it.
   */
  eventSourceUrl?: string | null;
}

export interface NewConversion {
  siteId: string;
  channelId: string | null;
  telegramUserId: number;
  visitId: string | null;
  eventType: EventTypeName;
  customEventName?: string | null;
  /** The business's order (`orderId`): one conversion per (site, event type and name, order). */
  orderId?: string | null;
  value?: number | null;
  currency?: string | null;
  contentName?: string | null;
  piiHashed?: HashedPiiRecord;
  /** What of the given PII was not used (shown with the conversion's sends). */
  piiWarnings?: string[];
  externalUserId?: string | null;
  eventSourceUrl?: string | null;
  clientIp?: string | null;
  userAgent?: string | null;
  apiVisitOverride?: ApiVisitOverride | null;
  coldLead?: boolean;
  eventTime: Date;
  attributedAt: Date;
  receivedAt: Date;
  source: 'tracker' | 'webhook' | 'api';
  awaitingManualInput?: boolean;
  /** The event's own consent (docs/consent.md); null or absent: not given. */
  adUserDataConsent?: 'GRANTED' | 'DENIED' | null;
  adPersonalizationConsent?: 'GRANTED' | 'DENIED' | null;
}

export interface RecordedConversion {
  conversionId: string;
  leadId: string;
  sends: CreatedSend[];
  capiStatus: CapiStatus;
}

/**
 * The lead upsert of `rows` (SQL yielding site, Telegram user, external id, first and last seen):
 * shared by `upsertLead` and the conversions' statement.
 */
function upsertLeadsSql(rows: string, returning: string): string {
  return `INSERT INTO leads (site_id, telegram_user_id, external_user_id, first_seen_at, last_seen_at)
     ${rows}
     ON CONFLICT (site_id, telegram_user_id) DO UPDATE
       SET last_seen_at = GREATEST(leads.last_seen_at, EXCLUDED.last_seen_at),
           first_seen_at = LEAST(leads.first_seen_at, EXCLUDED.first_seen_at),
           external_user_id = COALESCE(EXCLUDED.external_user_id, leads.external_user_id)
     RETURNING ${returning}`;
}

const UPSERT_LEAD_SQL = upsertLeadsSql('VALUES ($1, $2, $3, $4, $4)', 'id');

/** Creates or touches the lead of (site, Telegram user); returns its id. */
export async function upsertLead(
  tx: Queryable,
  siteId: string,
  telegramUserId: number,
  seenAt: Date,
  externalUserId?: string | null,
): Promise<string> {
  const { rows } = await tx.query<{ id: string }>({
    name: 'capigram_upsert_lead',
    text: UPSERT_LEAD_SQL,
    values: [siteId, telegramUserId, externalUserId ?? null, seenAt],
  });
  return rows[0]!.id;
}

/**
 * Inserts conversions and, for those to dispatch, their sends, in one statement however many
 * there are: a shared event transaction writes all of its events' conversions at once
 * (`recordConversionsStatement`), the webhook and a lone event one. A conversion awaiting a manual
 * value is never dispatched here: the value endpoint dispatches it later.
 *
 * One statement for a batch instead of one per conversion: PostgreSQL pays a statement's set-up
 * (its plan's nodes, its CTEs, its triggers' queues) once, not per row; measured on a batch of 16,
 * 134 µs of its CPU per conversion instead of 340 (docs/benchmarks.md#business-api).
 *
 * Each conversion's lead is upserted, the conversion inserted, its sends created (`sendsCte`). The
 * initial capiStatus (pending when something will be sent, else skipped) is read from the site's
 * active pixels in the same snapshot the sends are created from, so it agrees with them: the sends
 * are those of the conversions it made pending. A statement never holds two conversions of one
 * (site, Telegram user): their leads' upsert could not touch one row twice.
 *
 * The conversion keeps the lead's external id as it stands after the upsert: the request's, else
 * the one an earlier event stored. Delivery hashes it from the conversion, not the lead, so every
 * event of a lead carries the same `external_id`, and a retried send carries the one it was
 * recorded with even if the lead's changes meanwhile.
 */
const SENDS = sendsCte(
  'conversion',
  `SELECT id, site_id, event_id FROM conversion WHERE capi_status = 'pending'`,
  {
    fresh: true,
  },
);

const INPUT_COLUMNS = `site_id uuid, channel_id uuid, telegram_user_id bigint, visit_id uuid, event_type text, custom_event_name text,
  value numeric, currency text, content_name text, pii_hashed jsonb, external_user_id text, event_source_url text, client_ip text,
  user_agent text, api_visit_override jsonb, cold_lead boolean, event_time timestamptz, attributed_at timestamptz,
  received_at timestamptz, source text, awaiting_manual_input boolean, pii_warnings text[], dispatch boolean, order_id text,
  ad_user_data_consent text, ad_personalization_consent text`;

/** The statement, with `carried` (more CTEs that read `conversion` and `created_sends`) if any. */
function recordConversionsSql(carried: string | null): string {
  return `
  WITH input AS MATERIALIZED (SELECT * FROM jsonb_to_recordset($1::jsonb) AS i(${INPUT_COLUMNS})),
  lead AS (${upsertLeadsSql(
    'SELECT site_id, telegram_user_id, external_user_id, received_at, received_at FROM input',
    'id, site_id, telegram_user_id, external_user_id',
  )}),
  conversion AS (
    INSERT INTO conversions (site_id, channel_id, lead_id, telegram_user_id, visit_id, event_type, custom_event_name, value, currency,
      content_name, pii_hashed, external_user_id, event_source_url, client_ip, user_agent, api_visit_override, cold_lead,
      event_time, attributed_at, received_at, source, awaiting_manual_input, pii_warnings, order_id, capi_status,
      ad_user_data_consent, ad_personalization_consent)
    SELECT i.site_id, i.channel_id, l.id, i.telegram_user_id, i.visit_id, i.event_type, i.custom_event_name, i.value, i.currency,
      i.content_name, i.pii_hashed, l.external_user_id, i.event_source_url, i.client_ip, i.user_agent, i.api_visit_override, i.cold_lead,
      i.event_time, i.attributed_at, i.received_at, i.source, i.awaiting_manual_input, i.pii_warnings, i.order_id,
      CASE WHEN i.dispatch AND EXISTS (SELECT 1 FROM pixels WHERE site_id = i.site_id AND active) THEN 'pending' ELSE 'skipped' END,
      i.ad_user_data_consent, i.ad_personalization_consent
    FROM input i JOIN lead l ON l.site_id = i.site_id AND l.telegram_user_id = i.telegram_user_id
    RETURNING id, lead_id, site_id, telegram_user_id, capi_status, ${orderEventIdSql('conversions')} AS event_id),
  ${SENDS.text}${
    carried === null
      ? ''
      : `,
  ${carried}`
  }
  SELECT c.id, c.lead_id, c.site_id, c.telegram_user_id, c.capi_status, s.send_id, s.platform, s.pixel_id
  FROM conversion c LEFT JOIN created_sends s ON s.subject_id = c.id LEFT JOIN pixels p ON p.id = s.pixel_id
  ORDER BY c.id, p.created_at, p.id`;
}

const RECORD_CONVERSIONS_SQL = recordConversionsSql(null);
/** With the Idempotency-Keys' claims of the events (`claimsCarriedSql`), in `$2`. */
const RECORD_CONVERSIONS_CLAIMING_SQL = recordConversionsSql(claimsCarriedSql('$2'));

export interface RecordRow {
  id: string;
  lead_id: string;
  site_id: string;
  telegram_user_id: number;
  capi_status: CapiStatus;
  send_id: string | null;
  platform: string | null;
  pixel_id: string | null;
}

/** One conversion as the statement's input (a row of `jsonb_to_recordset`). */
function inputOf(c: NewConversion, dispatch: boolean) {
  return {
    site_id: c.siteId,
    channel_id: c.channelId,
    telegram_user_id: c.telegramUserId,
    visit_id: c.visitId,
    event_type: c.eventType,
    custom_event_name: c.customEventName ?? null,
    order_id: c.orderId ?? null,
    value: c.value ?? null,
    currency: c.currency ?? null,
    content_name: c.contentName ?? null,
    pii_hashed: c.piiHashed ?? {},
    external_user_id: c.externalUserId ?? null,
    event_source_url: c.eventSourceUrl ?? null,
    client_ip: c.clientIp ?? null,
    user_agent: c.userAgent ?? null,
    api_visit_override: c.apiVisitOverride ?? null,
    cold_lead: c.coldLead ?? false,
    event_time: c.eventTime,
    attributed_at: c.attributedAt,
    received_at: c.receivedAt,
    source: c.source,
    awaiting_manual_input: c.awaitingManualInput ?? false,
    pii_warnings: c.piiWarnings ?? [],
    dispatch: dispatch && !c.awaitingManualInput,
    ad_user_data_consent: c.adUserDataConsent ?? null,
    ad_personalization_consent: c.adPersonalizationConsent ?? null,
  };
}

/** A conversion to record, and whether to dispatch it. */
export interface ConversionToRecord {
  conversion: NewConversion;
  dispatch: boolean;
}

/**
 * The statement recording `conversions`, for a caller that sends it itself: the business API's
 * shared transactions send their events' conversions as one, with the COMMIT. At most one
 * conversion per (site, Telegram user); `recordedOf` reads each one's result from its rows.
 * `claims`: the events' Idempotency-Key claims, written by the same statement after the rest
 * (`claimsCarriedSql`).
 */
export function recordConversionsStatement(
  conversions: readonly ConversionToRecord[],
  claims: readonly unknown[] = [],
): PreparedCall {
  // As JSON text: the driver would send a bare array as a PostgreSQL array, not as jsonb.
  const values = [JSON.stringify(conversions.map((c) => inputOf(c.conversion, c.dispatch)))];
  if (claims.length === 0)
    return { name: 'capigram_record_conversions', sql: RECORD_CONVERSIONS_SQL, values };
  return {
    name: 'capigram_record_conversions_claiming',
    sql: RECORD_CONVERSIONS_CLAIMING_SQL,
    values: [...values, JSON.stringify(claims)],
  };
}

/** The recorded conversion of (site, Telegram user) among the statement's rows. */
export function recordedOf(
  rows: readonly RecordRow[],
  c: Pick<NewConversion, 'siteId' | 'telegramUserId'>,
): RecordedConversion {
  const own = rows.filter((r) => r.site_id === c.siteId && r.telegram_user_id === c.telegramUserId);
  const row = own[0]!;
  const sends: CreatedSend[] = own.flatMap((r) =>
    r.send_id === null ? [] : [{ sendId: r.send_id, platform: r.platform!, pixelId: r.pixel_id! }],
  );
  return { conversionId: row.id, leadId: row.lead_id, sends, capiStatus: row.capi_status };
}

export async function recordConversion(
  tx: Queryable,
  c: NewConversion,
  dispatch: boolean,
): Promise<RecordedConversion> {
  const statement = recordConversionsStatement([{ conversion: c, dispatch }]);
  const { rows } = await tx.query<RecordRow>({
    // Not the SQL-level name of the same statement: SQL-level and protocol-level prepared
    // statements share one namespace per connection.
    name: 'capigram_record_conversion',
    text: statement.sql,
    values: [...statement.values],
  });
  return recordedOf(rows, c);
}
