import type { Config } from '../../config.js';
import type { Pool } from '../../db/pool.js';

/**
 * What every platform's spend importer offers (docs/spend.md). `spend add` checks the credentials
 * with `check` before it stores the source; `spend sync`, the backfill after an add and the hourly
 * refresh call `importDays`. An importer writes `spend_daily` itself (one upsert per page, with
 * the page to go on from in `spend_sources.progress`), so that an import that stops goes on where
 * it stopped and a restated day replaces what was read.
 */
export type SpendPlatform = 'meta' | 'google' | 'tiktok' | 'snapchat';

export interface SpendSource {
  id: string;
  siteId: string;
  platform: SpendPlatform;
  /** act_N, the Google customer id (digits), the TikTok advertiser id, the Snap ad account id. */
  accountRef: string;
  /** Unsealed credentials: the flags of `spend add` that are secrets or ids (accessToken, refreshToken, …). */
  credentials: Record<string, string>;
  currency: string | null;
  timeZone: string | null;
}

/** The account as the platform describes it, read when the source is added. */
export type CheckOutcome =
  | { kind: 'ok'; currency: string; timeZone: string; name?: string }
  | { kind: 'refused'; reason: string };

export type ImportOutcome =
  | { kind: 'done'; rows: number; spend: Record<string, number> }
  | { kind: 'paused'; rows: number; retryAfterMs: number; reason: string }
  | { kind: 'failed'; rows: number; reason: string };

export interface ImportWindow {
  /** The account's own days, inclusive, as YYYY-MM-DD. */
  from: string;
  to: string;
}

export interface SpendImporter {
  platform: SpendPlatform;
  check(config: Config, source: SpendSource): Promise<CheckOutcome>;
  importDays(pool: Pool, config: Config, source: SpendSource, window: ImportWindow): Promise<ImportOutcome>;
}
