import type { ApiVisitOverride } from '../outbox/conversion-record.js';
import type { HashedPiiRecord } from '../pii/hashed.js';

/**
 * Whether a conversion carries anything a platform could match to a person: an acquisition visit,
 * click ids or browser ids, the client's IP or User-Agent, hashed PII or an external id. Without
 * any of these a send can only be rejected or wasted, so it is not scheduled (`dispatched: false`).
 */
export interface SignalSources {
  visitId: string | null;
  apiVisitOverride: ApiVisitOverride | null;
  clientIp: string | null;
  userAgent: string | null;
  piiHashed: HashedPiiRecord;
  externalUserId: string | null;
}

export function hasAttributionSignals(s: SignalSources): boolean {
  if (s.visitId) return true;
  // The page an override carries says where, not who.
  if (
    s.apiVisitOverride &&
    Object.entries(s.apiVisitOverride).some(
      ([k, v]) => k !== 'eventSourceUrl' && typeof v === 'string' && v !== '',
    )
  )
    return true;
  if (s.clientIp || s.userAgent || s.externalUserId) return true;
  return Object.values(s.piiHashed).some((v) => typeof v === 'string' && v !== '');
}
