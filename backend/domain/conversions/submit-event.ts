import type { Deps } from '../../deps.js';
import type { PoolClient } from '../../db/pool.js';
import { ApiError } from '../../errors.js';
import { capiStatusOf, type CapiStatus, type SendStatus } from '../outbox/capi-status.js';
import {
  recordConversionsStatement,
  recordedOf,
  type ConversionToRecord,
  upsertLead,
  type ApiVisitOverride,
  type EventTypeName,
  type RecordRow,
  type RecordedConversion,
} from '../outbox/conversion-record.js';
import type { HashedPiiRecord } from '../pii/hashed.js';
import { ANSWER_HOLES, CLAIM_KIND } from '../idempotency.js';
import { hashPiiChecked, type RawPii } from '../pii/normalize.js';
import { lockConversions } from '../outbox/sends.js';
import type { ClientContext } from './client-context.js';
import { patchConversion } from './reuse-patch.js';
import { eventTimeProblem } from './event-time.js';
import {
  eventContextRead,
  findAcquisitionBefore,
  loadEventContext,
  namedSites,
  recentToLock,
  type EventContext,
  type EventFactRow,
  type OrderMatch,
  type RecentMatch,
} from './lead-history.js';
import { isOrderConflict, MERGED_WITHOUT_ORDER, orderOfAnotherUser } from './order-id.js';
import { withLeadLockBatched } from './event-batches.js';
import type { LockedClaim, LockedFinish, SharedWrite } from './lead-lock.js';
import { pendingSends, redispatchConversion } from './redispatch.js';
import { hasAttributionSignals } from './signals.js';
import { siteNameLookups, siteNames, siteOfNames, type ApiCaller, type SiteRef } from './site-scope.js';
import { compactOverride, decideTarget, type EventMode, type Target } from './target.js';

/**
 * A business event (`POST /events/conversion`, `POST /leads/{id}/events`): resolve the site and
 * the lead's attribution, then create a conversion, or reuse a recent matching one, and schedule
 * its sends, all in one transaction under the lead lock.
 */
export interface BusinessEvent {
  telegramUserId: number;
  site: SiteRef;
  channelId: string | null;
  eventType: EventTypeName;
  customEventName: string | null;
  /**
   * The business's order: matched only with the site's conversion of the same order (and event
   * type and name), whatever the dedup window; null for the recent-match rule.
   */
  orderId: string | null;
  value: number | null;
  /** Upper-case ISO 4217, already checked. */
  currency: string | null;
  contentName: string | null;
  pii: Omit<RawPii, 'externalId'>;
  externalUserId: string | null;
  eventTimeMs: number | null;
  clickIds: Pick<
    ApiVisitOverride,
    'fbc' | 'fbp' | 'gclid' | 'gbraid' | 'wbraid' | 'ttclid' | 'sccid' | 'ttp' | 'scid'
  >;
  client: ClientContext;
  eventSourceUrl: string | null;
  /** The event's own consent (docs/consent.md); null: not given. Absent: none given either. */
  consent?: { adUserData: 'granted' | 'denied' | null; adPersonalization: 'granted' | 'denied' | null };
}

export interface ConversionResult {
  conversionId: string;
  capiStatus: CapiStatus;
  coldLead: boolean;
  dispatched: boolean;
  deduplicated: boolean;
  updatedExisting: boolean;
  warning?: string;
  /** PII that was given but not used (a phone without a country, an address that is none). */
  piiWarnings?: string[];
  sends: { sendId: string; platform: string }[];
}

export interface EventOutcome {
  /** True when a conversion was created (201), false when an existing one was reused (200). */
  created: boolean;
  result: ConversionResult;
}

export type EventDeps = Pick<Deps, 'pool' | 'now' | 'local' | 'config'>;

/** The request as written to the database: hashed PII, the attribution it brought, resolved times. */
interface PreparedEvent {
  ev: BusinessEvent;
  now: Date;
  eventTime: Date;
  customEventName: string | null;
  /** Set under the lead lock, once the site (and so its default country) is known. */
  piiHashed: HashedPiiRecord;
  piiWarnings: string[];
  requestOverride: ApiVisitOverride;
}

/** A business event to run, for whom, and what is written with it. */
export interface EventSubmission {
  caller: ApiCaller;
  event: BusinessEvent;
  mode: EventMode;
  /**
   * Turns the outcome into a write committed with it (the caller's idempotent answer); without it
   * the outcome is only returned.
   */
  persist?: ((outcome: EventOutcome) => SharedWrite | null) | undefined;
  /** Made first in the same transaction (the caller's Idempotency-Key, see `withLeadLock`). */
  claim?: LockedClaim | undefined;
  /**
   * `persist` for an event that creates a conversion, made before the conversion is written: of
   * its outcome with holes (`ANSWER_HOLES`) for what the write decides, with sends and without, and
   * written by the conversion's own statement, which fills them in (`claimsCarriedSql`). Without
   * it (or when it gives undefined) such an outcome is recorded by `persist` once known, a round
   * trip later.
   */
  persistCreated?: ((created: CreatedOutcomes) => SharedWrite | undefined) | undefined;
}

/** A created event's outcome before its write, with holes, and the conversion's (site, Telegram user). */
export interface CreatedOutcomes {
  sent: EventOutcome;
  unsent: EventOutcome;
  siteId: string;
  telegramUserId: number;
}

/**
 * Two events of one order from two Telegram users (under two lead locks) may both find no
 * conversion of it and both create one: the unique index lets the first commit and fails the
 * second, which then runs again and finds the first's (nothing of it was kept).
 */
const ORDER_CONFLICT_TRIES = 3;

export async function submitBusinessEvent(
  deps: EventDeps,
  submission: EventSubmission,
): Promise<EventOutcome> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await submitOnce(deps, submission);
    } catch (error) {
      if (!isOrderConflict(error) || attempt >= ORDER_CONFLICT_TRIES) throw error;
    }
  }
}

async function submitOnce(
  deps: EventDeps,
  { caller, event: ev, mode, persist, claim, persistCreated }: EventSubmission,
): Promise<EventOutcome> {
  const now = deps.now();
  if (ev.eventTimeMs !== null) {
    const problem = eventTimeProblem(ev.eventTimeMs, now.getTime());
    if (problem)
      throw new ApiError('VALIDATION_FAILED', `eventTime ${problem}`, {
        errors: [{ path: 'eventTime', message: problem }],
      });
  }
  // A site the request names is found by the facts statement itself: no round trip of its own.
  const names = siteNames(ev.site);
  const p: PreparedEvent = {
    ev,
    now,
    eventTime: ev.eventTimeMs === null ? now : new Date(ev.eventTimeMs),
    customEventName: ev.eventType === 'Custom' ? ev.customEventName : null,
    piiHashed: {},
    piiWarnings: [],
    requestOverride: { ...ev.clickIds, clientIp: ev.client.clientIp, userAgent: ev.client.userAgent },
  };

  const windowDays = deps.config.ATTRIBUTION_WINDOW_DAYS;
  const query = {
    accountId: caller.accountId,
    siteId: names.length === 0 ? caller.siteId : null,
    siteNames: names.length === 0 ? undefined : siteNameLookups(names),
    telegramUserId: ev.telegramUserId,
    channelId: ev.channelId,
    eventType: ev.eventType,
    customEventName: p.customEventName,
    orderId: ev.orderId,
    now,
    eventTime: p.eventTime,
    windowDays,
  };
  const outcome = await withLeadLockBatched<EventOutcome | Refused, EventFactRow>(deps, {
    accountId: caller.accountId,
    telegramUserId: ev.telegramUserId,
    read: eventContextRead(query),
    fn: async (tx, rows: EventFactRow[]): Promise<LockedFinish<EventOutcome | Refused>> => {
      // A site the key may not name is an answer, not a failure: the events sharing the
      // transaction go on (a failure would make each of them run again alone).
      let namedSite: string | null;
      try {
        namedSite = siteOfNames(caller, names, namedSites(rows));
      } catch (error) {
        if (error instanceof ApiError) return { result: { refused: error } };
        throw error;
      }
      const ctx = await loadEventContext(tx, rows, { ...query, siteId: namedSite });
      if (!ctx) {
        if (namedSite !== null) throw new ApiError('UNKNOWN_WEBSITE', 'the site no longer exists');
        throw new ApiError(
          'SITE_REQUIRED',
          'this user has no acquisition or conversion in the account yet (a cold lead): pass siteId or websiteId',
        );
      }
      // A phone written nationally takes the event's country, else the site's; never a guessed one.
      const pii = hashPiiChecked(
        { ...ev.pii, externalId: ev.externalUserId },
        { defaultCountry: ctx.site.defaultCountry },
      );
      p.piiHashed = pii.hashed;
      p.piiWarnings = pii.warnings;
      const target = decideTarget({
        mode,
        history: ctx,
        suppliedChannelId: ev.channelId,
        requestOverride: p.requestOverride,
      });
      if (ev.orderId !== null) {
        // An order is its own conversion: matched by the order alone, never by the window.
        const order = ctx.order;
        if (order === null) return createConversion(ctx, target, p, persistCreated);
        if (!order.sameUser) return { result: reuseOtherUsersOrder(order, ev) };
        if (order.capiStatus === 'sent') return { result: reuseUnchanged(order, ev, 'sent') };
        return { result: await updateMatch(tx, ctx, order, p, windowDays) };
      }
      const match = ctx.recent.find((r) => r.channelId === target.channelId);
      if (match?.capiStatus === 'sent') return { result: reuseUnchanged(match, ev, 'sent') };
      if (match) return { result: await updateMatch(tx, ctx, match, p, windowDays) };
      return createConversion(ctx, target, p, persistCreated);
    },
    // A refusal stores no answer and leaves the key unclaimed, as a refusal before the lock did.
    // The answer recorded is the one given, PII warnings included.
    persist: persist && ((o) => ('refused' in o ? null : persist(withPiiWarnings(o, p.piiWarnings)))),
    claim,
    // A name the key may not use is refused by the work itself; meanwhile it names no site to lock on.
    locks: (rows: EventFactRow[]) =>
      recentToLock(rows, { siteId: lockedSiteOf(caller, names, rows), channelId: ev.channelId }),
  });
  if ('refused' in outcome) throw outcome.refused;
  // Committed: wake the delivery worker for the sends it created or put back in the queue.
  if (outcome.result.dispatched) deps.local.waker.wake();
  return withPiiWarnings(outcome, p.piiWarnings);
}

/** A site named by the request that its key may not use (see `siteOfNames`). */
interface Refused {
  refused: ApiError;
}

/** The site the names settle on for taking locks, or null when the names are refused. */
function lockedSiteOf(
  caller: ApiCaller,
  names: readonly string[],
  rows: readonly EventFactRow[],
): string | null {
  try {
    return siteOfNames(caller, names, namedSites(rows));
  } catch {
    return null;
  }
}

/** The answer says what of the PII was not used, in `piiWarnings` and in `warning`. */
function withPiiWarnings(outcome: EventOutcome, warnings: string[]): EventOutcome {
  if (warnings.length === 0) return outcome;
  const r = outcome.result;
  const warning = [r.warning, ...warnings].filter((w): w is string => w !== undefined).join('; ');
  return { ...outcome, result: { ...r, warning, piiWarnings: warnings } };
}

/** Why nothing was scheduled, for the answer's `warning`. */
function notDispatchedWhy(
  ctx: EventContext,
  signals: boolean,
  awaiting?: { conversionId: string; telegramUserId: number },
): string {
  if (ctx.site.activePixels === 0)
    return `no active ad platform pixel is configured for site ${ctx.site.websiteId}; nothing was sent`;
  if (awaiting !== undefined) {
    return `conversion ${awaiting.conversionId} awaits a manual value: submit it with POST /leads/${awaiting.telegramUserId}/conversions/${awaiting.conversionId}/value, or send this event again with value and currency; nothing was sent`;
  }
  if (!signals) {
    return 'the event carries no attribution signal (no acquisition visit, fbc, fbp, click id, client IP, User-Agent, PII or externalUserId); nothing was sent';
  }
  return 'no send was scheduled';
}

/** A conversion an event may match: a recent one of its type (no order), or its order's. */
type Match = Omit<RecentMatch, 'channelId'>;

/** What the answer says of the match it merged into: which conversion, and by what it matched. */
function matchedWhat(match: Match, ev: Pick<BusinessEvent, 'eventType' | 'orderId'>): string {
  const what = ev.orderId === null ? `a matching ${ev.eventType}` : `the ${ev.eventType} of this orderId`;
  return `${what} conversion received at ${match.receivedAt.toISOString()}`;
}

/** Without an order, a merge says how to record another order instead (joined to the answer's warning). */
function withMergeNote(warning: string | undefined, ev: Pick<BusinessEvent, 'orderId'>): string | undefined {
  if (ev.orderId !== null) return warning;
  return warning === undefined ? MERGED_WITHOUT_ORDER : `${warning}; ${MERGED_WITHOUT_ORDER}`;
}

/**
 * A matching conversion returned as it is, nothing changed and nothing sent again: it was already
 * sent, or one of its sends is on its way right now (a worker delivering the values it claimed).
 */
function reuseUnchanged(
  match: Match,
  ev: Pick<BusinessEvent, 'eventType' | 'orderId'>,
  state: 'sent' | 'in flight',
): EventOutcome {
  const received = matchedWhat(match, ev);
  return {
    created: false,
    result: {
      conversionId: match.conversionId,
      capiStatus: state === 'sent' ? 'sent' : 'pending',
      coldLead: match.coldLead,
      dispatched: false,
      deduplicated: true,
      updatedExisting: false,
      warning: withMergeNote(
        state === 'sent'
          ? `${received} was already sent; nothing was sent again`
          : `${received} is being sent right now with the values it had; it was not changed and nothing was sent again`,
        ev,
      ),
      sends: [],
    },
  };
}

/** The order was reported for another Telegram user: that conversion stands, unchanged. */
function reuseOtherUsersOrder(order: OrderMatch, ev: BusinessEvent): EventOutcome {
  return {
    created: false,
    result: {
      conversionId: order.conversionId,
      capiStatus: order.capiStatus,
      coldLead: order.coldLead,
      dispatched: false,
      deduplicated: true,
      updatedExisting: false,
      warning: orderOfAnotherUser(ev.eventType, order.receivedAt),
      sends: [],
    },
  };
}

/**
 * The match's sends as they are now, locked (conversion first, then sends: the order delivery
 * writes them in). The context was read before: since then a worker may have delivered a send,
 * or claimed one and be sending the values it read. Locking the sends also keeps a worker from
 * claiming them until this transaction ends (claims skip locked rows), so a send claimed later
 * carries this event's update.
 */
async function sendsOfMatch(
  tx: PoolClient,
  conversionId: string,
): Promise<{ statuses: SendStatus[]; inFlight: boolean }> {
  await lockConversions(tx, [conversionId]);
  const { rows } = await tx.query<{ status: SendStatus; in_flight: boolean }>(
    `SELECT status, (status = 'pending' AND in_flight AND next_attempt_at > now()) AS in_flight
     FROM sends WHERE conversion_id = $1 ORDER BY id FOR UPDATE`,
    [conversionId],
  );
  return { statuses: rows.map((r) => r.status), inFlight: rows.some((r) => r.in_flight) };
}

/** A matching conversion not sent yet: updated with what the event brings, then (re)dispatched. */
async function updateMatch(
  tx: PoolClient,
  ctx: EventContext,
  match: Match,
  p: PreparedEvent,
  windowDays: number,
): Promise<EventOutcome> {
  const { ev, now } = p;
  // What was read with the context may be stale by now: decide on the locked rows. A send on its
  // way carries the values it was claimed with, and the platform keeps the first event under an
  // event id, so an update now would leave Capigram saying one thing and the platform another.
  const current = await sendsOfMatch(tx, match.conversionId);
  if (current.inFlight) return reuseUnchanged(match, ev, 'in flight');
  if (current.statuses.length > 0 && capiStatusOf(current.statuses) === 'sent')
    return reuseUnchanged(match, ev, 'sent');
  const recovered = match.visitId
    ? null
    : await findAcquisitionBefore(tx, ctx.site.id, ev.telegramUserId, match.receivedAt, windowDays);
  const patched = await patchConversion(
    tx,
    match.conversionId,
    {
      ...eventFields(p),
      apiVisitOverride: compactOverride(p.requestOverride),
      recoveredVisitId: recovered?.visitId ?? null,
    },
    now,
  );
  await upsertLead(tx, ctx.site.id, ev.telegramUserId, now, ev.externalUserId);
  const signals = hasAttributionSignals(patched);
  const scheduled =
    signals && !patched.awaitingManualInput
      ? await redispatchConversion(tx, match.conversionId, ctx.site.id)
      : await pendingSends(tx, match.conversionId);
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
      ...optionalWarning(
        withMergeNote(
          dispatched
            ? undefined
            : notDispatchedWhy(
                ctx,
                signals,
                patched.awaitingManualInput
                  ? { conversionId: match.conversionId, telegramUserId: ev.telegramUserId }
                  : undefined,
              ),
          ev,
        ),
      ),
      sends: scheduled.sends,
    },
  };
}

/**
 * No match: a new conversion, dispatched when it carries anything a platform could match. Its
 * write is the transaction's last statement, sent together with the COMMIT.
 */
function createConversion(
  ctx: EventContext,
  target: Target,
  p: PreparedEvent,
  persistCreated: EventSubmission['persistCreated'],
): LockedFinish<EventOutcome> {
  const { ev } = p;
  const signals = hasAttributionSignals({
    visitId: target.visitId,
    apiVisitOverride: target.apiVisitOverride,
    clientIp: ev.client.clientIp,
    userAgent: ev.client.userAgent,
    piiHashed: p.piiHashed,
    externalUserId: ev.externalUserId,
  });
  const conversion = {
    siteId: ctx.site.id,
    channelId: target.channelId,
    telegramUserId: ev.telegramUserId,
    visitId: target.visitId,
    eventType: ev.eventType,
    customEventName: p.customEventName,
    orderId: ev.orderId,
    ...eventFields(p),
    apiVisitOverride: target.apiVisitOverride,
    coldLead: target.coldLead,
    eventTime: p.eventTime,
    attributedAt: p.eventTime,
    receivedAt: p.now,
    source: 'api' as const,
  };
  // The answer as it will read, but for what the write decides (see `persistCreated`).
  const withHoles = (sent: boolean) =>
    withPiiWarnings(
      created(ctx, target, signals, {
        conversionId: ANSWER_HOLES.conversionId,
        leadId: ANSWER_HOLES.conversionId,
        capiStatus: ANSWER_HOLES.capiStatus as CapiStatus,
        sends: sent ? [{ sendId: ANSWER_HOLES.sendId, platform: ANSWER_HOLES.platform, pixelId: '' }] : [],
      }),
      p.piiWarnings,
    );
  const record = persistCreated?.({
    sent: withHoles(true),
    unsent: withHoles(false),
    siteId: conversion.siteId,
    telegramUserId: conversion.telegramUserId,
  });
  return {
    // One statement for the conversions of every event of a shared transaction, and for the
    // Idempotency-Keys' claims of all of them.
    last: {
      kind: 'conversion',
      input: { conversion, dispatch: signals } satisfies ConversionToRecord,
      statement: (inputs) => recordConversionsStatement(inputs as ConversionToRecord[]),
      carries: {
        kind: CLAIM_KIND,
        statement: (inputs, claims) => recordConversionsStatement(inputs as ConversionToRecord[], claims),
      },
    },
    result: (rows: RecordRow[]) => created(ctx, target, signals, recordedOf(rows, conversion)),
    ...(record === undefined ? {} : { record }),
  };
}

/** What an event writes into its conversion, new or matched: its values, PII and client. */
function eventFields({ ev, piiHashed, piiWarnings }: PreparedEvent) {
  return {
    value: ev.value,
    currency: ev.currency,
    contentName: ev.contentName,
    piiHashed,
    piiWarnings,
    externalUserId: ev.externalUserId,
    eventSourceUrl: ev.eventSourceUrl,
    clientIp: ev.client.clientIp,
    userAgent: ev.client.userAgent,
    adUserDataConsent: upperConsent(ev.consent?.adUserData),
    adPersonalizationConsent: upperConsent(ev.consent?.adPersonalization),
  };
}

function optionalWarning(warning: string | undefined): { warning?: string } {
  return warning === undefined ? {} : { warning };
}

function upperConsent(v: 'granted' | 'denied' | null | undefined): 'GRANTED' | 'DENIED' | null {
  return v === 'granted' ? 'GRANTED' : v === 'denied' ? 'DENIED' : null;
}

/** The answer for a conversion just recorded. */
function created(
  ctx: EventContext,
  target: Target,
  signals: boolean,
  recorded: RecordedConversion,
): EventOutcome {
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
      ...(dispatched ? {} : { warning: notDispatchedWhy(ctx, signals) }),
      sends: recorded.sends.map((s) => ({ sendId: s.sendId, platform: s.platform })),
    },
  };
}
