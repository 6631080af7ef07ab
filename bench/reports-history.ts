/**
 * The reports benchmark's history: one site's funnel over `days` days ending now, seeded with a
 * few large set-based statements (`INSERT … SELECT generate_series`, a chunk of visits at a time),
 * so that 10 million visits, 1 million joins and 2 million conversions load in minutes.
 *
 * What it holds, for N visits (numbered g = 1…N, spread evenly in time, written in time order):
 * - visits: 45 % `utm_source=fb` (an fbc), 20 % `tiktok` (a ttclid; a third also carry Meta's
 *   `_fbc` cookie), 20 % `google` (a gclid, a tenth a gbraid instead), 5 % `snapchat` (ScCid),
 *   10 % without tags or click ids; 8 campaigns per source; two channels (80 % / 20 %);
 * - invite clicks for 16 % of the visits, 20 seconds after them;
 * - joins: attributed ones for half of those clicks (8 % of the visits, 2 minutes after the
 *   visit, through the invitation), organic ones for another 2 % (no visit): N/10 in all, 80 %
 *   attributed; a lead per joined user;
 * - conversions: two per joined user (up to N/5): a Lead a minute after the join and a Purchase of 49.90
 *   up to three days later (EUR for two thirds, USD for the rest), each with a delivered send;
 *   those of attributed users carry their visit;
 * - leaves for a tenth of the joined users, 0 to 37 days after their join.
 *
 * What would lie after the seeding's own instant (a Purchase up to three days after a join of
 * yesterday, a leave 37 days after a join of last week) has not happened yet and is not written:
 * piled up at "now", it would make the last hour hold days of leaves and purchases, and every
 * report's live part read them.
 *
 * The tables must be empty (a fresh benchmark database): their secondary indexes and foreign keys
 * are dropped before the rows and made again after them from their own definitions
 * (`pg_get_indexdef`, `pg_get_constraintdef`), as a restore does, which checks every row against
 * its referenced table in one pass; primary keys and unique constraints stay. An index built in one pass
 * is packed tighter than one grown by inserts, so a report's index scans read slightly fewer
 * pages than in production. The reports' triggers are off while seeding: they mark sealed days
 * dirty, and no day is sealed yet.
 */
import type pg from 'pg';

const CHUNK = 1_000_000;
const FIRST_USER = 2_000_000_000;
const TABLES = ['visits', 'invitations', 'leads', 'memberships', 'conversions', 'sends'];
const TRIGGERS: [string, string][] = [
  ['memberships', 'report_late_membership'],
  ['invitations', 'report_late_invitation'],
  ['conversions', 'report_late_conversion'],
  ['conversions', 'report_conversion_value'],
];

/**
 * SQL for the id and name of campaign `j` (0-based) of source `src` ('fb', 'google', 'tiktok',
 * 'snapchat'), as the platform would give them: Meta, Google and TikTok ids are numbers, Snapchat's
 * UUIDs. The ROI benchmark writes the spend of the same campaigns.
 */
export function benchCampaign(src: string, j: string): { id: string; name: string } {
  return {
    id: `CASE ${src} WHEN 'fb' THEN (23850000000000000 + ${j})::text WHEN 'google' THEN (21700000000 + ${j})::text
           WHEN 'tiktok' THEN (1790000000000000 + ${j})::text ELSE md5('sc' || ${j})::uuid::text END`,
    name: `${src} || '_' || (ARRAY['spring','summer','retarget','lookalike','brand','promo','video','carousel'])[${j} % 8 + 1] || '_' || ${j}`,
  };
}

export interface ReportsHistory {
  siteId: string;
  seconds: number;
  rows: { visits: number; inviteClicks: number; joins: number; leaves: number; conversions: number };
}

export async function seedReportsHistory(
  pool: pg.Pool,
  o: { visits: number; days: number; campaigns?: number; log?: (line: string) => void },
): Promise<ReportsHistory> {
  const started = performance.now();
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
  const channelA = await one(
    `INSERT INTO channels (site_id, bot_id, telegram_chat_id, title) VALUES ($1, $2, -1009999999999, 'Busy') RETURNING id`,
    [siteId, botId],
  );
  const channelB = await one(
    `INSERT INTO channels (site_id, bot_id, telegram_chat_id, title) VALUES ($1, $2, -1009999999998, 'Busy VIP') RETURNING id`,
    [siteId, botId],
  );
  const pixelId = await one(
    `INSERT INTO pixels (site_id, platform, public_config, secrets_enc) VALUES ($1, 'meta', '{"pixelId":"1234567890"}', 'unused') RETURNING id`,
    [siteId],
  );

  const { rows: nonEmpty } = await pool.query<{ n: number }>(
    `SELECT (SELECT count(*) FROM visits) + (SELECT count(*) FROM conversions) AS n`,
  );
  if (Number(nonEmpty[0]!.n) !== 0) throw new Error('seedReportsHistory needs empty tables');
  const { rows: indexes } = await pool.query<{ name: string; def: string }>(
    `SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def
     FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace
     WHERE n.nspname = current_schema() AND t.relname = ANY($1)
       AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`,
    [TABLES],
  );
  const { rows: foreignKeys } = await pool.query<{ tbl: string; name: string; def: string }>(
    `SELECT c.conrelid::regclass::text AS tbl, c.conname AS name, pg_get_constraintdef(c.oid) AS def
     FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace
     WHERE n.nspname = current_schema() AND t.relname = ANY($1) AND c.contype = 'f'`,
    [TABLES],
  );
  for (const { name } of indexes) await pool.query(`DROP INDEX ${name}`);
  for (const { tbl, name } of foreignKeys) await pool.query(`ALTER TABLE ${tbl} DROP CONSTRAINT ${name}`);
  for (const [table, trigger] of TRIGGERS)
    await pool.query(`ALTER TABLE ${table} DISABLE TRIGGER ${trigger}`);

  const n = o.visits;
  const spanMs = o.days * 86_400_000;
  const endMs = Date.now() - 60_000;
  // The time of visit g (visits spread evenly, the last a minute ago).
  const at = `to_timestamp((${endMs - spanMs}::float8 + (g - 0.5) / ${n}::float8 * ${spanMs}::float8) / 1000)`;
  const visitId = (g: string) => `md5('v' || ${g})::uuid`;
  // A visit's channel: the second one for every fifth visit.
  const channel = `CASE WHEN g % 5 = 0 THEN $2::uuid ELSE $1::uuid END`;
  const user = `(${FIRST_USER}::bigint + g)`;
  // Attributed joins (g % 25 < 2) and organic ones (g % 50 = 7): the joined users of visit g.
  const joined = `(g % 25 < 2 OR g % 50 = 7)`;

  // With `campaigns`, each tagged visit belongs to one of that many campaigns (a quarter per
  // source, `benchCampaign`): its utm_campaign is the campaign's name, and its landing URL carries
  // the campaign's id as the platform's parameter (Meta alternately as utm_id), except in one
  // campaign in ten, whose ads carry no id: the ROI report matches its visits by name.
  const perSource = o.campaigns === undefined ? 0 : Math.ceil(o.campaigns / 4);
  const j = `((g::bigint * 7919) % ${Math.max(perSource, 1)})`;
  const utmCampaign =
    perSource === 0
      ? `src || '_' || (ARRAY['spring','summer','retarget','lookalike','brand','promo','video','carousel'])[(g::bigint * 7919) % 8 + 1]`
      : benchCampaign('src', j).name;
  const campaignParam =
    perSource === 0
      ? `''`
      : `CASE WHEN ${j} % 10 = 4 THEN '' ELSE '&' || CASE src WHEN 'fb' THEN CASE WHEN g % 2 = 0 THEN 'utm_id' ELSE 'fb_campaign_id' END
           WHEN 'google' THEN 'gad_campaignid' WHEN 'tiktok' THEN 'tt_campaign_id' ELSE 'sc_campaign_id' END || '=' || ${benchCampaign('src', j).id} END`;

  for (let from = 1; from <= n; from += CHUNK) {
    const to = Math.min(n, from + CHUNK - 1);
    const range = [from, to];
    await pool.query(
      `INSERT INTO visits (id, site_id, temp_id, session_id, visit_request_id, href, landing_page, referrer, client_ip, user_agent,
                           fbc, fbp, ttclid, gclid, gbraid, sccid, utm_source, utm_campaign, channel_id, created_at, updated_at)
       SELECT ${visitId('g')}, $3, gen_random_uuid(), gen_random_uuid(), gen_random_uuid(),
              'https://busy.example.com/l?' || q, '/l?' || q, r, '198.51.' || (g % 250) || '.' || (g % 199 + 1),
              'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) History/' || (g % 50),
              CASE WHEN src = 'fb' OR (src = 'tiktok' AND g % 3 = 0) THEN 'fb.1.1763776500000.IwAR' || g END, 'fb.1.1763776500000.' || g,
              CASE WHEN src = 'tiktok' THEN 'E.C.P.' || g END, CASE WHEN src = 'google' AND g % 10 <> 3 THEN 'Cj0KCQ' || g END,
              CASE WHEN src = 'google' AND g % 10 = 3 THEN 'GBr' || g END, CASE WHEN src = 'snapchat' THEN 'sc' || g END,
              src, CASE WHEN src IS NOT NULL THEN ${utmCampaign} END,
              ${channel}, t, t
       FROM generate_series($4::int, $5::int) g,
            LATERAL (SELECT ${at} AS t, CASE WHEN g % 20 < 9 THEN 'fb' WHEN g % 20 < 13 THEN 'tiktok' WHEN g % 20 < 17 THEN 'google'
                                            WHEN g % 20 = 17 THEN 'snapchat' END AS src) x,
            LATERAL (SELECT CASE WHEN src IS NULL THEN 'ref=' || g ELSE 'utm_source=' || src || ${campaignParam} || '&id=' || g END AS q,
                            CASE src WHEN 'fb' THEN 'https://l.facebook.com/' WHEN 'tiktok' THEN 'https://www.tiktok.com/'
                                     WHEN 'google' THEN 'https://www.google.com/' END AS r) y
       ORDER BY g`,
      [channelA, channelB, siteId, ...range],
    );
    await pool.query(
      `INSERT INTO invitations (id, channel_id, invite_link, creates_join_request, created_at, visit_id, assigned_at, used_at, used_by)
       SELECT md5('i' || g)::uuid, ${channel}, 'https://t.me/+hist' || g, false, t, ${visitId('g')}, t + interval '20 seconds',
              CASE WHEN g % 25 < 2 THEN t + interval '2 minutes' END, CASE WHEN g % 25 < 2 THEN ${user} END
       FROM generate_series($3::int, $4::int) g, LATERAL (SELECT ${at} AS t) x
       WHERE g % 25 < 4 ORDER BY g`,
      [channelA, channelB, ...range],
    );
    await pool.query(
      `WITH l AS (
         INSERT INTO leads (id, site_id, telegram_user_id, external_user_id, first_seen_at, last_seen_at)
         SELECT md5('l' || g)::uuid, $3, ${user}, 'crm-' || g, t + interval '2 minutes', t + interval '2 minutes'
         FROM generate_series($4::int, $5::int) g, LATERAL (SELECT ${at} AS t) x WHERE ${joined} ORDER BY g
         RETURNING id, telegram_user_id, first_seen_at
       )
       INSERT INTO memberships (channel_id, telegram_user_id, lead_id, kind, invitation_id, visit_id, attributed, occurred_at, created_at)
       SELECT ${channel}, ${user}, l.id, k.kind, CASE WHEN k.att THEN md5('i' || g)::uuid END, CASE WHEN k.att THEN ${visitId('g')} END, k.att, k.at, k.at
       FROM l, LATERAL (SELECT (l.telegram_user_id - ${FIRST_USER})::int AS g) x,
            LATERAL (VALUES ('join', g % 25 < 2, l.first_seen_at),
                            ('leave', false, l.first_seen_at + make_interval(hours => g % 900))) k (kind, att, at)
       WHERE k.kind = 'join' OR ((g / 50) % 10 = 3 AND k.at <= now())
       ORDER BY k.at`,
      [channelA, channelB, siteId, ...range],
    );
    await pool.query(
      `WITH c AS (
         INSERT INTO conversions (site_id, channel_id, lead_id, telegram_user_id, visit_id, event_type, value, currency, pii_hashed, client_ip, user_agent,
                                  event_source_url, event_time, attributed_at, received_at, created_at, updated_at, capi_status, source)
         SELECT $3, ${channel}, md5('l' || g)::uuid, ${user}, CASE WHEN g % 25 < 2 THEN ${visitId('g')} END,
                CASE k WHEN 1 THEN 'Lead' ELSE 'Purchase' END, CASE k WHEN 2 THEN 49.9 END, CASE WHEN k = 2 THEN CASE WHEN g % 3 = 0 THEN 'USD' ELSE 'EUR' END END,
                jsonb_build_object('em', md5(g::text) || md5((g + 1)::text)), '198.51.100.' || (g % 250), 'Mozilla/5.0 History', 'https://busy.example.com/thanks',
                c, c, c, c, c, 'sent', CASE k WHEN 1 THEN 'webhook' ELSE 'api' END
         FROM generate_series($4::int, $5::int) g, generate_series(1, 2) k,
              LATERAL (SELECT ${at} + CASE k WHEN 1 THEN interval '3 minutes' ELSE make_interval(mins => (g % 4320)::int) END AS c) x
         WHERE ${joined} AND c <= now() ORDER BY c
         RETURNING id, received_at
       )
       INSERT INTO sends (conversion_id, pixel_id, platform, event_id, status, attempts, created_at, updated_at, next_attempt_at, sent_at)
       SELECT id, $6, 'meta', 'cnv_' || id, 'sent', 1, received_at, received_at, received_at, received_at FROM c`,
      [channelA, channelB, siteId, ...range, pixelId],
    );
    o.log?.(`  visits ${to}/${n} (${((performance.now() - started) / 1000).toFixed(0)} s)`);
  }

  for (const [table, trigger] of TRIGGERS) await pool.query(`ALTER TABLE ${table} ENABLE TRIGGER ${trigger}`);
  const client = await pool.connect();
  try {
    await client.query(`SET maintenance_work_mem = '256MB'`);
    // Added back as they were; adding one checks every row against its referenced table.
    for (const { tbl, name, def } of foreignKeys)
      await client.query(`ALTER TABLE ${tbl} ADD CONSTRAINT ${name} ${def}`);
    o.log?.(`  foreign keys (${((performance.now() - started) / 1000).toFixed(0)} s)`);
    for (const { name, def } of indexes) {
      await client.query(def);
      o.log?.(`  index ${name} (${((performance.now() - started) / 1000).toFixed(0)} s)`);
    }
    await client.query('RESET maintenance_work_mem');
  } finally {
    client.release();
  }
  await pool.query('VACUUM ANALYZE');
  const { rows } = await pool.query<ReportsHistory['rows']>(
    `SELECT (SELECT count(*)::int FROM visits WHERE site_id = $1) AS visits,
            (SELECT count(*)::int FROM invitations i JOIN channels c ON c.id = i.channel_id WHERE c.site_id = $1 AND i.assigned_at IS NOT NULL) AS "inviteClicks",
            (SELECT count(*)::int FROM memberships m JOIN channels c ON c.id = m.channel_id WHERE c.site_id = $1 AND m.kind = 'join') AS joins,
            (SELECT count(*)::int FROM memberships m JOIN channels c ON c.id = m.channel_id WHERE c.site_id = $1 AND m.kind = 'leave') AS leaves,
            (SELECT count(*)::int FROM conversions WHERE site_id = $1) AS conversions`,
    [siteId],
  );
  return { siteId, seconds: (performance.now() - started) / 1000, rows: rows[0]! };
}
