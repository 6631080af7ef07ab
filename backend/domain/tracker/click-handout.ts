import { createHash } from 'node:crypto';
import { isUuid } from '../../../shared/ids.js';
import { type PreparedCall, runTransaction } from '../../db/prepared-batch.js';
import {
  CHANNEL_COLUMNS,
  type ChannelRow,
  type InviteChannel,
  toChannel,
} from '../invites/invite-channels.js';
import { type AssignedLink, heldOrPooledSql } from '../invites/link-pool.js';
import type { InviteDeps } from '../invites/telegram.js';
import {
  clickVisitSql,
  type NewVisit,
  VISIT_PARAMS,
  type VisitAdmission,
  type VisitAttribution,
  visitCtes,
  visitValues,
} from './visits.js';

/**
 * An invite click (`track/invite`) or an ad's redirect to a channel (`/r/…`) on its common path in
 * one round trip and one commit: `BEGIN`, the click's statement, the held-or-pooled statement,
 * `COMMIT`, sent as one query string.
 *
 * The click's statement counts the rate limit (the rows and rule of track/init's admission,
 * `rate-limits.ts`), finds the site's channel, and, when admitted and the channel exists:
 * - an invite click takes the row lock of the session's (else the browser's) latest visit, or
 *   records the minimal visit of a browser never seen (with its PageView sends);
 * - a redirect records its visit keyed by its visitRequestId (`recordVisit`'s upsert, whose
 *   conflict takes the row lock of a repeated click's visit), and is routed to the channel the
 *   visit's first click fixed when that one is still active.
 * It leaves the visit and channel it chose in two transaction-local settings. A refused click writes nothing but its count; a click of no channel
 * writes nothing but its count either.
 *
 * The held-or-pooled statement reads those settings. It is a statement of its own so that it runs
 * on a snapshot taken after the visit's lock was granted: a second click of the same visit, which
 * waited for the first's commit, sees the link the first took and gets the same one. Its pool
 * claim skips links other clicks have locked (FOR UPDATE SKIP LOCKED), so no link goes to two
 * visits. The settings are transaction-local, so nothing of one click outlives its transaction.
 */

/** What the one round trip found: the admission, the channel, the visit, and its link (if any). */
export interface ClickRoundTrip {
  allowed: boolean;
  retryMs: number;
  /** Null: no active channel of the site by that id (or no default channel). */
  channel: InviteChannel | null;
  /** Null when refused, without a channel, or (a redirect) when its visitRequestId is another browser's. */
  visitId: string | null;
  /** How many PageView sends the visit's statement created (a new, consented visit of a site with pixels). */
  sends: number;
  /** Null: the visit holds no link for the channel and the pool is dry. */
  link: (AssignedLink & { held: boolean }) | null;
}

const VISIT_SETTING = 'capigram.click_visit';
const CHANNEL_SETTING = 'capigram.click_channel';
const setting = (name: string, type: string) => `nullif(current_setting('${name}', true), '')::${type}`;

/** Stands for a channel id that is not a UUID: no channel has it, and the click is NOT_FOUND. */
const NO_CHANNEL = '00000000-0000-0000-0000-000000000000';

const CHANNEL_PARAM = `$${VISIT_PARAMS + 1}::uuid`;

/** The site's active channel: the one named, else the site's default. */
const ASKED = `asked AS (
    SELECT ${CHANNEL_COLUMNS} FROM channels c JOIN bots b ON b.id = c.bot_id
    WHERE c.site_id = $1::uuid AND c.active
      AND c.id = COALESCE(${CHANNEL_PARAM}, (SELECT default_channel_id FROM sites WHERE id = $1::uuid))),
  admitted AS (SELECT (SELECT allowed FROM admission) AND EXISTS (SELECT 1 FROM asked) AS ok)`;

function answer(visit: string, channel: string): string {
  return `SELECT a.allowed, a.retry_ms, ch.*, k.id AS visit_id, (SELECT count(*) FROM created_sends)::int AS sends,
    set_config('${VISIT_SETTING}', coalesce(k.id::text, ''), true) AS visit_setting,
    set_config('${CHANNEL_SETTING}', CASE WHEN k.id IS NULL THEN '' ELSE ch.id::text END, true) AS channel_setting
  FROM admission a LEFT JOIN ${channel} ch ON true LEFT JOIN ${visit} k ON true`;
}

/** An invite click: $VISIT_PARAMS + 2 and + 3 are the browser's and session's ids it is looked up by. */
function inviteSql(admission: { text: string }): string {
  const tempId = `$${VISIT_PARAMS + 2}::uuid`;
  const sessionId = `$${VISIT_PARAMS + 3}::uuid`;
  return `WITH ${admission.text},
  ${ASKED},
  found AS (
    SELECT v.id FROM visits v
    WHERE v.id = (SELECT f.id FROM (${clickVisitSql({ site: '$1::uuid', tempId, sessionId })}) f)
      AND (SELECT ok FROM admitted)
    FOR UPDATE OF v),
  ${visitCtes('insert', '(SELECT ok FROM admitted) AND NOT EXISTS (SELECT 1 FROM found)')},
  chosen AS (SELECT id FROM found UNION ALL SELECT id FROM visit)
  ${answer('chosen', 'asked')}`;
}

/**
 * A redirect: the visit's channel ($6) is the one asked for. A repeated click goes where its visit's
 * first click went, if that channel is still active, as `directInvite` routes it.
 */
function redirectSql(admission: { text: string }): string {
  return `WITH ${admission.text},
  ${ASKED},
  ${visitCtes('upsert', '(SELECT ok FROM admitted)')},
  first_routed AS (
    SELECT ${CHANNEL_COLUMNS} FROM channels c JOIN bots b ON b.id = c.bot_id
    WHERE c.id = (SELECT channel_id FROM visit) AND c.active),
  routed AS (
    SELECT * FROM first_routed
    UNION ALL SELECT * FROM asked WHERE NOT EXISTS (SELECT 1 FROM first_routed))
  ${answer('visit', 'routed')}`;
}

function linkSql(mode: 'usable' | 'any'): string {
  // The pool's cutoff as `handoutCutoff` has it: half the channel's link lifetime from now.
  return heldOrPooledSql(mode, {
    visit: setting(VISIT_SETTING, 'uuid'),
    channel: setting(CHANNEL_SETTING, 'uuid'),
    now: '$1::timestamptz',
    cutoff: `($1::timestamptz + (SELECT invite_ttl_seconds FROM channels WHERE id = ${setting(CHANNEL_SETTING, 'uuid')}) * interval '500 milliseconds')`,
  });
}

const LINK = {
  usable: { name: 'capigram_click_held_or_pooled_usable', sql: linkSql('usable') },
  any: { name: 'capigram_click_held_or_pooled_any', sql: linkSql('any') },
} as const;

// A prepared statement per text (one per admission rule a process uses: a handful).
const names = new Map<string, string>();
function nameOf(sql: string): string {
  let name = names.get(sql);
  if (name === undefined) {
    name = `capigram_click_${createHash('sha256').update(sql).digest('hex').slice(0, 16)}`;
    names.set(sql, name);
  }
  return name;
}

interface ClickRow extends ChannelRow {
  allowed: boolean;
  retry_ms: string | number;
  visit_id: string | null;
  sends: number;
}

const channelValue = (channelId: string | undefined) =>
  channelId === undefined ? null : isUuid(channelId) ? channelId : NO_CHANNEL;

/** The statement of an invite click (`track/invite`). */
export function inviteClickCall(q: {
  siteId: string;
  tempId: string;
  sessionId: string;
  channelId?: string | undefined;
  click: VisitAttribution;
  admission: VisitAdmission;
}): PreparedCall {
  const check = q.admission.sql(VISIT_PARAMS + 4);
  const sql = inviteSql(check);
  const visit: NewVisit = {
    siteId: q.siteId,
    tempId: q.tempId,
    sessionId: q.sessionId,
    kind: 'pageview',
    attribution: q.click,
  };
  return {
    name: nameOf(sql),
    sql,
    values: [...visitValues(visit), channelValue(q.channelId), q.tempId, q.sessionId, ...check.params],
  };
}

/** An ad's redirect to a channel (`/r/{site}/{channel}`), as its statement takes it. */
export interface RedirectClick {
  siteId: string;
  tempId: string;
  sessionId: string;
  visitRequestId: string;
  channelId: string;
  attribution: VisitAttribution;
  admission: VisitAdmission;
}

/** The statement of an ad's redirect to a channel. */
export function redirectCall(q: RedirectClick): PreparedCall {
  const check = q.admission.sql(VISIT_PARAMS + 2);
  const sql = redirectSql(check);
  const channel = channelValue(q.channelId);
  const visit: NewVisit = {
    siteId: q.siteId,
    tempId: q.tempId,
    sessionId: q.sessionId,
    visitRequestId: q.visitRequestId,
    kind: 'redirect',
    channelId: channel,
    attribution: q.attribution,
  };
  return { name: nameOf(sql), sql, values: [...visitValues(visit), channel, ...check.params] };
}

/**
 * A click's statement and the held-or-pooled statement in one round trip (see above); the caller
 * turns a refusal, a missing channel or a missing visit into its error. `mode` as `heldOrPooledSql`.
 */
export async function clickRoundTrip(
  deps: Pick<InviteDeps, 'pool' | 'now'>,
  call: PreparedCall,
  mode: 'usable' | 'any',
): Promise<ClickRoundTrip> {
  const link: PreparedCall = { ...LINK[mode], values: [deps.now()] };
  const [clickRows, linkRows] = await runTransaction(deps.pool, [call, link]);
  const row = clickRows![0] as ClickRow;
  const held = (linkRows as { id: string; invite_link: string; held: boolean }[])[0];
  return {
    allowed: row.allowed,
    retryMs: Number(row.retry_ms),
    channel: row.id === null ? null : toChannel(row),
    visitId: row.visit_id,
    sends: row.sends,
    link:
      held === undefined ? null : { invitationId: held.id, inviteLink: held.invite_link, held: held.held },
  };
}
