import { z } from 'zod';
import { generateApiKey } from '../../crypto/api-keys.js';
import type { Queryable } from '../../db/pool.js';
import { ApiError, validationError } from '../../errors.js';
import { requireAccount } from './accounts.js';
import { requireSite } from './sites.js';
import { Uuid } from './schemas.js';

export const CreateKeyInput = z.object({
  accountId: Uuid,
  siteId: z.string().trim().min(1).optional(),
  name: z.string().trim().min(1).max(200).optional(),
});

/** Creates a key; the plaintext is returned once and only its SHA-256 is stored. */
export async function createApiKey(
  db: Queryable,
  input: z.input<typeof CreateKeyInput>,
): Promise<{ keyId: string; apiKey: string }> {
  const parsed = CreateKeyInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'key');
  const k = parsed.data;
  await requireAccount(db, k.accountId);
  let siteId: string | null = null;
  if (k.siteId) {
    const site = await requireSite(db, k.siteId);
    if (site.account_id !== k.accountId)
      throw new ApiError('FORBIDDEN', `site ${k.siteId} belongs to another account`);
    siteId = site.id;
  }
  const key = generateApiKey();
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO api_keys (account_id, site_id, name, prefix, secret_hash) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
    [k.accountId, siteId, k.name ?? null, key.prefix, key.hash],
  );
  return { keyId: rows[0]!.id, apiKey: key.apiKey };
}

export async function revokeApiKey(db: Queryable, keyId: string): Promise<{ keyId: string; revoked: true }> {
  if (!Uuid.safeParse(keyId).success)
    throw new ApiError('VALIDATION_FAILED', `key "${keyId}" is not a valid key id`);
  const { rowCount } = await db.query(
    'UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1',
    [keyId],
  );
  if (!rowCount) throw new ApiError('NOT_FOUND', `key ${keyId} does not exist`);
  return { keyId, revoked: true };
}

export interface KeyListItem {
  keyId: string;
  name: string | null;
  siteId: string | null;
  createdAt: string;
  revokedAt: string | null;
}

export async function listApiKeys(db: Queryable, accountId: string): Promise<{ keys: KeyListItem[] }> {
  await requireAccount(db, accountId);
  const { rows } = await db.query<{
    id: string;
    name: string | null;
    site_id: string | null;
    created_at: Date;
    revoked_at: Date | null;
  }>(
    `SELECT id, name, site_id, created_at, revoked_at FROM api_keys WHERE account_id = $1 ORDER BY created_at, id`,
    [accountId],
  );
  return {
    keys: rows.map((r) => ({
      keyId: r.id,
      name: r.name,
      siteId: r.site_id,
      createdAt: r.created_at.toISOString(),
      revokedAt: r.revoked_at?.toISOString() ?? null,
    })),
  };
}
