import { z } from 'zod';
import { generateForwarderKey } from '../../crypto/api-keys.js';
import type { Queryable } from '../../db/pool.js';
import { ApiError, validationError } from '../../errors.js';
import { Uuid } from './schemas.js';
import { requireSite } from './sites.js';

/** Forwarder keys of a site (see migration 092 and `tracker/forwarders.ts`). */
export const CreateForwarderKeyInput = z.object({
  siteId: z.string().trim().min(1),
  name: z.string().trim().min(1).max(200).optional(),
});

export async function createForwarderKey(
  db: Queryable,
  input: z.input<typeof CreateForwarderKeyInput>,
): Promise<{ keyId: string; forwarderKey: string }> {
  const parsed = CreateForwarderKeyInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'forwarder key');
  const site = await requireSite(db, parsed.data.siteId);
  const key = generateForwarderKey();
  const { rows } = await db.query<{ id: string }>(
    'INSERT INTO forwarder_keys (site_id, name, prefix, secret_hash) VALUES ($1, $2, $3, $4) RETURNING id',
    [site.id, parsed.data.name ?? null, key.prefix, key.hash],
  );
  return { keyId: rows[0]!.id, forwarderKey: key.apiKey };
}

export async function revokeForwarderKey(
  db: Queryable,
  keyId: string,
): Promise<{ keyId: string; revoked: true }> {
  if (!Uuid.safeParse(keyId).success)
    throw new ApiError('VALIDATION_FAILED', `key "${keyId}" is not a valid id`);
  const { rowCount } = await db.query(
    'UPDATE forwarder_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1',
    [keyId],
  );
  if (!rowCount) throw new ApiError('NOT_FOUND', `forwarder key ${keyId} does not exist`);
  return { keyId, revoked: true };
}

export interface ForwarderKeyListItem {
  keyId: string;
  name: string | null;
  createdAt: string;
  revokedAt: string | null;
}

export async function listForwarderKeys(
  db: Queryable,
  siteRef: string,
): Promise<{ keys: ForwarderKeyListItem[] }> {
  const site = await requireSite(db, siteRef);
  const { rows } = await db.query<{
    id: string;
    name: string | null;
    created_at: Date;
    revoked_at: Date | null;
  }>(
    'SELECT id, name, created_at, revoked_at FROM forwarder_keys WHERE site_id = $1 ORDER BY created_at, id',
    [site.id],
  );
  return {
    keys: rows.map((r) => ({
      keyId: r.id,
      name: r.name,
      createdAt: r.created_at.toISOString(),
      revokedAt: r.revoked_at?.toISOString() ?? null,
    })),
  };
}
