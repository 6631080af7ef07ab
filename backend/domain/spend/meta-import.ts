import type { Pool } from '../../db/pool.js';
import type { ImportOutcome } from './importer.js';
import { addMoney } from './roi-rules.js';
import { markFailing } from './spend-page.js';

/**
 * Meta spend (docs/spend.md): `GET {META_GRAPH_URL}/{version}/act_N/insights` at
 * `level=campaign`, `time_increment=1`, one row per campaign and day in the account's currency,
 * paged with `paging.next`. Each page is written (upserted: a restated day replaces what was
 * read) together with the next page's URL in the source's `progress`, so an interrupted import
 * goes on from the page it stopped at. Meta's business-use-case limit (codes 17, 4, 80000–80014)
 * answers with `X-Business-Use-Case-Usage`, whose `estimated_time_to_regain_access` (minutes) says
 * how long to wait: the import stops and says when to go on. A refused token (190) marks the
 * source failing with Meta's reason.
 */
export const META_FIELDS = 'campaign_id,campaign_name,spend,impressions,clicks,account_currency,date_start';

export interface MetaSource {
  id: string;
  adAccount: string;
  accessToken: string;
}

interface InsightsRow {
  campaign_id?: unknown;
  campaign_name?: unknown;
  spend?: unknown;
  impressions?: unknown;
  clicks?: unknown;
  account_currency?: unknown;
  date_start?: unknown;
}

const RATE_LIMIT_CODES = new Set([4, 17, 32, 613, 80000, 80003, 80004, 80014]);

export function insightsUrl(base: string, version: string, s: MetaSource, from: string, to: string): string {
  const u = new URL(`${base.replace(/\/$/, '')}/${version}/${s.adAccount}/insights`);
  u.searchParams.set('level', 'campaign');
  u.searchParams.set('time_increment', '1');
  u.searchParams.set('fields', META_FIELDS);
  u.searchParams.set('time_range', JSON.stringify({ since: from, until: to }));
  u.searchParams.set('limit', '500');
  return u.toString();
}

/** Minutes Meta says the account waits, from X-Business-Use-Case-Usage (at least one minute). */
export function bucWaitMs(header: string | null): number {
  let minutes = 1;
  try {
    const usage = JSON.parse(header ?? '{}') as Record<
      string,
      { estimated_time_to_regain_access?: number }[]
    >;
    for (const list of Object.values(usage))
      for (const u of list ?? []) minutes = Math.max(minutes, Number(u.estimated_time_to_regain_access ?? 0));
  } catch {
    // An unreadable header: wait the minimum.
  }
  return minutes * 60_000;
}

export async function importMetaSpend(
  pool: Pool,
  s: MetaSource,
  o: { base: string; version: string; from: string; to: string; timeoutMs?: number },
): Promise<ImportOutcome> {
  const { rows: p } = await pool.query<{ progress: { url?: string } | null }>(
    'SELECT progress FROM spend_sources WHERE id = $1',
    [s.id],
  );
  let url: string | null = p[0]?.progress?.url ?? insightsUrl(o.base, o.version, s, o.from, o.to);
  let rows = 0;
  const spend: Record<string, number> = {};
  while (url !== null) {
    const res = await fetch(url, {
      headers: { authorization: `Bearer ${s.accessToken}` },
      signal: AbortSignal.timeout(o.timeoutMs ?? 30_000),
    });
    const body = (await res.json().catch(() => null)) as {
      data?: InsightsRow[];
      paging?: { next?: string };
      error?: { code?: number; message?: string };
    } | null;
    if (!res.ok || body === null || body.error) {
      const code = Number(body?.error?.code ?? 0);
      const reason = `meta ${res.status} (#${code}) ${String(body?.error?.message ?? 'no answer').slice(0, 300)}`;
      if (RATE_LIMIT_CODES.has(code))
        return {
          kind: 'paused',
          rows,
          retryAfterMs: bucWaitMs(res.headers.get('x-business-use-case-usage')),
          reason,
        };
      if (code === 190 || code === 200 || code === 10) {
        await markFailing(pool, s.id, reason);
        return { kind: 'failed', rows, reason };
      }
      return { kind: 'paused', rows, retryAfterMs: 60_000, reason };
    }
    const page = (body.data ?? []).map((r) => ({
      day: String(r.date_start),
      campaignId: String(r.campaign_id),
      name: String(r.campaign_name ?? ''),
      currency: String(r.account_currency ?? ''),
      spend: Number(r.spend ?? 0),
      impressions: Number(r.impressions ?? 0),
      clicks: Number(r.clicks ?? 0),
    }));
    const next: string | null = body.paging?.next ?? null;
    await pool.query(
      `WITH w AS (
         INSERT INTO spend_daily (source_id, day, campaign_id, campaign_name, currency, spend, impressions, clicks)
         SELECT $1, x.day::date, x.c, x.n, x.cur, x.s, x.i, x.k
         FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::numeric[], $7::bigint[], $8::bigint[]) x(day, c, n, cur, s, i, k)
         ON CONFLICT (source_id, day, campaign_id, ad_set_id) DO UPDATE SET campaign_name = EXCLUDED.campaign_name,
           currency = EXCLUDED.currency, spend = EXCLUDED.spend, impressions = EXCLUDED.impressions,
           clicks = EXCLUDED.clicks, updated_at = now()
         RETURNING 1)
       UPDATE spend_sources SET progress = CASE WHEN $9::text IS NULL THEN NULL ELSE jsonb_build_object('url', $9::text) END,
         currency = COALESCE($10, currency), status = 'ok', last_error = NULL,
         last_synced_at = CASE WHEN $9::text IS NULL THEN now() ELSE last_synced_at END
       WHERE id = $1 AND (SELECT count(*) FROM w) >= 0`,
      [
        s.id,
        page.map((r) => r.day),
        page.map((r) => r.campaignId),
        page.map((r) => r.name),
        page.map((r) => r.currency),
        page.map((r) => r.spend),
        page.map((r) => r.impressions),
        page.map((r) => r.clicks),
        next,
        page[0]?.currency ?? null,
      ],
    );
    rows += page.length;
    for (const r of page) addMoney(spend, r.currency, r.spend);
    url = next;
  }
  return { kind: 'done', rows, spend };
}
