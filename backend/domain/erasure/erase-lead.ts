import type { Pool, PoolClient, Queryable } from '../../db/pool.js';
import { withTx } from '../../db/pool.js';
import { retryLockConflicts } from '../../db/lock-conflict.js';
import { ApiError } from '../../errors.js';
import { leadLockKey, leadLockStatement } from '../conversions/lead-lock.js';
import { resolveSiteRef, type ApiCaller, type SiteRef } from '../conversions/site-scope.js';
import { cancelSends, refreshCapiStatuses } from '../outbox/sends.js';
import { eraseCopies } from './copies.js';
import {
  CONVERSION_PERSON_FIELDS,
  ENTRY_CLICK_RAW_FIELDS,
  LEAD_PERSON_FIELDS,
  VISIT_RAW_FIELDS,
  setClause,
} from './fields.js';

/** Why a send that erasure cancelled was not delivered (`sends list` shows it; `sends retry` refuses it). */
export const ERASED_SKIP_REASON = 'erased: the person asked for their data to be erased';

/** What one erasure changed, as the audit row records it (never who the person was). */
export interface ErasureSummary {
  erasureId: string;
  siteId: string;
  leads: number;
  visits: number;
  conversions: number;
  memberships: number;
  invitations: number;
  sendsCancelled: number;
}

/**
 * Erases one Telegram user on one site, in one transaction (docs/data-lifecycle.md):
 *
 * - the lead's and its conversions' identifiers (`fields.ts`) are cleared, and the Telegram user id
 *   of its lead, conversions, joins and invitations is replaced by a stand-in (a negative number
 *   drawn once per erasure), so that counts, values and reports stay, distinct users included;
 * - the visits of the person (those its conversions, joins and invitations name, and every visit
 *   of the same browsers on the site) lose their raw identifiers, and their browser and session
 *   ids are replaced by unlinkable ones, so that a later visit of that browser is not matched to
 *   them;
 * - sends not delivered yet (pending or failed) are skipped with `ERASED_SKIP_REASON`; delivered
 *   ones stay as the record of what was sent;
 * - an `erasures` row says who erased, where, when and how many rows.
 *
 * Nothing left to erase is 404 LEAD_NOT_FOUND, so a second erasure is a 404, like a later GET.
 * Locks follow docs/architecture.md#lock-order: the lead lock first (business events for the user
 * wait, and find no lead after), then the conversions by id, then their sends by id.
 */
export async function eraseLead(
  pool: Pool,
  caller: ApiCaller,
  telegramUserId: number,
  ref: SiteRef,
  actor: string,
): Promise<ErasureSummary> {
  const siteId =
    (await resolveSiteRef(pool, caller, ref)) ?? (await onlySiteOf(pool, caller.accountId, telegramUserId));
  return retryLockConflicts(() =>
    withTx(pool, (tx) => eraseOnSite(tx, caller.accountId, siteId, telegramUserId, actor)),
  );
}

/** The sites of an account on which a Telegram user is known (a lead row, a conversion or a join). */
async function sitesOfPerson(db: Queryable, accountId: string, telegramUserId: number): Promise<string[]> {
  const { rows } = await db.query<{ site_id: string }>(
    `SELECT l.site_id FROM leads l JOIN sites s ON s.id = l.site_id WHERE l.telegram_user_id = $1 AND s.account_id = $2
     UNION SELECT c.site_id FROM conversions c JOIN sites s ON s.id = c.site_id WHERE c.telegram_user_id = $1 AND s.account_id = $2
     UNION SELECT ch.site_id FROM memberships m JOIN channels ch ON ch.id = m.channel_id JOIN sites s ON s.id = ch.site_id
           WHERE m.telegram_user_id = $1 AND s.account_id = $2
     ORDER BY 1`,
    [telegramUserId, accountId],
  );
  return rows.map((r) => r.site_id);
}

async function onlySiteOf(db: Queryable, accountId: string, telegramUserId: number): Promise<string> {
  const sites = await sitesOfPerson(db, accountId, telegramUserId);
  if (sites.length === 0) throw new ApiError('LEAD_NOT_FOUND', 'this user is not known in the account');
  if (sites.length > 1)
    throw new ApiError(
      'SITE_REQUIRED',
      'this user is a lead on several sites of the account: pass siteId or websiteId',
    );
  return sites[0]!;
}

async function eraseOnSite(
  tx: PoolClient,
  accountId: string,
  siteId: string,
  user: number,
  actor: string,
): Promise<ErasureSummary> {
  await tx.query(leadLockStatement([leadLockKey(accountId, user)]));

  const { rows: conv } = await tx.query<{ id: string; visit_id: string | null }>(
    'SELECT id, visit_id FROM conversions WHERE site_id = $1 AND telegram_user_id = $2 ORDER BY id FOR UPDATE',
    [siteId, user],
  );
  const { rows: joins } = await tx.query<{
    id: string;
    visit_id: string | null;
    invitation_id: string | null;
  }>(
    `SELECT m.id, m.visit_id, m.invitation_id FROM memberships m JOIN channels ch ON ch.id = m.channel_id
     WHERE ch.site_id = $1 AND m.telegram_user_id = $2`,
    [siteId, user],
  );
  // An invitation records its user only with a join through it (telegram/credit.ts), so the
  // person's joins name every invitation they used: found by key, with no index on used_by.
  const { rows: invites } = await tx.query<{ id: string; visit_id: string | null }>(
    'SELECT id, visit_id FROM invitations WHERE id = ANY($1::uuid[]) AND used_by = $2',
    [joins.flatMap((m) => (m.invitation_id ? [m.invitation_id] : [])), user],
  );
  // The entry clicks (bot starts, Mini App opens) that tied this person to a visit.
  const { rows: ties } = await tx.query<{ id: string; visit_id: string | null }>(
    'SELECT id, visit_id FROM entry_clicks WHERE used_by = $2 AND site_id = $1 ORDER BY id FOR UPDATE',
    [siteId, user],
  );
  const { rows: leads } = await tx.query<{ id: string }>(
    'SELECT id FROM leads WHERE site_id = $1 AND telegram_user_id = $2',
    [siteId, user],
  );
  if (conv.length + joins.length + invites.length + ties.length + leads.length === 0) {
    throw new ApiError(
      'LEAD_NOT_FOUND',
      'this user is not known on the resolved site (or was erased already)',
    );
  }

  // The person's visits, and every visit of the same browsers on this site.
  const named = [
    ...new Set([...conv, ...joins, ...invites, ...ties].flatMap((r) => (r.visit_id ? [r.visit_id] : []))),
  ];
  const { rows: visits } = await tx.query<{ id: string }>(
    `SELECT v.id FROM visits v WHERE v.id = ANY($2::uuid[]) AND v.site_id = $1
     UNION
     SELECT b.id FROM visits v JOIN visits b ON b.site_id = v.site_id AND b.temp_id = v.temp_id
     WHERE v.id = ANY($2::uuid[]) AND v.site_id = $1`,
    [siteId, named],
  );
  const visitIds = visits.map((v) => v.id);
  const conversionIds = conv.map((c) => c.id);

  // Sends after their conversions, by id (the lock order); then cancelled unless delivered.
  await tx.query(
    'SELECT 1 FROM sends WHERE conversion_id = ANY($1::uuid[]) OR visit_id = ANY($2::uuid[]) ORDER BY id FOR UPDATE',
    [conversionIds, visitIds],
  );
  const cancelled = await cancelSends(tx, conversionIds, visitIds, ERASED_SKIP_REASON);

  const { rows: external } = await tx.query<{ e: string }>(
    `SELECT external_user_id AS e FROM leads WHERE id = ANY($1::uuid[]) AND external_user_id IS NOT NULL
     UNION SELECT external_user_id FROM conversions WHERE id = ANY($2::uuid[]) AND external_user_id IS NOT NULL`,
    [leads.map((l) => l.id), conversionIds],
  );
  await eraseCopies(tx, {
    accountId,
    siteId,
    telegramUserId: user,
    conversionIds,
    visitIds,
    externalIds: external.map((r) => r.e),
  });

  const { rows: drawn } = await tx.query<{ n: string }>(`SELECT -nextval('erased_people') AS n`);
  const standIn = drawn[0]!.n;

  await tx.query(
    `UPDATE conversions SET ${setClause(CONVERSION_PERSON_FIELDS)}, telegram_user_id = $2, updated_at = now() WHERE id = ANY($1::uuid[])`,
    [conversionIds, standIn],
  );
  await refreshCapiStatuses(tx, conversionIds);
  await tx.query(
    `UPDATE leads SET ${setClause(LEAD_PERSON_FIELDS)}, telegram_user_id = $2 WHERE id = ANY($1::uuid[])`,
    [leads.map((l) => l.id), standIn],
  );
  await tx.query('UPDATE memberships SET telegram_user_id = $2 WHERE id = ANY($1::uuid[])', [
    joins.map((m) => m.id),
    standIn,
  ]);
  // A guard bot's join queries name the user and nothing else worth keeping.
  await tx.query(
    `DELETE FROM join_request_queries q USING channels ch
     WHERE ch.id = q.channel_id AND ch.site_id = $1 AND q.telegram_user_id = $2`,
    [siteId, user],
  );
  await tx.query('UPDATE invitations SET used_by = $2 WHERE id = ANY($1::uuid[])', [
    invites.map((i) => i.id),
    standIn,
  ]);
  await tx.query(
    `UPDATE entry_clicks SET ${setClause(ENTRY_CLICK_RAW_FIELDS)}, used_by = $2 WHERE id = ANY($1::uuid[])`,
    [ties.map((t) => t.id), standIn],
  );
  // Browser and session ids are mapped through a keyed digest whose key is drawn here and never
  // kept: visits of one browser stay one browser (counts of distinct browsers hold), unlinkable.
  await tx.query(
    `WITH k AS (SELECT gen_random_uuid()::text AS salt)
     UPDATE visits SET ${setClause(VISIT_RAW_FIELDS)},
       temp_id = md5(k.salt || temp_id::text)::uuid, session_id = md5(k.salt || session_id::text)::uuid, updated_at = now(),
       erased = true
     FROM k WHERE id = ANY($1::uuid[])`,
    [visitIds],
  );

  const summary = {
    siteId,
    leads: leads.length,
    visits: visitIds.length,
    conversions: conversionIds.length,
    memberships: joins.length,
    invitations: invites.length,
    sendsCancelled: cancelled,
  };
  const { rows: audit } = await tx.query<{ id: string }>(
    `INSERT INTO erasures (account_id, site_id, actor, leads, visits, conversions, memberships, invitations, sends_cancelled)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
    [
      accountId,
      siteId,
      actor,
      summary.leads,
      summary.visits,
      summary.conversions,
      summary.memberships,
      summary.invitations,
      summary.sendsCancelled,
    ],
  );
  return { erasureId: audit[0]!.id, ...summary };
}

/**
 * The operator's erasure (`lead erase`, the dashboard): on the named site, or on every site of the
 * account where the user is known, each site in its own transaction. Nothing to erase anywhere is
 * 404 LEAD_NOT_FOUND, as for the API.
 */
export async function eraseLeadInAccount(
  pool: Pool,
  input: { accountId: string; telegramUserId: number; site?: string | undefined },
  actor: string,
): Promise<{ erasures: ErasureSummary[] }> {
  const { accountId, telegramUserId } = input;
  if (!Number.isSafeInteger(telegramUserId) || telegramUserId <= 0) {
    throw new ApiError('VALIDATION_FAILED', 'the Telegram user id must be a positive integer', {
      errors: [{ path: 'telegramUserId', message: 'must be a positive integer' }],
    });
  }
  const { rows } = await pool.query('SELECT 1 FROM accounts WHERE id::text = $1', [accountId]);
  if (rows.length === 0) throw new ApiError('NOT_FOUND', `account ${accountId} does not exist`);
  const caller: ApiCaller = { keyId: actor, accountId, siteId: null };
  if (input.site !== undefined)
    return { erasures: [await eraseLead(pool, caller, telegramUserId, { siteId: input.site }, actor)] };
  const sites = await sitesOfPerson(pool, accountId, telegramUserId);
  if (sites.length === 0)
    throw new ApiError('LEAD_NOT_FOUND', 'this user is not known in the account (or was erased already)');
  const erasures: ErasureSummary[] = [];
  for (const siteId of sites) erasures.push(await eraseLead(pool, caller, telegramUserId, { siteId }, actor));
  return { erasures };
}
