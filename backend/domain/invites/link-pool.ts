import type { Pool, Queryable } from '../../db/pool.js';
import { ensurePrepared, execute, withSession } from '../../db/prepared-batch.js';
import type { CreatedLink } from './telegram.js';
import { isUuid } from '../../../shared/ids.js';

/** Invitation rows: the per-channel pool of unassigned links, and links assigned to visits. */

export const REFILL_INVITES_TASK = 'refill_invites';

export interface AssignedLink {
  invitationId: string;
  inviteLink: string;
}

/**
 * Locks the visit for the rest of the transaction, so concurrent clicks of one visit are served
 * one after the other. It must be a statement of its own: a statement that waited for the lock
 * still reads with the snapshot it started with, and would miss the link the other click took.
 */
export async function lockVisit(tx: Queryable, visitId: string): Promise<void> {
  await tx.query('SELECT 1 FROM visits WHERE id = $1 FOR UPDATE', [visitId]);
}

/**
 * Where the held-or-pooled statements take their inputs: parameters by default, or any SQL
 * expressions of the same types (the invite click's transaction reads the visit and channel its
 * first statement chose, `click-handout.ts`).
 */
export interface LinkInputs {
  visit: string;
  channel: string;
  now: string;
  cutoff: string;
}

const PARAMETERS: LinkInputs = { visit: '$1', channel: '$2', now: '$3', cutoff: '$4' };

/**
 * The query for the link a visit already holds for a channel ($1 visit, $2 channel, $3 now).
 * `usable` (an invite click) wants one that can still admit the visitor; `any` (a direct-invite
 * retry: one invitation per visitRequestId) wants whatever the first call handed out.
 */
function heldSql(mode: 'usable' | 'any', p: LinkInputs = PARAMETERS): string {
  return mode === 'usable'
    ? `SELECT id, invite_link FROM invitations
       WHERE visit_id = ${p.visit} AND channel_id = ${p.channel} AND NOT unattributed AND used_at IS NULL AND revoked_at IS NULL
         AND (expires_at IS NULL OR expires_at > ${p.now})
       ORDER BY assigned_at DESC, id LIMIT 1`
    : `SELECT id, invite_link FROM invitations WHERE visit_id = ${p.visit} AND channel_id = ${p.channel} AND ${p.now}::timestamptz IS NOT NULL
       ORDER BY assigned_at, id LIMIT 1`;
}

export async function heldLink(
  tx: Queryable,
  q: { visitId: string; channelId: string; now: Date; mode: 'usable' | 'any' },
): Promise<AssignedLink | null> {
  const { rows } = await tx.query<{ id: string; invite_link: string }>(heldSql(q.mode), [
    q.visitId,
    q.channelId,
    q.now,
  ]);
  const row = rows[0];
  return row === undefined ? null : { invitationId: row.id, inviteLink: row.invite_link };
}

/**
 * The link the visit holds for the channel, else one claimed from the channel's pool: rows
 * (id, invite_link, held), none when the visit holds none and the pool is dry. It must run after
 * the visit's row lock was granted, as a statement of its own (`heldOrPooledLink`).
 */
export function heldOrPooledSql(mode: 'usable' | 'any', p: LinkInputs = PARAMETERS): string {
  return `WITH held AS (${heldSql(mode, p)}),
     claimed AS (
       UPDATE invitations SET visit_id = ${p.visit}, assigned_at = ${p.now}
       WHERE id = (
         SELECT id FROM invitations
         WHERE channel_id = ${p.channel} AND visit_id IS NULL AND revoked_at IS NULL AND used_at IS NULL AND NOT unattributed AND expires_at > ${p.cutoff}
           AND NOT EXISTS (SELECT 1 FROM held)
         ORDER BY expires_at -- the pool index's order: the scan stops at the first unlocked link, no sort
         LIMIT 1 FOR UPDATE SKIP LOCKED)
       RETURNING id, invite_link)
     SELECT id, invite_link, true AS held FROM held
     UNION ALL
     SELECT id, invite_link, false AS held FROM claimed`;
}

const HELD_OR_POOLED = {
  usable: { name: 'capigram_invite_held_or_pooled_usable', sql: heldOrPooledSql('usable') },
  any: { name: 'capigram_invite_held_or_pooled_any', sql: heldOrPooledSql('any') },
} as const;

/**
 * The link the visit holds for the channel, else one taken from the channel's pool, in one
 * transaction and one round trip: `BEGIN`, the visit's row lock (so two clicks of one visit are
 * served one after the other, and the second sees the first's link), the held-or-pooled statement
 * (its own snapshot, taken after the lock was granted) and `COMMIT` travel as one query string. An
 * invite click is a visitor waiting for a redirect, so its round trips are its latency. SKIP
 * LOCKED lets concurrent clicks each take a different link without waiting on each other; none is
 * ever handed out twice.
 */
export async function heldOrPooledLink(
  pool: Pool,
  q: { visitId: string; channelId: string; now: Date; cutoff: Date; mode: 'usable' | 'any' },
): Promise<(AssignedLink & { held: boolean }) | null> {
  // The visit id is written into the text: it must be a UUID (it comes from our own rows).
  if (!isUuid(q.visitId)) throw new Error('heldOrPooledLink: malformed visit id');
  const call = { ...HELD_OR_POOLED[q.mode], values: [q.visitId, q.channelId, q.now, q.cutoff] };
  return withSession(pool, async (client) => {
    await ensurePrepared(client, call);
    const results = (await client.query(
      `BEGIN; SELECT 1 FROM visits WHERE id = '${q.visitId}' FOR UPDATE; ${execute(client, call)}; COMMIT`,
    )) as unknown as { rows: { id: string; invite_link: string; held: boolean }[] }[];
    const row = results[2]!.rows[0];
    return row === undefined ? null : { invitationId: row.id, inviteLink: row.invite_link, held: row.held };
  });
}

/** Stores a link Capigram created: assigned to a visit, or (visitId null) into the pool. */
export async function insertCreatedLink(
  tx: Queryable,
  q: { channelId: string; link: CreatedLink; visitId: string | null; now: Date },
): Promise<AssignedLink> {
  await tx.query(
    `INSERT INTO invitations (id, channel_id, invite_link, name, creates_join_request, expires_at, created_at, visit_id, assigned_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $8::uuid IS NULL THEN NULL ELSE $7::timestamptz END)`,
    [
      q.link.invitationId,
      q.channelId,
      q.link.inviteLink,
      q.link.name,
      q.link.createsJoinRequest,
      q.link.expiresAt,
      q.now,
      q.visitId,
    ],
  );
  return { invitationId: q.link.invitationId, inviteLink: q.link.inviteLink };
}

/** Records that the visit was sent to the channel's public address: a click no join can be traced to. */
export async function insertFallback(
  tx: Queryable,
  q: { channelId: string; visitId: string; url: string; now: Date },
): Promise<AssignedLink> {
  const { rows } = await tx.query<{ id: string }>(
    `INSERT INTO invitations (channel_id, invite_link, created_at, visit_id, assigned_at, unattributed)
     VALUES ($1, $2, $3, $4, $3, true) RETURNING id`,
    [q.channelId, q.url, q.now, q.visitId],
  );
  return { invitationId: rows[0]!.id, inviteLink: q.url };
}

/**
 * Queues a refill of the channel's pool in the caller's transaction. The job key keeps one job
 * per channel, and `preserve_run_at` keeps a refill that waits out Telegram's flood control
 * waiting instead of being pulled forward by every click.
 */
export async function queueRefill(tx: Queryable, channelId: string, runAt?: Date): Promise<void> {
  await tx.query(
    `SELECT graphile_worker.add_job($1, json_build_object('channelId', $2::text), job_key := $3, run_at := $4::timestamptz,
       job_key_mode := $5, max_attempts := 5)`,
    [
      REFILL_INVITES_TASK,
      channelId,
      `${REFILL_INVITES_TASK}:${channelId}`,
      runAt ?? null,
      runAt === undefined ? 'preserve_run_at' : 'replace',
    ],
  );
}

/** Unassigned, unexpired links the channel's pool holds that may still be handed out. */
export async function poolSize(db: Queryable, channelId: string, cutoff: Date): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM invitations
     WHERE channel_id = $1 AND visit_id IS NULL AND revoked_at IS NULL AND used_at IS NULL AND NOT unattributed AND expires_at > $2`,
    [channelId, cutoff],
  );
  return rows[0]?.n ?? 0;
}
