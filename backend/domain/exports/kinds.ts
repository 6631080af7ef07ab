import type { Column } from './format.js';

/**
 * What each export holds, one SQL statement per kind over one site and a range of UTC days
 * (`$1` site, `$2` first instant, `$3` the instant after the last day). Raw network identifiers
 * (IP, User-Agent) and click ids are not exported. Erased people stay erased: their rows carry a
 * stand-in Telegram id (negative), which is written empty, their visits no id, and the fields
 * erasure cleared are empty.
 */
export const EXPORT_KINDS = ['visits', 'joins', 'conversions'] as const;
export type ExportKind = (typeof EXPORT_KINDS)[number];

interface KindSpec {
  columns: Column[];
  sql: string;
}

const t = (name: string): Column => ({ name, kind: 'text' });
const n = (name: string): Column => ({ name, kind: 'number' });
const b = (name: string): Column => ({ name, kind: 'boolean' });
const time = (name: string): Column => ({ name, kind: 'time' });

export const KINDS: Record<ExportKind, KindSpec> = {
  visits: {
    columns: [
      t('visitId'),
      time('createdAt'),
      t('kind'),
      t('channelId'),
      t('landingPage'),
      t('referrer'),
      t('utmSource'),
      t('utmMedium'),
      t('utmCampaign'),
      t('utmContent'),
      t('utmTerm'),
      b('consented'),
    ],
    // Through the created_at index of visits (one site's rows are a slice of every site's).
    sql: `SELECT CASE WHEN v.erased IS NOT TRUE THEN v.id END AS "visitId", v.created_at AS "createdAt", v.kind, v.channel_id AS "channelId",
            v.landing_page AS "landingPage", v.referrer, v.utm_source AS "utmSource", v.utm_medium AS "utmMedium",
            v.utm_campaign AS "utmCampaign", v.utm_content AS "utmContent", v.utm_term AS "utmTerm", v.consented
          FROM visits v
          WHERE v.created_at >= $2 AND v.created_at < $3 AND v.site_id = $1
          ORDER BY v.created_at, v.id`,
  },
  joins: {
    columns: [
      t('membershipId'),
      time('occurredAt'),
      t('kind'),
      t('channelId'),
      t('telegramUserId'),
      b('attributed'),
      t('visitId'),
      t('conversionId'),
      b('viaJoinRequest'),
    ],
    sql: `SELECT m.id AS "membershipId", m.occurred_at AS "occurredAt", m.kind, m.channel_id AS "channelId",
            CASE WHEN m.telegram_user_id > 0 THEN m.telegram_user_id::text END AS "telegramUserId", m.attributed,
            CASE WHEN m.telegram_user_id > 0 THEN m.visit_id END AS "visitId", m.conversion_id AS "conversionId",
            m.via_join_request AS "viaJoinRequest"
          FROM memberships m
          WHERE m.channel_id IN (SELECT id FROM channels WHERE site_id = $1) AND m.kind IN ('join', 'leave')
            AND m.occurred_at >= $2 AND m.occurred_at < $3
          ORDER BY m.occurred_at, m.id`,
  },
  conversions: {
    columns: [
      t('conversionId'),
      time('receivedAt'),
      time('eventTime'),
      t('eventType'),
      t('customEventName'),
      n('value'),
      t('currency'),
      t('orderId'),
      t('channelId'),
      t('telegramUserId'),
      t('visitId'),
      t('externalUserId'),
      t('source'),
      t('capiStatus'),
      b('awaitingManualInput'),
    ],
    sql: `SELECT c.id AS "conversionId", c.received_at AS "receivedAt", c.event_time AS "eventTime", c.event_type AS "eventType",
            c.custom_event_name AS "customEventName", c.value::float8 AS value, c.currency, c.order_id AS "orderId",
            c.channel_id AS "channelId", CASE WHEN c.telegram_user_id > 0 THEN c.telegram_user_id::text END AS "telegramUserId",
            CASE WHEN c.telegram_user_id > 0 THEN c.visit_id END AS "visitId", c.external_user_id AS "externalUserId",
            c.source, c.capi_status AS "capiStatus", c.awaiting_manual_input AS "awaitingManualInput"
          FROM conversions c
          WHERE c.received_at >= $2 AND c.received_at < $3 AND c.site_id = $1
          ORDER BY c.received_at, c.id`,
  },
};
