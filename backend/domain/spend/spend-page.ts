import type { Pool } from '../../db/pool.js';
import type { ImportWindow } from './importer.js';
import { addMoney } from './roi-rules.js';

/**
 * What the Google, TikTok and Snapchat importers share (docs/spend.md): one page of daily campaign
 * rows written to `spend_daily` together with where the import goes on, in one statement, so an
 * import that stops (a rate limit, a restart) resumes at the page after the last one written and
 * a restated day replaces what was read before.
 */
export interface SpendRow {
  /** The account's own day, YYYY-MM-DD. */
  day: string;
  campaignId: string;
  campaignName: string;
  currency: string;
  /** A decimal string in the account's currency: exact, never a float (micros are divided in text). */
  spend: string;
  impressions: number;
  clicks: number;
}

/** Where an interrupted import goes on: the window it was reading and the platform's own cursor. */
export interface Progress<C> {
  window: ImportWindow;
  cursor: C;
}

/**
 * The stored cursor when the stored progress belongs to this very window; otherwise none (a
 * different window starts from its beginning, and its first page overwrites the old progress).
 */
export async function resumeCursor<C>(pool: Pool, sourceId: string, window: ImportWindow): Promise<C | null> {
  const { rows } = await pool.query<{ progress: Progress<C> | null }>(
    'SELECT progress FROM spend_sources WHERE id = $1',
    [sourceId],
  );
  const p = rows[0]?.progress;
  if (!p || p.window?.from !== window.from || p.window?.to !== window.to || p.cursor == null) return null;
  return p.cursor;
}

/**
 * Upserts one page and stores `next` (null: the window is complete, the progress is cleared and
 * `last_synced_at` set). The source is `ok` again: a page was read.
 */
export async function writeSpendPage<C>(
  pool: Pool,
  sourceId: string,
  window: ImportWindow,
  page: readonly SpendRow[],
  next: C | null,
): Promise<void> {
  await pool.query(
    `WITH w AS (
       INSERT INTO spend_daily (source_id, day, campaign_id, campaign_name, currency, spend, impressions, clicks)
       SELECT $1, x.day::date, x.c, x.n, x.cur, x.s, x.i, x.k
       FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::numeric[], $7::bigint[], $8::bigint[]) x(day, c, n, cur, s, i, k)
       ON CONFLICT (source_id, day, campaign_id, ad_set_id) DO UPDATE SET campaign_name = EXCLUDED.campaign_name,
         currency = EXCLUDED.currency, spend = EXCLUDED.spend, impressions = EXCLUDED.impressions,
         clicks = EXCLUDED.clicks, updated_at = now()
       RETURNING 1)
     UPDATE spend_sources SET progress = $9::jsonb, status = 'ok', last_error = NULL,
       last_synced_at = CASE WHEN $9::jsonb IS NULL THEN now() ELSE last_synced_at END
     WHERE id = $1 AND (SELECT count(*) FROM w) >= 0`,
    [
      sourceId,
      page.map((r) => r.day),
      page.map((r) => r.campaignId),
      page.map((r) => r.campaignName),
      page.map((r) => r.currency),
      page.map((r) => r.spend),
      page.map((r) => r.impressions),
      page.map((r) => r.clicks),
      next === null ? null : JSON.stringify({ window, cursor: next } satisfies Progress<C>),
    ],
  );
}

/** The platform refused the credentials: the source is failing with its reason, and nothing resumes. */
export async function markFailing(pool: Pool, sourceId: string, reason: string): Promise<void> {
  await pool.query(
    `UPDATE spend_sources SET status = 'failing', last_error = $2, progress = NULL WHERE id = $1`,
    [sourceId, reason],
  );
}

/** Adds a page's spend to the per-currency totals an import reports. */
export function addPage(into: Record<string, number>, page: readonly SpendRow[]): void {
  for (const r of page) addMoney(into, r.currency, Number(r.spend));
}

/**
 * An amount in millionths of the currency unit (Google's `cost_micros`, Snap's `spend`) as an exact
 * decimal string: `12345678` → `12.345678`. Null for anything that is not a whole number.
 */
export function microsToDecimal(micros: unknown): string | null {
  const s = typeof micros === 'number' && Number.isSafeInteger(micros) ? String(micros) : micros;
  if (typeof s !== 'string' || !/^-?\d+$/.test(s)) return null;
  const neg = s.startsWith('-');
  const digits = (neg ? s.slice(1) : s).padStart(7, '0');
  const whole = digits.slice(0, -6).replace(/^0+(?=\d)/, '');
  const frac = digits.slice(-6).replace(/0+$/, '');
  return `${neg ? '-' : ''}${whole}${frac ? `.${frac}` : ''}`;
}

/** A decimal amount as the platform wrote it (TikTok's `"12.34"`), or null when it is not one. */
export function decimalOrNull(v: unknown): string | null {
  const s = typeof v === 'number' && Number.isFinite(v) ? String(v) : v;
  return typeof s === 'string' && /^-?\d+(\.\d+)?$/.test(s) ? s : null;
}

/** A count (impressions, clicks) as a number; 0 when absent. Null when present and not a count. */
export function countOrNull(v: unknown): number | null {
  if (v === undefined || v === null || v === '') return 0;
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : Number.NaN;
  return Number.isSafeInteger(n) && n >= 0 ? n : null;
}

/** The days from `from` to `to` (inclusive) cut into windows of at most `maxDays` days. */
export function splitWindow(w: ImportWindow, maxDays: number): ImportWindow[] {
  const out: ImportWindow[] = [];
  const end = Date.parse(`${w.to}T00:00:00Z`);
  for (let t = Date.parse(`${w.from}T00:00:00Z`); t <= end; t += maxDays * 86_400_000) {
    const last = Math.min(t + (maxDays - 1) * 86_400_000, end);
    out.push({ from: isoDay(t), to: isoDay(last) });
  }
  return out;
}

export function isoDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}
