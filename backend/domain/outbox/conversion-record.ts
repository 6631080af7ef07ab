import type { ConversionEventType } from '../../platforms/types.js';
import type { Queryable } from '../../db/pool.js';
import type { HashedPiiRecord } from '../pii/hashed.js';
import { sendsCte, type CreatedSend } from './sends.js';
import type { CapiStatus } from './capi-status.js';

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
}

export interface RecordedConversion {
  conversionId: string;
  leadId: string;
  sends: CreatedSend[];
  capiStatus: CapiStatus;
}

/** The lead upsert, with its parameters' placeholders: shared by `upsertLead` and `recordConversion`. */
function upsertLeadSql(site: string, user: string, externalId: string, seenAt: string): string {
  return `INSERT INTO leads (site_id, telegram_user_id, external_user_id, first_seen_at, last_seen_at)
     VALUES (${site}, ${user}, ${externalId}, ${seenAt}, ${seenAt})
     ON CONFLICT (site_id, telegram_user_id) DO UPDATE
       SET last_seen_at = GREATEST(leads.last_seen_at, EXCLUDED.last_seen_at),
           first_seen_at = LEAST(leads.first_seen_at, EXCLUDED.first_seen_at),
           external_user_id = COALESCE(EXCLUDED.external_user_id, leads.external_user_id)
     RETURNING id, external_user_id`;
}

const UPSERT_LEAD_SQL = upsertLeadSql('$1', '$2', '$3', '$4');

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
 * Inserts the conversion and, when `dispatch` is true, its sends and their jobs. A conversion
 * awaiting a manual value is never dispatched here: the value endpoint dispatches it later.
 *
 * This sits on the hot path of every webhook join and API event, so it is one prepared statement:
 * the lead upsert, the conversion, and its sends with their delivery jobs (`sendsCte`). The initial
 * capiStatus (pending when something will be sent, else skipped) is read from the site's active
 * pixels in the same snapshot the sends are created from, so it agrees with them.
 *
 * The conversion keeps the lead's external id as it stands after the upsert: the request's, else
 * the one an earlier event stored. Delivery hashes it from the conversion, not the lead, so every
 * event of a lead carries the same `external_id`, and a retried send carries the one it was
 * recorded with even if the lead's changes meanwhile.
 */
const SENDS = sendsCte('conversion', 'SELECT id, site_id FROM conversion WHERE $22::boolean', {
  fresh: true,
});

const RECORD_CONVERSION_SQL = `
  WITH lead AS (${upsertLeadSql('$1', '$3', '$11', '$19')}),
  conversion AS (
    INSERT INTO conversions (site_id, channel_id, lead_id, telegram_user_id, visit_id, event_type, custom_event_name, value, currency,
      content_name, pii_hashed, external_user_id, event_source_url, client_ip, user_agent, api_visit_override, cold_lead,
      event_time, attributed_at, received_at, source, awaiting_manual_input, pii_warnings, capi_status)
    SELECT $1, $2, lead.id, $3, $4, $5, $6, $7, $8, $9, $10, lead.external_user_id, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, ARRAY(SELECT jsonb_array_elements_text($23::jsonb)),
      CASE WHEN $22::boolean AND EXISTS (SELECT 1 FROM pixels WHERE site_id = $1 AND active) THEN 'pending' ELSE 'skipped' END
    FROM lead
    RETURNING id, lead_id, site_id, capi_status),
  ${SENDS.text}
  SELECT c.id, c.lead_id, c.capi_status, s.send_id, s.platform, s.pixel_id
  FROM conversion c LEFT JOIN created_sends s ON true`;

/** The conversion's statement and how to read its rows, for `recordConversion` and for callers that send it themselves. */
export interface RecordStatement {
  name: string;
  text: string;
  values: unknown[];
  result: (rows: RecordRow[]) => RecordedConversion;
}

export interface RecordRow {
  id: string;
  lead_id: string;
  capi_status: CapiStatus;
  send_id: string | null;
  platform: string | null;
  pixel_id: string | null;
}

/**
 * `recordConversion` as a statement, for a caller that sends it in one round trip with its
 * transaction's COMMIT (the business API). Same text, values and result.
 */
export function recordConversionStatement(c: NewConversion, dispatch: boolean): RecordStatement {
  const willSend = dispatch && !c.awaitingManualInput;
  return {
    name: 'capigram_record_conversion',
    text: RECORD_CONVERSION_SQL,
    values: [
      c.siteId,
      c.channelId,
      c.telegramUserId,
      c.visitId,
      c.eventType,
      c.customEventName ?? null,
      c.value ?? null,
      c.currency ?? null,
      c.contentName ?? null,
      c.piiHashed ?? {},
      c.externalUserId ?? null,
      c.eventSourceUrl ?? null,
      c.clientIp ?? null,
      c.userAgent ?? null,
      c.apiVisitOverride ?? null,
      c.coldLead ?? false,
      c.eventTime,
      c.attributedAt,
      c.receivedAt,
      c.source,
      c.awaitingManualInput ?? false,
      willSend,
      JSON.stringify(c.piiWarnings ?? []),
      ...SENDS.params,
    ],
    result: (rows) => {
      const row = rows[0]!;
      const sends: CreatedSend[] = rows.flatMap((r) =>
        r.send_id === null ? [] : [{ sendId: r.send_id, platform: r.platform!, pixelId: r.pixel_id! }],
      );
      return { conversionId: row.id, leadId: row.lead_id, sends, capiStatus: row.capi_status };
    },
  };
}

export async function recordConversion(
  tx: Queryable,
  c: NewConversion,
  dispatch: boolean,
): Promise<RecordedConversion> {
  const statement = recordConversionStatement(c, dispatch);
  const { rows } = await tx.query<RecordRow>({
    name: statement.name,
    text: statement.text,
    values: statement.values,
  });
  return statement.result(rows);
}
