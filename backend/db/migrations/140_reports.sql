-- Reports: the funnel (visits, invite clicks, joins, leaves, conversions, value) per site, day and
-- group, kept as daily roll-ups (docs/reports.md).
--
-- Why a roll-up and not counters: a counter row per (site, day, group) updated by every
-- track/init would be one hot row under concurrent visits of a site. Instead the write paths stay
-- as they are, and a scheduled job folds whole past days ("sealing" them) into `report_rows`; the
-- report reads sealed days from there and the few days not sealed yet live from the raw rows,
-- through the same function (`report_compute`), so both always count alike.

-- Which ad platform a visit came from, by the click id it carries. fbc is last: Meta's `_fbc`
-- cookie outlives its click for 90 days, so a visit from another platform's ad often still has one.
CREATE FUNCTION report_platform(fbc text, ttclid text, gclid text, gbraid text, wbraid text, sccid text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN ttclid IS NOT NULL THEN 'tiktok'
    WHEN gclid IS NOT NULL OR gbraid IS NOT NULL OR wbraid IS NOT NULL THEN 'google'
    WHEN sccid IS NOT NULL THEN 'snapchat'
    WHEN fbc IS NOT NULL THEN 'meta'
    ELSE 'none'
  END
$$;

-- One row per site, UTC day and group (channel, utm_source, utm_campaign, platform), and within
-- a group per conversion currency and per (join day, days a member) of the leaves. Every column
-- is additive, so any coarser grouping is a sum.
CREATE TABLE report_rows (
  site_id           uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  day               date NOT NULL,
  channel_id        uuid,
  utm_source        text NOT NULL,
  utm_campaign      text NOT NULL,
  platform          text NOT NULL,
  visits            bigint NOT NULL,
  invite_clicks     bigint NOT NULL,
  joins             bigint NOT NULL,
  attributed_joins  bigint NOT NULL,
  conversions       bigint NOT NULL,
  currency          text,              -- conversions with a value in this currency
  value             numeric,
  leaves            bigint NOT NULL,
  join_day          date,              -- leaves: the day of the join they ended (null: joined before any record)
  lasted_days       integer            -- leaves: whole days between that join and the leave
);
CREATE INDEX report_rows_site_day ON report_rows (site_id, day);

-- Days of a site before `sealed_before` are in report_rows (except those in report_dirty).
CREATE TABLE report_sealed (
  site_id        uuid PRIMARY KEY REFERENCES sites(id) ON DELETE CASCADE,
  sealed_before  date NOT NULL
);

-- Sealed days that a late row changed (a conversion's value set days later, a Telegram update
-- delivered late): read live until the job seals them again.
CREATE TABLE report_dirty (
  site_id  uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  day      date NOT NULL,
  PRIMARY KEY (site_id, day)
);

-- Memberships of a channel by time (the report reads a site's joins and leaves of a few days);
-- invitations handed out by time. Neither is on the track/init path.
CREATE INDEX memberships_channel_time ON memberships (channel_id, occurred_at);
CREATE INDEX invitations_channel_assigned ON invitations (channel_id, assigned_at) WHERE assigned_at IS NOT NULL;

-- The funnel of a site for the UTC days [p_from, p_to], from the raw rows.
CREATE FUNCTION report_compute(p_site uuid, p_from date, p_to date)
RETURNS TABLE (day date, channel_id uuid, utm_source text, utm_campaign text, platform text,
  visits bigint, invite_clicks bigint, joins bigint, attributed_joins bigint, conversions bigint,
  currency text, value numeric, leaves bigint, join_day date, lasted_days integer)
LANGUAGE sql STABLE AS $$
  WITH b AS (
    SELECT (p_from::timestamp AT TIME ZONE 'UTC') AS t0, ((p_to + 1)::timestamp AT TIME ZONE 'UTC') AS t1
  ), ch AS (
    SELECT id FROM channels WHERE site_id = p_site
  ), facts AS (
    SELECT (v.created_at AT TIME ZONE 'UTC')::date AS day, v.channel_id, v.utm_source, v.utm_campaign,
           report_platform(v.fbc, v.ttclid, v.gclid, v.gbraid, v.wbraid, v.sccid) AS platform,
           1 AS visits, 0 AS invite_clicks, 0 AS joins, 0 AS attributed_joins, 0 AS conversions,
           NULL::text AS currency, NULL::numeric AS value, 0 AS leaves, NULL::date AS join_day, NULL::integer AS lasted_days
    FROM visits v, b WHERE v.site_id = p_site AND v.created_at >= b.t0 AND v.created_at < b.t1
    UNION ALL
    SELECT (i.assigned_at AT TIME ZONE 'UTC')::date, i.channel_id, v.utm_source, v.utm_campaign,
           report_platform(v.fbc, v.ttclid, v.gclid, v.gbraid, v.wbraid, v.sccid),
           0, 1, 0, 0, 0, NULL, NULL, 0, NULL, NULL
    FROM b, ch JOIN invitations i ON i.channel_id = ch.id LEFT JOIN visits v ON v.id = i.visit_id
    WHERE i.assigned_at >= b.t0 AND i.assigned_at < b.t1
    UNION ALL
    -- An organic join is grouped as organic even when it names a visit (a second join through a
    -- link already credited): only an attributed join carries its visit's campaign.
    SELECT (m.occurred_at AT TIME ZONE 'UTC')::date, m.channel_id, v.utm_source, v.utm_campaign,
           CASE WHEN m.attributed THEN report_platform(v.fbc, v.ttclid, v.gclid, v.gbraid, v.wbraid, v.sccid) ELSE 'none' END,
           0, 0, 1, CASE WHEN m.attributed THEN 1 ELSE 0 END, 0, NULL, NULL, 0, NULL, NULL
    FROM b, ch JOIN memberships m ON m.channel_id = ch.id LEFT JOIN visits v ON m.attributed AND v.id = m.visit_id
    WHERE m.kind = 'join' AND m.occurred_at >= b.t0 AND m.occurred_at < b.t1
    UNION ALL
    SELECT (c.received_at AT TIME ZONE 'UTC')::date, c.channel_id, v.utm_source, v.utm_campaign,
           CASE WHEN v.id IS NULL THEN 'none' ELSE report_platform(v.fbc, v.ttclid, v.gclid, v.gbraid, v.wbraid, v.sccid) END,
           0, 0, 0, 0, 1, CASE WHEN c.value IS NOT NULL THEN c.currency END, c.value, 0, NULL, NULL
    FROM conversions c CROSS JOIN b LEFT JOIN visits v ON v.id = c.visit_id
    WHERE c.site_id = p_site AND c.received_at >= b.t0 AND c.received_at < b.t1
    UNION ALL
    -- A leave ends the user's latest join of that channel, and is grouped as that join was.
    SELECT (l.occurred_at AT TIME ZONE 'UTC')::date, l.channel_id, v.utm_source, v.utm_campaign,
           CASE WHEN j.attributed THEN report_platform(v.fbc, v.ttclid, v.gclid, v.gbraid, v.wbraid, v.sccid) ELSE 'none' END,
           0, 0, 0, 0, 0, NULL, NULL, 1, (j.occurred_at AT TIME ZONE 'UTC')::date,
           floor(extract(epoch FROM l.occurred_at - j.occurred_at) / 86400)::integer
    FROM b, ch JOIN memberships l ON l.channel_id = ch.id
    LEFT JOIN LATERAL (
      SELECT j.occurred_at, j.visit_id, j.attributed FROM memberships j
      WHERE j.telegram_user_id = l.telegram_user_id AND j.channel_id = l.channel_id AND j.kind = 'join' AND j.occurred_at <= l.occurred_at
      ORDER BY j.occurred_at DESC LIMIT 1
    ) j ON true
    LEFT JOIN visits v ON j.attributed AND v.id = j.visit_id
    WHERE l.kind = 'leave' AND l.occurred_at >= b.t0 AND l.occurred_at < b.t1
  )
  SELECT day, channel_id, COALESCE(utm_source, ''), COALESCE(utm_campaign, ''), platform,
         sum(visits), sum(invite_clicks), sum(joins), sum(attributed_joins), sum(conversions),
         currency, sum(value), sum(leaves), join_day, lasted_days
  FROM facts
  GROUP BY day, channel_id, COALESCE(utm_source, ''), COALESCE(utm_campaign, ''), platform, currency, join_day, lasted_days
$$;

-- Marks the day of a late row dirty when that day is already sealed. Called only for rows dated
-- more than 30 minutes back (the triggers' WHEN): a Telegram update delivered late, a value set
-- days later. Days are sealed an hour after they end (domain/reports/rollup.ts): a row dated
-- within the last 30 minutes, in a transaction shorter than that, can never fall in a sealed day.
-- The share lock on the site's report_sealed row orders this with a seal in progress: either the
-- seal waits for this row's commit and counts it, or this waits for the seal and marks the day.
CREATE FUNCTION report_mark_dirty(p_site uuid, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM report_sealed WHERE site_id = p_site FOR SHARE;
  INSERT INTO report_dirty (site_id, day)
  SELECT p_site, (p_at AT TIME ZONE 'UTC')::date
  FROM report_sealed s WHERE s.site_id = p_site AND (p_at AT TIME ZONE 'UTC')::date < s.sealed_before
  ON CONFLICT DO NOTHING;
END $$;

-- Visits have no such trigger: track/init, the hottest write path, stays as it was. A visit's
-- created_at is always the time of its own transaction (no code path sets it), so a visit can
-- never land in a sealed day.

CREATE FUNCTION report_late_membership() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM report_mark_dirty((SELECT site_id FROM channels WHERE id = NEW.channel_id), NEW.occurred_at);
  RETURN NULL;
END $$;
CREATE TRIGGER report_late_membership AFTER INSERT ON memberships FOR EACH ROW
  WHEN (NEW.occurred_at < now() - interval '30 minutes') EXECUTE FUNCTION report_late_membership();

CREATE FUNCTION report_late_invitation() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM report_mark_dirty((SELECT site_id FROM channels WHERE id = NEW.channel_id), NEW.assigned_at);
  RETURN NULL;
END $$;
CREATE TRIGGER report_late_invitation AFTER INSERT OR UPDATE OF assigned_at ON invitations FOR EACH ROW
  WHEN (NEW.assigned_at < now() - interval '30 minutes') EXECUTE FUNCTION report_late_invitation();

-- A conversion counts on the day it was received; its value may be set days later (a manual
-- value), which changes that day.
CREATE FUNCTION report_late_conversion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM report_mark_dirty(NEW.site_id, NEW.received_at);
  RETURN NULL;
END $$;
CREATE TRIGGER report_late_conversion AFTER INSERT ON conversions FOR EACH ROW
  WHEN (NEW.received_at < now() - interval '30 minutes') EXECUTE FUNCTION report_late_conversion();
CREATE TRIGGER report_conversion_value AFTER UPDATE OF value, currency ON conversions FOR EACH ROW
  WHEN ((OLD.value IS DISTINCT FROM NEW.value OR OLD.currency IS DISTINCT FROM NEW.currency)
        AND NEW.received_at < now() - interval '30 minutes') EXECUTE FUNCTION report_late_conversion();
