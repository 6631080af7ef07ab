import type { Pool } from '../../db/pool.js';

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

// Ordinality keeps each answer with its question; a prefix that finds no key gives no row. The
// stored answer is looked up per question (LATERAL). The statement is planned on every run (not
// prepared): a plan kept from when the idempotency table was small goes on scanning all of it as
// it grows (measured: 2.6 ms a look-up after 10,000 keyed requests), and one planning per batch of
// look-ups costs little.
const LOOKUP_SQL = `
  SELECT q.n::int AS n, k.id, k.account_id, k.site_id, k.secret_hash, k.revoked_at, k.last_used_at,
         i.created_at AS prior_at, i.status_code AS prior_status, i.response_body AS prior_body, i.endpoint AS prior_endpoint
  FROM unnest($1::text[], $2::text[], $3::bytea[]) WITH ORDINALITY AS q(prefix, claim_key, hash, n)
  JOIN api_keys k ON k.prefix = q.prefix
  LEFT JOIN LATERAL (
    SELECT created_at, status_code, response_body, endpoint FROM idempotency_keys
    WHERE api_key_id = k.id AND key = q.claim_key AND k.secret_hash = q.hash
  ) i ON true`;

interface Waiting {
  lookup: KeyLookup;
  resolve(row: KeyRow | undefined): void;
  reject(error: unknown): void;
}

class KeyLookups {
  private queue: Waiting[] = [];
  private inFlight = 0;

  constructor(private readonly pool: Pool) {}

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
        text: LOOKUP_SQL,
        values: [batch.map((w) => w.lookup.prefix), batch.map((w) => w.lookup.claimKey), batch.map((w) => w.lookup.hash)],
      });
      const found = new Map(rows.map((r) => [r.n, r]));
      batch.forEach((w, i) => w.resolve(found.get(i + 1)));
    } catch (error) {
      for (const w of batch) w.reject(error);
    }
  }
}

const lookups = new WeakMap<Pool, KeyLookups>();

/** The key row for `lookup`, with what is stored under its Idempotency-Key; undefined when no key has the prefix. */
export function findApiKey(pool: Pool, lookup: KeyLookup): Promise<KeyRow | undefined> {
  let l = lookups.get(pool);
  if (l === undefined) lookups.set(pool, (l = new KeyLookups(pool)));
  return l.find(lookup);
}
