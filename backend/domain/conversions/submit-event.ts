import { withTx, type Pool } from '../../db/pool.js';
import { ApiError } from '../../errors.js';
import type { CapiStatus } from '../capi-status.js';
import { recordConversion, upsertLead, type ApiVisitOverride, type EventTypeName } from '../conversion-record.js';
import { hashPii, type RawPii } from '../pii.js';
import type { ClientContext } from './client-context.js';
import { findRecentMatch, lockLead, patchConversion, type RecentMatch } from './dedup.js';
import { eventTimeProblem } from './event-time.js';
import { findAcquisition, inferSite, loadSiteHistory } from './lead-history.js';
import { pendingSends, redispatchConversion } from './redispatch.js';
import { hasAttributionSignals } from './signals.js';
import { resolveSiteRef, type ApiCaller, type SiteRef } from './site-scope.js';
import { compactOverride, decideTarget, type EventMode } from './target.js';

/**
 * A business event (`POST /events/conversion`, `POST /leads/{id}/events`): resolve the site and
 * the lead's attribution, then create a conversion, or reuse a recent matching one, and schedule
 * its sends, all in one transaction.
 */
export interface BusinessEvent {
  telegramUserId: number;
  site: SiteRef;
  channelId: string | null;
  eventType: EventTypeName;
  customEventName: string | null;
  value: number | null;
  /** Upper-case ISO 4217, already checked. */
  currency: string | null;
  contentName: string | null;
  pii: Omit<RawPii, 'externalId'>;
  externalUserId: string | null;
  eventTimeMs: number | null;
  clickIds: Pick<ApiVisitOverride, 'fbc' | 'fbp' | 'gclid' | 'ttclid' | 'sccid'>;
  client: ClientContext;
  eventSourceUrl: string | null;
}

export interface ConversionResult {
  conversionId: string;
  capiStatus: CapiStatus;
  coldLead: boolean;
  dispatched: boolean;
  deduplicated: boolean;
  updatedExisting: boolean;
  warning?: string;
  sends: { sendId: string; platform: string }[];
}

export interface EventOutcome {
  /** True when a conversion was created (201), false when an existing one was reused (200). */
  created: boolean;
  result: ConversionResult;
}

export interface EventDeps {
  pool: Pool;
  now: () => Date;
}

export async function submitBusinessEvent(deps: EventDeps, caller: ApiCaller, ev: BusinessEvent, mode: EventMode): Promise<EventOutcome> {
  const now = deps.now();
  if (ev.eventTimeMs !== null) {
    const problem = eventTimeProblem(ev.eventTimeMs, now.getTime());
    if (problem) throw new ApiError('VALIDATION_FAILED', `eventTime ${problem}`, { errors: [{ path: 'eventTime', message: problem }] });
  }
  const siteId =
    (await resolveSiteRef(deps.pool, caller, ev.site)) ??
    (await inferSite(deps.pool, caller.accountId, ev.telegramUserId)) ??
    missingSite();

  const piiHashed = hashPii({ ...ev.pii, externalId: ev.externalUserId });
  const requestOverride: ApiVisitOverride = { ...ev.clickIds, clientIp: ev.client.clientIp, userAgent: ev.client.userAgent };
  const eventTime = ev.eventTimeMs === null ? now : new Date(ev.eventTimeMs);
  const customEventName = ev.eventType === 'Custom' ? ev.customEventName : null;

  return withTx(deps.pool, async (tx) => {
    const history = await loadSiteHistory(tx, siteId, ev.telegramUserId, ev.channelId);
    if (!history) throw new ApiError('UNKNOWN_WEBSITE', 'the site no longer exists');
    const target = decideTarget({ mode, history, suppliedChannelId: ev.channelId, requestOverride });
    const notDispatched = (signals: boolean) =>
      history.site.activePixels === 0
        ? `no active ad platform pixel is configured for site ${history.site.websiteId}; nothing was sent`
        : !signals
          ? 'the event carries no attribution signal (no acquisition visit, fbc, fbp, click id, client IP, User-Agent, PII or externalUserId); nothing was sent'
          : 'no send was scheduled';

    let match: RecentMatch | null = null;
    if (history.site.dedupWindowSeconds > 0) {
      await lockLead(tx, siteId, ev.telegramUserId);
      const since = new Date(now.getTime() - history.site.dedupWindowSeconds * 1000);
      match = await findRecentMatch(tx, { siteId, telegramUserId: ev.telegramUserId, channelId: target.channelId, eventType: ev.eventType, customEventName }, since);
    }

    if (match?.capiStatus === 'sent') {
      return {
        created: false,
        result: {
          conversionId: match.conversionId,
          capiStatus: 'sent',
          coldLead: match.coldLead,
          dispatched: false,
          deduplicated: true,
          updatedExisting: false,
          warning: `a matching ${ev.eventType} conversion received at ${match.receivedAt.toISOString()} was already sent; nothing was sent again`,
          sends: [],
        },
      };
    }

    if (match) {
      const recovered = match.visitId ? null : await findAcquisition(tx, siteId, ev.telegramUserId, match.receivedAt);
      const patched = await patchConversion(
        tx,
        match.conversionId,
        {
          value: ev.value,
          currency: ev.currency,
          contentName: ev.contentName,
          piiHashed,
          externalUserId: ev.externalUserId,
          eventSourceUrl: ev.eventSourceUrl,
          clientIp: ev.client.clientIp,
          userAgent: ev.client.userAgent,
          apiVisitOverride: compactOverride(requestOverride),
          recoveredVisitId: recovered?.visitId ?? null,
        },
        now,
      );
      await upsertLead(tx, siteId, ev.telegramUserId, now, ev.externalUserId);
      const signals = hasAttributionSignals(patched);
      const scheduled =
        signals && !patched.awaitingManualInput ? await redispatchConversion(tx, match.conversionId, siteId) : await pendingSends(tx, match.conversionId);
      const dispatched = scheduled.sends.length > 0;
      return {
        created: false,
        result: {
          conversionId: match.conversionId,
          capiStatus: scheduled.capiStatus,
          coldLead: match.coldLead,
          dispatched,
          deduplicated: true,
          updatedExisting: true,
          ...(dispatched ? {} : { warning: notDispatched(signals) }),
          sends: scheduled.sends,
        },
      };
    }

    const signals = hasAttributionSignals({
      visitId: target.visitId,
      apiVisitOverride: target.apiVisitOverride,
      clientIp: ev.client.clientIp,
      userAgent: ev.client.userAgent,
      piiHashed,
      externalUserId: ev.externalUserId,
    });
    const recorded = await recordConversion(
      tx,
      {
        siteId,
        channelId: target.channelId,
        telegramUserId: ev.telegramUserId,
        visitId: target.visitId,
        eventType: ev.eventType,
        customEventName,
        value: ev.value,
        currency: ev.currency,
        contentName: ev.contentName,
        piiHashed,
        externalUserId: ev.externalUserId,
        eventSourceUrl: ev.eventSourceUrl,
        clientIp: ev.client.clientIp,
        userAgent: ev.client.userAgent,
        apiVisitOverride: target.apiVisitOverride,
        coldLead: target.coldLead,
        eventTime,
        attributedAt: eventTime,
        receivedAt: now,
        source: 'api',
      },
      signals,
    );
    const dispatched = recorded.sends.length > 0;
    return {
      created: true,
      result: {
        conversionId: recorded.conversionId,
        capiStatus: recorded.capiStatus,
        coldLead: target.coldLead,
        dispatched,
        deduplicated: false,
        updatedExisting: false,
        ...(dispatched ? {} : { warning: notDispatched(signals) }),
        sends: recorded.sends.map((s) => ({ sendId: s.sendId, platform: s.platform })),
      },
    };
  });
}

function missingSite(): never {
  throw new ApiError('SITE_REQUIRED', 'this user has no acquisition or conversion in the account yet (a cold lead): pass siteId or websiteId');
}
