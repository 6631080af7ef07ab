import type { Queryable } from '../../db/pool.js';
import { pixelLabel } from '../reports/pixel-health.js';
import { isSilentChannel, isTokenRefusal } from './rules.js';

/**
 * What holds on a site now, as alert conditions keyed `<kind>:<subject id>` with a sentence for
 * people. Each kind is one source; a source reads only what its rule needs, through indexes that
 * keep it bounded (a pixel's sends of the last day, a channel's joins of the last eight days).
 */
export interface Condition {
  key: string;
  detail: string;
}

export interface ConditionOptions {
  now: Date;
  /** How long sends must have been failing (default 15 minutes). */
  failingForMs: number;
}

type Source = (db: Queryable, siteId: string, o: ConditionOptions) => Promise<Condition[]>;

/** A pixel whose latest finished send of the last day failed with a refusal of its credentials. */
const tokenRefused: Source = async (db, siteId, o) => {
  const { rows } = await db.query<{
    id: string;
    platform: string;
    public_config: Record<string, unknown>;
    last_error: string | null;
  }>(
    `SELECT p.id, p.platform, p.public_config, s.last_error FROM pixels p
     JOIN LATERAL (
       SELECT x.status, x.last_error FROM sends x
       WHERE x.pixel_id = p.id AND x.created_at > $2::timestamptz - interval '1 day' AND (x.status IN ('sent', 'failed') OR x.last_error IS NOT NULL)
       ORDER BY x.updated_at DESC LIMIT 1) s ON s.status <> 'sent'
     WHERE p.site_id = $1 AND p.active`,
    [siteId, o.now],
  );
  return rows
    .filter((r) => isTokenRefusal(r.last_error))
    .map((r) => ({
      key: `token_refused:${r.id}`,
      detail: `${pixelLabel(r.platform, r.public_config)}: the platform refuses the access token (${r.last_error})`,
    }));
};

/** A pixel with failures for `failingForMs` and no send delivered since they began. */
const sendsFailing: Source = async (db, siteId, o) => {
  const { rows } = await db.query<{
    id: string;
    platform: string;
    public_config: Record<string, unknown>;
    first_fail: Date;
    last_error: string;
  }>(
    `SELECT p.id, p.platform, p.public_config, f.first_fail, f.last_error FROM pixels p
     JOIN LATERAL (
       SELECT max(COALESCE(x.sent_at, x.updated_at)) AS ok_at FROM sends x
       WHERE x.pixel_id = p.id AND x.created_at > $2::timestamptz - interval '1 day' AND x.status = 'sent') ok ON true
     JOIN LATERAL (
       SELECT min(x.updated_at) AS first_fail, max(x.updated_at) AS last_fail, (array_agg(x.last_error ORDER BY x.updated_at DESC))[1] AS last_error
       FROM sends x
       WHERE x.pixel_id = p.id AND x.created_at > $2::timestamptz - interval '1 day' AND x.last_error IS NOT NULL
         AND x.status IN ('failed', 'pending') AND x.updated_at > COALESCE(ok.ok_at, '-infinity')) f ON f.first_fail IS NOT NULL
     WHERE p.site_id = $1 AND p.active
       AND f.first_fail <= $2::timestamptz - $3 * interval '1 millisecond'
       AND f.last_fail > $2::timestamptz - $3 * interval '1 millisecond'`,
    [siteId, o.now, o.failingForMs],
  );
  return rows.map((r) => ({
    key: `sends_failing:${r.id}`,
    detail: `${pixelLabel(r.platform, r.public_config)}: sends failing since ${r.first_fail.toISOString()} (${r.last_error})`,
  }));
};

/** A channel with no join in the last 24 hours that had joins in each of the seven days before. */
const silentChannel: Source = async (db, siteId, o) => {
  const { rows } = await db.query<{ id: string; title: string; days: number[] }>(
    `SELECT c.id, c.title, ARRAY(
       SELECT (SELECT count(*)::int FROM memberships m
               WHERE m.channel_id = c.id AND m.kind = 'join'
                 AND m.occurred_at > $2::timestamptz - (d + 1) * interval '1 day' AND m.occurred_at <= $2::timestamptz - d * interval '1 day')
       FROM generate_series(0, 7) d ORDER BY d) AS days
     FROM channels c WHERE c.site_id = $1 AND c.active`,
    [siteId, o.now],
  );
  return rows
    .filter((r) => isSilentChannel(r.days))
    .map((r) => ({
      key: `no_joins:${r.id}`,
      detail: `channel "${r.title}": no join in the last 24 hours, after joins every day of the week before`,
    }));
};

/**
 * A spend source whose last import failed. Spend sources (`spend add`) keep `status` ok|failing
 * and `last_error`; the source reads them only where that table exists, so alerts work the same
 * on a database that has none.
 */
const spendSourceFailing: Source = async (db, siteId) => {
  const { rows: has } = await db.query<{ t: string | null }>(
    `SELECT to_regclass('spend_sources')::text AS t`,
  );
  if (!has[0]?.t) return [];
  const { rows } = await db.query<{ id: string; platform: string | null; last_error: string | null }>(
    `SELECT s.id::text, to_jsonb(s) ->> 'platform' AS platform, to_jsonb(s) ->> 'last_error' AS last_error
     FROM spend_sources s WHERE s.site_id = $1 AND to_jsonb(s) ->> 'status' = 'failing' AND s.removed_at IS NULL`,
    [siteId],
  );
  return rows.map((r) => ({
    key: `spend_failing:${r.id}`,
    detail:
      `spend source ${r.platform ?? ''} ${r.id}: imports failing (${r.last_error ?? 'no reason given'})`.replace(
        / {2}/g,
        ' ',
      ),
  }));
};

export const CONDITION_SOURCES: Source[] = [tokenRefused, sendsFailing, silentChannel, spendSourceFailing];

export async function siteConditions(
  db: Queryable,
  siteId: string,
  o: ConditionOptions,
): Promise<Condition[]> {
  const found: Condition[] = [];
  for (const source of CONDITION_SOURCES) found.push(...(await source(db, siteId, o)));
  return found;
}
