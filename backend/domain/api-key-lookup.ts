import type { Pool } from '../db/pool.js';
import { KEY_LOOKUPS_WITH_PRIOR_SQL } from './idempotency.js';

/**
 * The API key look-up of the event endpoints (with what is stored under the request's
 * Idempotency-Key), coalesced: while a look-up is out (a fraction of a millisecond), the requests
 * that arrive wait and then go together, as one statement, in one round trip. A lone request is looked
 * up at once, as before. Every request runs one look-up, so under load this takes a round trip off
 * most of them (docs/benchmarks.md#business-api). Nothing is cached: a key revoked a moment ago is
 * refused by the next look-up.
 */
export const MAX_LOOKUPS_IN_FLIGHT = 1;
const MAX_LOOKUPS_PER_STATEMENT = 64;

export interface KeyLookup {
  prefix: string;
  /** A well-formed Idempotency-Key, or null. */
  claimKey: string | null;
  /** SHA-256 of the whole API key: what is stored under the Idempotency-Key is read only when it matches. */
  hash: Buffer;
}

export type KeyRow = {
  id: string;
  account_id: string;
  site_id: string | null;
  secret_hash: Buffer;
  revoked_at: Date | null;
  last_used_at: Date | null;
  prior_at: Date | null;
  prior_status: number | null;
  prior_body: { contentType: string; text: string } | null;
  /** The endpoint the Idempotency-Key was first used on (null for rows older than that record). */
  prior_endpoint: string | null;
};

interface Waiting {
  lookup: KeyLookup;
  resolve(row: KeyRow | undefined): void;
  reject(error: unknown): void;
}

/** The look-ups of one pool, held by the process (see `process-state.ts`). */
export class KeyLookups {
  private queue: Waiting[] = [];
  private inFlight = 0;

  constructor(private readonly pool: Pool) {}

  /** The key row for `lookup`, with what is stored under its Idempotency-Key; undefined when no key has the prefix. */
  find(lookup: KeyLookup): Promise<KeyRow | undefined> {
    return new Promise((resolve, reject) => {
      this.queue.push({ lookup, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < MAX_LOOKUPS_IN_FLIGHT && this.queue.length > 0) {
      const batch = this.queue.splice(0, MAX_LOOKUPS_PER_STATEMENT);
      this.inFlight += 1;
      void this.send(batch).finally(() => {
        this.inFlight -= 1;
        this.pump();
      });
    }
  }

  private async send(batch: Waiting[]): Promise<void> {
    try {
      const { rows } = await this.pool.query<KeyRow & { n: number }>({
        // Unnamed on purpose, so planned for each call's arrays: named, its generic plan ran at
        // 0.70 ms against 0.11 (planning saved: 0.36 ms; pg_stat_statements with track_planning).
        text: KEY_LOOKUPS_WITH_PRIOR_SQL,
        values: [
          batch.map((w) => w.lookup.prefix),
          batch.map((w) => w.lookup.claimKey),
          batch.map((w) => w.lookup.hash),
        ],
      });
      const found = new Map(rows.map((r) => [r.n, r]));
      batch.forEach((w, i) => w.resolve(found.get(i + 1)));
    } catch (error) {
      for (const w of batch) w.reject(error);
    }
  }
}

/** Records when a key was last used; the caller decides how often that is worth a write. */
export async function recordKeyUse(pool: Pool, keyId: string, at: Date): Promise<void> {
  await pool.query('UPDATE api_keys SET last_used_at = $2 WHERE id = $1', [keyId, at]);
}
