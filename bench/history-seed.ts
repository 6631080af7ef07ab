/**
 * A year of a busy site in the benchmark database (the history and retention suites): N visits, N/10 leads with a join each, N/5 conversions and N sends
 * (one per conversion, and a PageView send for most visits), spread evenly in time over `days`
 * days ending `endDaysAgo` days ago, written in time order as production writes them. Every raw
 * field is filled (IP, User-Agent, URLs, click ids, a PII digest), so that rows have their
 * production width. The history lives on a site of its own account: the benchmarks' own sites see
 * the same tables and indexes, grown by the history.
 *
 * Written in chunks of `CHUNK` visits, each one statement (`INSERT … SELECT generate_series`).
 */
import type pg from 'pg';

const CHUNK = 100_000;
const FIRST_USER = 2_000_000_000;

export interface HistoryOptions {
  visits: number;
  days?: number;
  endDaysAgo?: number;
  /** PageView sends for the visits (default true); without them only conversions have sends. */
  pageViewSends?: boolean;
  /** Progress lines go here. */
  log?: (line: string) => void;
}

export interface HistoryResult {
  siteId: string;
  seconds: number;
  rows: { visits: number; leads: number; conversions: number; sends: number };
}

export async function seedHistory(pool: pg.Pool, o: HistoryOptions): Promise<HistoryResult> {
  const started = performance.now();
  const days = o.days ?? 365;
  const endDaysAgo = o.endDaysAgo ?? 0;
  const one = async (sql: string, params: unknown[]) =>
    (await pool.query<{ id: string }>(sql, params)).rows[0]!.id;
  const accountId = await one(`INSERT INTO accounts (name) VALUES ('history') RETURNING id`, []);
  const siteId = await one(
    `INSERT INTO sites (account_id, website_id, name, domains) VALUES ($1, 'ws_history_' || substr(md5(random()::text), 1, 10), 'Busy', '{busy.example.com}') RETURNING id`,
    [accountId],
  );
  const botId = await one(
    `INSERT INTO bots (account_id, telegram_bot_id, token_enc, webhook_secret_hash) VALUES ($1, 999777, 'unused', '\\x00') RETURNING id`,
    [accountId],
  );
  const channelId = await one(
    `INSERT INTO channels (site_id, bot_id, telegram_chat_id, title) VALUES ($1, $2, -1009999999999, 'Busy') RETURNING id`,
    [siteId, botId],
  );
  const pixelId = await one(
    `INSERT INTO pixels (site_id, platform, public_config, secrets_enc) VALUES ($1, 'meta', '{"pixelId":"1234567890"}', 'unused') RETURNING id`,
    [siteId],
  );

  const visits = o.visits;
  const leads = Math.max(1, Math.floor(visits / 10));
  const conversions = Math.max(1, Math.floor(visits / 5));
  const spanMs = days * 86_400_000;
  const endMs = Date.now() - endDaysAgo * 86_400_000;
  const startMs = endMs - spanMs;
  const at = (share: string) => `to_timestamp((${startMs}::float8 + (${share}) * ${spanMs}::float8) / 1000)`;
  // PageView sends for this share of visits, so that all sends together come to N.
  const pageViewShare = o.pageViewSends === false ? 0 : (visits - conversions) / visits;

  for (let from = 1; from <= visits; from += CHUNK) {
    const to = Math.min(visits, from + CHUNK - 1);
    await pool.query(
      `WITH v AS (
         INSERT INTO visits (site_id, temp_id, session_id, visit_request_id, href, landing_page, referrer, client_ip, user_agent, fbc, fbp, gclid, utm_source, utm_campaign, channel_id, created_at, updated_at)
         SELECT $1, gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'https://busy.example.com/l?fbclid=IwAR' || g || '&utm_source=fb', '/l?fbclid=IwAR' || g,
                'https://l.facebook.com/', '198.51.' || (g % 250) || '.' || (g % 199 + 1), 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) History/' || (g % 50),
                'fb.1.1763776500000.IwAR' || g, 'fb.1.1763776500000.' || g, CASE WHEN g % 7 = 0 THEN 'Cj0KCQ' || g END, 'fb', 'spring', $2, t, t
         FROM generate_series($3::int, $4::int) g, LATERAL (SELECT ${at(`g::float8 / $5`)} AS t) x
         ORDER BY g
         RETURNING id, created_at
       )
       INSERT INTO sends (visit_id, pixel_id, platform, event_id, status, attempts, created_at, updated_at, next_attempt_at, sent_at)
       SELECT id, $6, 'meta', 'pv_' || id, 'sent', 1, created_at, created_at, created_at, created_at FROM v WHERE random() < $7`,
      [siteId, channelId, from, to, visits, pixelId, pageViewShare],
    );
    o.log?.(`  visits ${to}/${visits}`);
  }

  await pool.query(
    `WITH l AS (
       INSERT INTO leads (site_id, telegram_user_id, external_user_id, first_seen_at, last_seen_at)
       SELECT $1, ${FIRST_USER}::bigint + g, 'crm-' || g, t, t FROM generate_series(1, $3::int) g, LATERAL (SELECT ${at('g::float8 / $3')} AS t) x
       RETURNING id, telegram_user_id, first_seen_at
     )
     INSERT INTO memberships (channel_id, telegram_user_id, lead_id, kind, attributed, occurred_at, created_at)
     SELECT $2, telegram_user_id, id, 'join', true, first_seen_at, first_seen_at FROM l`,
    [siteId, channelId, leads],
  );
  o.log?.(`  leads ${leads}`);

  for (let from = 1; from <= conversions; from += CHUNK) {
    const to = Math.min(conversions, from + CHUNK - 1);
    await pool.query(
      `WITH c AS (
         INSERT INTO conversions (site_id, channel_id, telegram_user_id, event_type, value, currency, pii_hashed, client_ip, user_agent, event_source_url,
                                  event_time, attributed_at, received_at, created_at, updated_at, capi_status, source)
         SELECT $1, $2, ${FIRST_USER}::bigint + (g % $5) + 1, CASE WHEN g % 2 = 0 THEN 'Purchase' ELSE 'Lead' END, CASE WHEN g % 2 = 0 THEN 49.9 END, CASE WHEN g % 2 = 0 THEN 'EUR' END,
                jsonb_build_object('em', md5(g::text) || md5((g + 1)::text)), '198.51.100.' || (g % 250), 'Mozilla/5.0 History', 'https://busy.example.com/thanks',
                t, t, t, t, t, 'sent', 'api'
         FROM generate_series($3::int, $4::int) g, LATERAL (SELECT ${at('g::float8 / $6')} AS t) x
         ORDER BY g
         RETURNING id, received_at
       )
       INSERT INTO sends (conversion_id, pixel_id, platform, event_id, status, attempts, created_at, updated_at, next_attempt_at, sent_at)
       SELECT id, $7, 'meta', 'cnv_' || id, 'sent', 1, received_at, received_at, received_at, received_at FROM c`,
      [siteId, channelId, from, to, leads, conversions, pixelId],
    );
    o.log?.(`  conversions ${to}/${conversions}`);
  }
  await pool.query('VACUUM ANALYZE');
  const { rows } = await pool.query<{ visits: number; leads: number; conversions: number; sends: number }>(
    `SELECT (SELECT count(*)::int FROM visits WHERE site_id = $1) AS visits, (SELECT count(*)::int FROM leads WHERE site_id = $1) AS leads,
            (SELECT count(*)::int FROM conversions WHERE site_id = $1) AS conversions,
            (SELECT count(*)::int FROM sends WHERE pixel_id = $2) AS sends`,
    [siteId, pixelId],
  );
  return { siteId, seconds: (performance.now() - started) / 1000, rows: rows[0]! };
}
