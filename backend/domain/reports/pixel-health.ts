import type { Queryable } from '../../db/pool.js';

/**
 * Pixel health: per pixel of a site, its last delivered send and its last failure (with the
 * platform's reason), and its sends of the last 24 hours by status. The last success and failure
 * are looked for in the last 30 days, newest first, through the (pixel, created_at) index: the
 * cost stays bounded however long the pixel's history.
 */
const LOOKBACK_DAYS = 30;

export interface PixelHealth {
  pixelId: string;
  platform: string;
  /** The platform's id of the pixel (Meta pixel id, TikTok pixel code, Google customer id, Snap pixel id). */
  label: string;
  active: boolean;
  lastSuccessAt: Date | null;
  lastErrorAt: Date | null;
  lastError: string | null;
  last24h: { sent: number; failed: number; skipped: number; pending: number };
}

/** A pixel's name for people: the platform's own id of it, from its public configuration. */
export function pixelLabel(platform: string, config: Record<string, unknown>): string {
  const v = config.pixelId ?? config.pixelCode ?? config.customerId ?? config.snapPixelId ?? config.id;
  return typeof v === 'string' || typeof v === 'number' ? `${platform} ${v}` : platform;
}

export async function pixelHealth(db: Queryable, siteId: string, now: Date): Promise<PixelHealth[]> {
  const { rows } = await db.query<{
    id: string;
    platform: string;
    public_config: Record<string, unknown>;
    active: boolean;
    ok_at: Date | null;
    err_at: Date | null;
    err: string | null;
    sent: number;
    failed: number;
    skipped: number;
    pending: number;
  }>(
    `SELECT p.id, p.platform, p.public_config, p.active, ok.sent_at AS ok_at, err.updated_at AS err_at, err.last_error AS err, d.*
     FROM pixels p
     LEFT JOIN LATERAL (
       SELECT COALESCE(x.sent_at, x.updated_at) AS sent_at FROM sends x
       WHERE x.pixel_id = p.id AND x.created_at > $2::timestamptz - make_interval(days => $3) AND x.status = 'sent'
       ORDER BY x.created_at DESC LIMIT 1) ok ON true
     LEFT JOIN LATERAL (
       SELECT x.updated_at, x.last_error FROM sends x
       WHERE x.pixel_id = p.id AND x.created_at > $2::timestamptz - make_interval(days => $3) AND x.last_error IS NOT NULL AND x.status IN ('failed', 'pending')
       ORDER BY x.created_at DESC LIMIT 1) err ON true
     LEFT JOIN LATERAL (
       SELECT count(*) FILTER (WHERE x.status = 'sent')::int AS sent, count(*) FILTER (WHERE x.status = 'failed')::int AS failed,
              count(*) FILTER (WHERE x.status = 'skipped')::int AS skipped, count(*) FILTER (WHERE x.status = 'pending')::int AS pending
       FROM sends x WHERE x.pixel_id = p.id AND x.created_at > $2::timestamptz - interval '24 hours') d ON true
     WHERE p.site_id = $1
     ORDER BY p.active DESC, p.platform, p.created_at`,
    [siteId, now, LOOKBACK_DAYS],
  );
  return rows.map((r) => ({
    pixelId: r.id,
    platform: r.platform,
    label: pixelLabel(r.platform, r.public_config),
    active: r.active,
    lastSuccessAt: r.ok_at,
    lastErrorAt: r.err_at,
    lastError: r.err,
    last24h: { sent: r.sent, failed: r.failed, skipped: r.skipped, pending: r.pending },
  }));
}

/** A spend source beside the pixels: whether its imports work, with the platform's reason when not. */
export interface SpendSourceHealth {
  spendSourceId: string;
  /** `meta act_1`, `google 1234567890`: the platform and its id of the account. */
  label: string;
  status: 'ok' | 'failing';
  lastError: string | null;
  lastSyncedAt: Date | null;
}

export async function spendSourceHealth(db: Queryable, siteId: string): Promise<SpendSourceHealth[]> {
  const { rows } = await db.query<{
    id: string;
    platform: string;
    account_ref: string;
    status: 'ok' | 'failing';
    last_error: string | null;
    last_synced_at: Date | null;
  }>(
    `SELECT id, platform, account_ref, status, last_error, last_synced_at FROM spend_sources
     WHERE site_id = $1 AND removed_at IS NULL ORDER BY status DESC, platform, created_at`,
    [siteId],
  );
  return rows.map((r) => ({
    spendSourceId: r.id,
    label: `${r.platform} ${r.account_ref}`,
    status: r.status,
    lastError: r.status === 'failing' ? r.last_error : null,
    lastSyncedAt: r.last_synced_at,
  }));
}
