import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import { ApiError, validationError } from '../../errors.js';
import { Name, Uuid } from './schemas.js';

export const CreateAccountInput = z.object({ name: Name });

export async function createAccount(db: Queryable, input: z.input<typeof CreateAccountInput>): Promise<{ accountId: string }> {
  const parsed = CreateAccountInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'account');
  const { rows } = await db.query<{ id: string }>('INSERT INTO accounts (name) VALUES ($1) RETURNING id', [parsed.data.name]);
  return { accountId: rows[0]!.id };
}

/** Refuses with VALIDATION_FAILED for a malformed id and NOT_FOUND for a missing account. */
export async function requireAccount(db: Queryable, accountId: string): Promise<void> {
  if (!Uuid.safeParse(accountId).success) throw new ApiError('VALIDATION_FAILED', `account "${accountId}" is not a valid id`);
  const { rowCount } = await db.query('SELECT 1 FROM accounts WHERE id = $1', [accountId]);
  if (!rowCount) throw new ApiError('NOT_FOUND', `account ${accountId} does not exist`);
}
