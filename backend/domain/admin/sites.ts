import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { Queryable } from '../../db/pool.js';
import { ApiError, validationError } from '../../errors.js';
import { requireAccount } from './accounts.js';
import { Domain, Name, Uuid } from './schemas.js';

export const CreateSiteInput = z.object({
  accountId: Uuid,
  name: Name,
  domains: z.array(Domain).min(1, 'at least one --domain is required').max(50),
  url: z.string().trim().url().max(2048).refine((u) => /^https?:/.test(u), 'must be an http(s) URL').optional(),
});

/** Public site identifier: safe in URLs and cookies, unguessable enough not to enumerate sites. */
export function newWebsiteId(): string {
  return `ws_${randomBytes(12).toString('base64url')}`;
}

export async function createSite(db: Queryable, input: z.input<typeof CreateSiteInput>): Promise<{ siteId: string; websiteId: string }> {
  const parsed = CreateSiteInput.safeParse(input);
  if (!parsed.success) throw validationError(parsed.error, 'site');
  const s = parsed.data;
  await requireAccount(db, s.accountId);
  const websiteId = newWebsiteId();
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO sites (account_id, website_id, name, url, domains) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
    [s.accountId, websiteId, s.name, s.url ?? null, [...new Set(s.domains)]],
  );
  return { siteId: rows[0]!.id, websiteId };
}

export interface SiteRow {
  id: string;
  account_id: string;
  website_id: string;
  name: string;
  domains: string[];
  default_channel_id: string | null;
  dedup_window_seconds: number;
}

/** A site by its id or its public websiteId. */
export async function findSite(db: Queryable, idOrWebsiteId: string): Promise<SiteRow | null> {
  const byId = Uuid.safeParse(idOrWebsiteId).success;
  const { rows } = await db.query<SiteRow>(
    `SELECT id, account_id, website_id, name, domains, default_channel_id, dedup_window_seconds
     FROM sites WHERE ${byId ? 'id = $1::uuid' : 'website_id = $1'}`,
    [idOrWebsiteId],
  );
  return rows[0] ?? null;
}

export async function requireSite(db: Queryable, idOrWebsiteId: string): Promise<SiteRow> {
  const site = await findSite(db, idOrWebsiteId);
  if (!site) throw new ApiError('NOT_FOUND', `site ${idOrWebsiteId} does not exist`);
  return site;
}
