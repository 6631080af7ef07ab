-- Reports: today is folded in parts as it goes, so that a report reads at most the last hour or
-- so live whatever the time of day (docs/reports.md, domain/reports/rollup.ts).
--
-- A site's roll-up now has a watermark, `folded_until` (an instant, not a day): every row dated
-- before it is counted in report_rows. Past days are folded whole as before; the current day is
-- folded every quarter hour up to half an hour ago, each part appended to the day's rows (every
-- column is additive), and once the day is over its parts are replaced by one count of the whole
-- day. A report reads report_rows, and live only what lies after the watermark and the dirty days.

ALTER TABLE report_sealed ADD COLUMN folded_until timestamptz;
UPDATE report_sealed SET folded_until = sealed_before::timestamp AT TIME ZONE 'UTC';
ALTER TABLE report_sealed ALTER COLUMN folded_until SET NOT NULL;
ALTER TABLE report_sealed DROP COLUMN sealed_before;

-- The funnel of a site for the instants [p_t0, p_t1), from the raw rows, by UTC day.
DROP FUNCTION report_compute(uuid, date, date);
CREATE FUNCTION report_compute_at(p_site uuid, p_t0 timestamptz, p_t1 timestamptz)
RETURNS TABLE (day date, channel_id uuid, utm_source text, utm_campaign text, platform text,
  visits bigint, invite_clicks bigint, joins bigint, attributed_joins bigint, conversions bigint,
  currency text, value numeric, leaves bigint, join_day date, lasted_days integer)
LANGUAGE sql STABLE AS $$
  WITH b AS (
    SELECT p_t0 AS t0, p_t1 AS t1
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

-- A late row marks its day dirty when it falls before the watermark. The share lock on the site's
-- report_sealed row orders this with a fold in progress: either the fold waits for this row's
-- commit and counts it, or this waits for the fold and marks the day.
CREATE OR REPLACE FUNCTION report_mark_dirty(p_site uuid, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM report_sealed WHERE site_id = p_site FOR SHARE;
  INSERT INTO report_dirty (site_id, day)
  SELECT p_site, (p_at AT TIME ZONE 'UTC')::date
  FROM report_sealed s WHERE s.site_id = p_site AND p_at < s.folded_until
  ON CONFLICT DO NOTHING;
END $$;

-- The triggers run for rows dated more than 10 minutes back (they were 30): the watermark stays
-- 30 minutes behind the fold's clock, so a row dated within the last 10 minutes, in a transaction
-- shorter than 20 minutes, can never fall before it.
DROP TRIGGER report_late_membership ON memberships;
CREATE TRIGGER report_late_membership AFTER INSERT ON memberships FOR EACH ROW
  WHEN (NEW.occurred_at < now() - interval '10 minutes') EXECUTE FUNCTION report_late_membership();
DROP TRIGGER report_late_invitation ON invitations;
CREATE TRIGGER report_late_invitation AFTER INSERT OR UPDATE OF assigned_at ON invitations FOR EACH ROW
  WHEN (NEW.assigned_at < now() - interval '10 minutes') EXECUTE FUNCTION report_late_invitation();
DROP TRIGGER report_late_conversion ON conversions;
CREATE TRIGGER report_late_conversion AFTER INSERT ON conversions FOR EACH ROW
  WHEN (NEW.received_at < now() - interval '10 minutes') EXECUTE FUNCTION report_late_conversion();
DROP TRIGGER report_conversion_value ON conversions;
CREATE TRIGGER report_conversion_value AFTER UPDATE OF value, currency ON conversions FOR EACH ROW
  WHEN ((OLD.value IS DISTINCT FROM NEW.value OR OLD.currency IS DISTINCT FROM NEW.currency)
        AND NEW.received_at < now() - interval '10 minutes') EXECUTE FUNCTION report_late_conversion();
