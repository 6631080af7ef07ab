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
  MINIMAL_VISIT_PARAMS,
  minimalVisitCtes,
  minimalVisitValues,
  type VisitAdmission,
  type VisitAttribution,
} from './visits.js';

/**
 * An invite click on its common path in one round trip and one commit: `BEGIN`, the click's
 * statement, the held-or-pooled statement, `COMMIT`, sent as one query string.
 *
 * The click's statement counts the rate limit (the rows and rule of track/init's admission,
 * `rate-limits.ts`), finds the site's channel, and, when admitted and the channel exists, takes the
 * row lock of the session's (else the browser's) latest visit, or records the minimal visit of a
 * browser never seen (with its PageView sends). It leaves the visit and channel it chose in two
 * transaction-local settings. A refused click writes nothing but its count; a click of no channel
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
  /** Null when refused or without a channel. */
  visitId: string | null;
  /** Whether the visit's PageView sends were created (a new, consented visit of a site with pixels). */
  sends: number;
  /** Null: the visit holds no link for the channel and the pool is dry. */
  link: (AssignedLink & { held: boolean }) | null;
}

const VISIT_SETTING = 'capigram.click_visit';
const CHANNEL_SETTING = 'capigram.click_channel';
const setting = (name: string, type: string) => `nullif(current_setting('${name}', true), '')::${type}`;

/** Stands for a channel id that is not a UUID: no channel has it, and the click is NOT_FOUND. */
const NO_CHANNEL = '00000000-0000-0000-0000-000000000000';

function clickSql(admission: { text: string }): string {
  const n = MINIMAL_VISIT_PARAMS;
  const channel = `$${n + 1}::uuid`;
  const tempId = `$${n + 2}::uuid`;
  const sessionId = `$${n + 3}::uuid`;
  return `WITH ${admission.text},
  channel AS (
    SELECT ${CHANNEL_COLUMNS} FROM channels c JOIN bots b ON b.id = c.bot_id
    WHERE c.site_id = $1::uuid AND c.active
      AND c.id = COALESCE(${channel}, (SELECT default_channel_id FROM sites WHERE id = $1::uuid))),
  admitted AS (SELECT (SELECT allowed FROM admission) AND EXISTS (SELECT 1 FROM channel) AS ok),
  found AS (
    SELECT v.id FROM visits v
    WHERE v.id = (SELECT f.id FROM (${clickVisitSql({ site: '$1::uuid', tempId, sessionId })}) f)
      AND (SELECT ok FROM admitted)
    FOR UPDATE OF v),
  ${minimalVisitCtes('(SELECT ok FROM admitted) AND NOT EXISTS (SELECT 1 FROM found)')},
  chosen AS (SELECT id FROM found UNION ALL SELECT id FROM visit)
  SELECT a.allowed, a.retry_ms, ch.*, k.id AS visit_id, (SELECT count(*) FROM created_sends)::int AS sends,
    set_config('${VISIT_SETTING}', coalesce(k.id::text, ''), true) AS visit_setting,
    set_config('${CHANNEL_SETTING}', coalesce(ch.id::text, ''), true) AS channel_setting
  FROM admission a LEFT JOIN channel ch ON true LEFT JOIN chosen k ON true`;
}

// The pool's cutoff as `handoutCutoff` has it: half the channel's link lifetime from now.
const LINK_SQL = heldOrPooledSql('usable', {
  visit: setting(VISIT_SETTING, 'uuid'),
  channel: setting(CHANNEL_SETTING, 'uuid'),
  now: '$1::timestamptz',
  cutoff: `($1::timestamptz + (SELECT invite_ttl_seconds FROM channels WHERE id = ${setting(CHANNEL_SETTING, 'uuid')}) * interval '500 milliseconds')`,
});
const LINK_NAME = 'capigram_click_held_or_pooled';

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

export function clickCall(q: {
  siteId: string;
  tempId: string;
  sessionId: string;
  channelId?: string | undefined;
  click: VisitAttribution;
  admission: VisitAdmission;
}): PreparedCall {
  const check = q.admission.sql(MINIMAL_VISIT_PARAMS + 4);
  const sql = clickSql(check);
  const channel = q.channelId === undefined ? null : isUuid(q.channelId) ? q.channelId : NO_CHANNEL;
  return {
    name: nameOf(sql),
    sql,
    values: [...minimalVisitValues(q), channel, q.tempId, q.sessionId, ...check.params],
  };
}

/** The click in one round trip (see above); the caller turns a refusal or a missing channel into its error. */
export async function clickRoundTrip(
  deps: Pick<InviteDeps, 'pool' | 'now'>,
  q: Parameters<typeof clickCall>[0],
): Promise<ClickRoundTrip> {
  const link: PreparedCall = { name: LINK_NAME, sql: LINK_SQL, values: [deps.now()] };
  const [clickRows, linkRows] = await runTransaction(deps.pool, [clickCall(q), link]);
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
