import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import { ApiError, validationError } from '../../errors.js';
import { Name, Uuid } from './schemas.js';

export const CreateAccountInput = z.object({ name: Name });

export async function createAccount(
  db: Queryable,
  input: z.input<typeof CreateAccountInput>,
): Promise<{ accountId: string }> {
  const parsed = CreateAccountInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'account');
  const { rows } = await db.query<{ id: string }>('INSERT INTO accounts (name) VALUES ($1) RETURNING id', [
    parsed.data.name,
  ]);
  return { accountId: rows[0]!.id };
}

/** Refuses with VALIDATION_FAILED for a malformed id and NOT_FOUND for a missing account. */
export async function requireAccount(db: Queryable, accountId: string): Promise<void> {
  if (!Uuid.safeParse(accountId).success)
    throw new ApiError('VALIDATION_FAILED', `account "${accountId}" is not a valid id`);
  const { rowCount } = await db.query('SELECT 1 FROM accounts WHERE id = $1 AND removed_at IS NULL', [
    accountId,
  ]);
  if (!rowCount) throw new ApiError('NOT_FOUND', `account ${accountId} does not exist`);
}

export interface AccountListItem {
  accountId: string;
  name: string;
  createdAt: string;
  sites: number;
  bots: number;
}

/** Every account, oldest first, with what it owns: an account id is otherwise printed only once, by `account create`. */
export async function listAccounts(db: Queryable): Promise<{ accounts: AccountListItem[] }> {
  const { rows } = await db.query<{
    id: string;
    name: string;
    created_at: Date;
    sites: number;
    bots: number;
  }>(
    `SELECT a.id, a.name, a.created_at,
       (SELECT count(*)::int FROM sites s WHERE s.account_id = a.id AND s.removed_at IS NULL) AS sites,
       (SELECT count(*)::int FROM bots b WHERE b.account_id = a.id AND b.removed_at IS NULL) AS bots
     FROM accounts a WHERE a.removed_at IS NULL ORDER BY a.created_at, a.id`,
  );
  return {
    accounts: rows.map((r) => ({
      accountId: r.id,
      name: r.name,
      createdAt: r.created_at.toISOString(),
      sites: r.sites,
      bots: r.bots,
    })),
  };
}
