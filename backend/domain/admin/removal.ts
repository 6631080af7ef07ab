import { withTx, type Queryable } from '../../db/pool.js';
import type { Deps } from '../../deps.js';
import { ApiError } from '../../errors.js';
import { removeBot } from './bots.js';
import { requireAccount } from './accounts.js';
import { requireSite } from './sites.js';
import { Uuid } from './schemas.js';

/**
 * `… remove`: an account, a site, a channel, an entry or a pixel is marked removed, never deleted.
 * The visits, joins and conversions it led to stay for reports and erasure; from then on it is in
 * no list, serves no tracker call, takes no event and sends nothing. Removing twice is NOT_FOUND.
 */

type Removed = { removed: true };

function idOf(kind: string, id: string): string {
  if (!Uuid.safeParse(id).success)
    throw new ApiError('VALIDATION_FAILED', `${kind} "${id}" is not a valid id`);
  return id;
}

/** A removed channel hands out no links; a site whose default it was names none (as after `bot remove`). */
async function retireChannels(tx: Queryable, where: string, id: string): Promise<void> {
  await tx.query(
    `UPDATE channels SET active = false, removed_at = now() WHERE ${where} AND removed_at IS NULL`,
    [id],
  );
  await tx.query(
    `UPDATE sites SET default_channel_id = NULL WHERE default_channel_id IN (SELECT id FROM channels WHERE ${where})`,
    [id],
  );
}

export async function removeChannel(pool: Deps['pool'], channelId: string): Promise<Removed> {
  const id = idOf('channel', channelId);
  return withTx(pool, async (tx) => {
    const { rowCount } = await tx.query(
      'SELECT 1 FROM channels WHERE id = $1 AND removed_at IS NULL FOR UPDATE',
      [id],
    );
    if (!rowCount) throw new ApiError('NOT_FOUND', `channel ${channelId} does not exist`);
    await retireChannels(tx, 'id = $1', id);
    return { removed: true };
  });
}

export async function removeEntry(pool: Deps['pool'], entryId: string): Promise<Removed> {
  const id = idOf('entry', entryId);
  const { rowCount } = await pool.query(
    'UPDATE entries SET active = false, removed_at = now() WHERE id = $1 AND removed_at IS NULL',
    [id],
  );
  if (!rowCount) throw new ApiError('NOT_FOUND', `entry ${entryId} does not exist`);
  return { removed: true };
}

/** Its sends still pending are skipped when their turn comes, as for a deactivated pixel. */
export async function removePixel(pool: Deps['pool'], pixelId: string): Promise<Removed> {
  const id = idOf('pixel', pixelId);
  const { rowCount } = await pool.query(
    'UPDATE pixels SET active = false, removed_at = now() WHERE id = $1 AND removed_at IS NULL',
    [id],
  );
  if (!rowCount) throw new ApiError('NOT_FOUND', `pixel ${pixelId} does not exist`);
  return { removed: true };
}

/** The site, its channels, entries and pixels, and its site-scoped API keys (revoked). */
export async function removeSite(pool: Deps['pool'], siteIdOrWebsiteId: string): Promise<Removed> {
  return withTx(pool, async (tx) => {
    const site = await requireSite(tx, siteIdOrWebsiteId);
    const { rowCount } = await tx.query(
      'UPDATE sites SET removed_at = now(), default_channel_id = NULL WHERE id = $1 AND removed_at IS NULL',
      [site.id],
    );
    if (!rowCount) throw new ApiError('NOT_FOUND', `site ${siteIdOrWebsiteId} does not exist`);
    await retireChannels(tx, 'site_id = $1', site.id);
    await tx.query(
      'UPDATE entries SET active = false, removed_at = now() WHERE site_id = $1 AND removed_at IS NULL',
      [site.id],
    );
    await tx.query(
      'UPDATE pixels SET active = false, removed_at = now() WHERE site_id = $1 AND removed_at IS NULL',
      [site.id],
    );
    await tx.query('UPDATE api_keys SET revoked_at = now() WHERE site_id = $1 AND revoked_at IS NULL', [
      site.id,
    ]);
    return { removed: true };
  });
}

/**
 * Refused while the account has sites (remove them first: each is a decision of its own). Its bots
 * are removed (Telegram told to stop sending their updates) and its API keys revoked.
 */
export async function removeAccount(
  deps: Pick<Deps, 'pool' | 'box' | 'config'>,
  accountId: string,
): Promise<Removed> {
  await requireAccount(deps.pool, accountId);
  const { rows: sites } = await deps.pool.query<{ website_id: string }>(
    'SELECT website_id FROM sites WHERE account_id = $1 AND removed_at IS NULL ORDER BY created_at LIMIT 3',
    [accountId],
  );
  if (sites.length > 0)
    throw new ApiError(
      'VALIDATION_FAILED',
      `account ${accountId} still has sites (${sites.map((s) => s.website_id).join(', ')}${sites.length === 3 ? ', …' : ''}): remove them first (site remove --site S)`,
    );
  const { rows: bots } = await deps.pool.query<{ id: string }>(
    'SELECT id FROM bots WHERE account_id = $1 AND removed_at IS NULL',
    [accountId],
  );
  for (const bot of bots) await removeBot(deps, bot.id);
  return withTx(deps.pool, async (tx) => {
    const { rowCount } = await tx.query(
      'UPDATE accounts SET removed_at = now() WHERE id = $1 AND removed_at IS NULL',
      [accountId],
    );
    if (!rowCount) throw new ApiError('NOT_FOUND', `account ${accountId} does not exist`);
    await tx.query('UPDATE api_keys SET revoked_at = now() WHERE account_id = $1 AND revoked_at IS NULL', [
      accountId,
    ]);
    return { removed: true };
  });
}
