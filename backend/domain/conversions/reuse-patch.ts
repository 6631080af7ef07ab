import type { Queryable } from '../../db/pool.js';
import type { ApiVisitOverride } from '../outbox/conversion-record.js';
import type { HashedPiiRecord } from '../pii/hashed.js';
import type { SignalSources } from './signals.js';

/**
 * The second layer of duplicate protection: a business event that matches a recent conversion
 * (same site, Telegram user, channel, event type, and for Custom events the same name) within the
 * site's `dedup_window_seconds` reuses it instead of creating another (the candidates come with
 * the event's context, read under the lead lock). This is the update applied to a reused one.
 */

/** What a matching event brings to the conversion it reuses. */
export interface ConversionPatch {
  value: number | null;
  currency: string | null;
  contentName: string | null;
  piiHashed: HashedPiiRecord;
  /** This event's: they replace the stored ones when there are any. */
  piiWarnings: string[];
  externalUserId: string | null;
  eventSourceUrl: string | null;
  clientIp: string | null;
  userAgent: string | null;
  /** Cold-lead attribution from the request: fills only fields the stored override lacks. */
  apiVisitOverride: ApiVisitOverride | null;
  /** An acquisition visit found for a conversion that had none. */
  recoveredVisitId: string | null;
  /** The event's consent (docs/consent.md): given, it replaces the stored one; null keeps it. */
  adUserDataConsent?: 'GRANTED' | 'DENIED' | null;
  adPersonalizationConsent?: 'GRANTED' | 'DENIED' | null;
}

export interface PatchedConversion extends SignalSources {
  awaitingManualInput: boolean;
}

/**
 * Applies the new value and PII (new values win; fields the request leaves out keep theirs), fills
 * missing attribution, and clears `awaiting_manual_input` once a value is there.
 */
export async function patchConversion(
  tx: Queryable,
  conversionId: string,
  p: ConversionPatch,
  now: Date,
): Promise<PatchedConversion> {
  const { rows } = await tx.query<{
    visit_id: string | null;
    api_visit_override: ApiVisitOverride | null;
    client_ip: string | null;
    user_agent: string | null;
    pii_hashed: HashedPiiRecord;
    external_user_id: string | null;
    awaiting_manual_input: boolean;
  }>(
    `UPDATE conversions SET
       value = COALESCE($2, value),
       currency = COALESCE($3, currency),
       content_name = COALESCE($4, content_name),
       pii_hashed = pii_hashed || $5::jsonb,
       external_user_id = COALESCE($6, external_user_id),
       event_source_url = COALESCE($7, event_source_url),
       client_ip = COALESCE($8, client_ip),
       user_agent = COALESCE($9, user_agent),
       visit_id = COALESCE(visit_id, $10),
       api_visit_override = CASE
         WHEN COALESCE(visit_id, $10) IS NOT NULL OR $11::jsonb IS NULL THEN api_visit_override
         ELSE $11::jsonb || COALESCE(api_visit_override, '{}'::jsonb) END,
       awaiting_manual_input = awaiting_manual_input AND COALESCE($2, value) IS NULL,
       pii_warnings = CASE WHEN jsonb_array_length($13::jsonb) > 0 THEN ARRAY(SELECT jsonb_array_elements_text($13::jsonb)) ELSE pii_warnings END,
       ad_user_data_consent = COALESCE($14, ad_user_data_consent),
       ad_personalization_consent = COALESCE($15, ad_personalization_consent),
       updated_at = $12
     WHERE id = $1
     RETURNING visit_id, api_visit_override, client_ip, user_agent, pii_hashed, external_user_id, awaiting_manual_input`,
    [
      conversionId,
      p.value,
      p.currency,
      p.contentName,
      JSON.stringify(p.piiHashed),
      p.externalUserId,
      p.eventSourceUrl,
      p.clientIp,
      p.userAgent,
      p.recoveredVisitId,
      p.apiVisitOverride ? JSON.stringify(p.apiVisitOverride) : null,
      now,
      JSON.stringify(p.piiWarnings),
      p.adUserDataConsent ?? null,
      p.adPersonalizationConsent ?? null,
    ],
  );
  const r = rows[0]!;
  return {
    visitId: r.visit_id,
    apiVisitOverride: r.api_visit_override,
    clientIp: r.client_ip,
    userAgent: r.user_agent,
    piiHashed: r.pii_hashed,
    externalUserId: r.external_user_id,
    awaitingManualInput: r.awaiting_manual_input,
  };
}
