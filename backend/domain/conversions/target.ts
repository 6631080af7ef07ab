import { ApiError } from '../../errors.js';
import type { ApiVisitOverride } from '../outbox/conversion-record.js';
import type { EventContext, PriorConversion } from './lead-history.js';

/**
 * Where a business event lands on its resolved site, and which attribution it carries. Pure: the
 * rules of the spec's "warm lead" and "cold lead", table-tested.
 *
 * - Warm (a verified acquisition on the site): the acquisition's visit is the attribution, always;
 *   a supplied channel is kept as the destination only when it is one of the site's, else the
 *   acquisition's channel (for lead events, the most recent conversion's channel) is used.
 * - Known without acquisition (earlier conversions on the site, e.g. a cold lead's second event):
 *   not cold; the earlier attribution is carried forward with the page it came from, the request
 *   filling only what it lacked; the channel defaults to the most recent conversion's.
 * - Cold (nothing on the site): the request must name a channel of the site; its fbc, fbp, click
 *   ids, IP and User-Agent become the conversion's `apiVisitOverride`.
 */
export type EventMode = 'conversion' | 'lead-event';

export interface Target {
  coldLead: boolean;
  channelId: string;
  visitId: string | null;
  apiVisitOverride: ApiVisitOverride | null;
}

export interface TargetInput {
  mode: EventMode;
  history: Pick<EventContext, 'acquisition' | 'latest' | 'attributed' | 'channelOnSite'>;
  suppliedChannelId: string | null;
  /** What the request brought: fbc, fbp, click ids, IP, User-Agent (absent ones null or missing). */
  requestOverride: ApiVisitOverride;
}

/** Non-empty fields only; null when nothing is left. */
export function compactOverride(o: ApiVisitOverride | null | undefined): ApiVisitOverride | null {
  if (!o) return null;
  const out: ApiVisitOverride = {};
  for (const [k, v] of Object.entries(o) as [keyof ApiVisitOverride, string | null | undefined][]) {
    if (typeof v === 'string' && v.trim() !== '') out[k] = v;
  }
  return Object.keys(out).length > 0 ? out : null;
}

export function decideTarget(i: TargetInput): Target {
  const { acquisition, latest, attributed, channelOnSite } = i.history;
  const supplied = i.suppliedChannelId !== null && channelOnSite === true ? i.suppliedChannelId : null;

  if (acquisition) {
    const fallback =
      i.mode === 'lead-event'
        ? (latest?.channelId ?? acquisition.channelId)
        : (acquisition.channelId ?? latest?.channelId ?? null);
    return {
      coldLead: false,
      channelId: requireChannel(supplied ?? fallback),
      visitId: acquisition.visitId,
      apiVisitOverride: null,
    };
  }

  if (latest) {
    const channelId = requireChannel(supplied ?? latest.channelId);
    if (attributed?.visitId)
      return { coldLead: false, channelId, visitId: attributed.visitId, apiVisitOverride: null };
    // The first attribution stays; the request only fills fields it lacked.
    const merged = { ...compactOverride(i.requestOverride), ...carriedAttribution(attributed) };
    return { coldLead: false, channelId, visitId: null, apiVisitOverride: compactOverride(merged) };
  }

  if (i.suppliedChannelId === null)
    throw new ApiError(
      'CHANNEL_REQUIRED',
      'a cold lead (no earlier conversion on this site) needs channelId',
    );
  if (supplied === null) throw new ApiError('FORBIDDEN', 'channelId is not a channel of the resolved site');
  return {
    coldLead: true,
    channelId: supplied,
    visitId: null,
    apiVisitOverride: compactOverride(i.requestOverride),
  };
}

/**
 * An earlier conversion's override, with the page it was sent from: a website event needs its
 * source URL, and the first override's page (kept in its own column) would otherwise be lost on
 * the way. A URL alone is no attribution, so none is carried without an override.
 */
function carriedAttribution(attributed: PriorConversion | null): ApiVisitOverride | null {
  const override = compactOverride(attributed?.apiVisitOverride);
  if (!override) return null;
  return compactOverride({ eventSourceUrl: attributed?.eventSourceUrl, ...override });
}

function requireChannel(channelId: string | null): string {
  if (channelId === null)
    throw new ApiError('CHANNEL_REQUIRED', "the lead's earlier channel no longer exists; pass channelId");
  return channelId;
}
