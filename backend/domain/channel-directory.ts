import type { Queryable } from '../db/pool.js';
import { resolveSiteRef, type ApiCaller, type SiteRef } from './conversions/site-scope.js';

/**
 * Active channels as the business API shows them: a site's, or, for an account-scoped key that
 * names no site, every site's of the account (each with its site id and main domain).
 */
export interface DirectoryChannel {
  siteId?: string;
  siteDomain?: string;
  channelId: string;
  telegramChannelId: string;
  title: string;
  username?: string;
  funnelOrder: number;
  eventType: string;
}

export async function listChannelsFor(
  db: Queryable,
  caller: ApiCaller,
  ref: SiteRef,
): Promise<DirectoryChannel[]> {
  const siteId = await resolveSiteRef(db, caller, ref);
  const accountWide = siteId === null;
  const { rows } = await db.query<{
    site_id: string;
    site_domain: string;
    id: string;
    telegram_chat_id: number;
    title: string;
    username: string | null;
    funnel_order: number;
    event_type: string;
  }>(
    `SELECT c.site_id, s.domains[1] AS site_domain, c.id, c.telegram_chat_id, c.title, c.username, c.funnel_order, c.event_type
     FROM channels c JOIN sites s ON s.id = c.site_id
     WHERE c.active AND s.account_id = $1 AND ($2::uuid IS NULL OR c.site_id = $2)
     ORDER BY s.created_at, s.id, c.funnel_order, c.created_at, c.id`,
    [caller.accountId, siteId],
  );
  return rows.map((r) => ({
    ...(accountWide ? { siteId: r.site_id, siteDomain: r.site_domain } : {}),
    channelId: r.id,
    telegramChannelId: String(r.telegram_chat_id),
    title: r.title,
    ...(r.username ? { username: r.username } : {}),
    funnelOrder: r.funnel_order,
    eventType: r.event_type,
  }));
}
