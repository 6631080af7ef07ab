-- The ROI report (docs/spend.md) reads the funnel's roll-up with one more group: the campaign key
-- of the visit each fact traces to (`visit_campaign_key` of its landing URL, or of its page when it
-- has none): `utm_id`, else the platform's own campaign parameter. A visit without a key keeps its
-- utm_campaign, which the report matches with a campaign's name when it reads. Computing the key
-- when a day is folded, not on track/init, keeps the write path as it was; the ROI report then reads
-- a few rows per day and campaign, as the funnel does, whatever the length of the history.

ALTER TABLE report_rows ADD COLUMN campaign_key text;

-- The funnel of a site for the instants [p_t0, p_t1), from the raw rows, by UTC day and campaign key.
DROP FUNCTION report_compute_at(uuid, timestamptz, timestamptz);
CREATE FUNCTION report_compute_at(p_site uuid, p_t0 timestamptz, p_t1 timestamptz)
RETURNS TABLE (day date, channel_id uuid, utm_source text, utm_campaign text, platform text,
  visits bigint, invite_clicks bigint, joins bigint, attributed_joins bigint, conversions bigint,
  currency text, value numeric, leaves bigint, join_day date, lasted_days integer, campaign_key text)
LANGUAGE sql STABLE AS $$
  WITH b AS (
    SELECT p_t0 AS t0, p_t1 AS t1
  ), ch AS (
    SELECT id FROM channels WHERE site_id = p_site
  ), facts AS (
    SELECT (v.created_at AT TIME ZONE 'UTC')::date AS day, v.channel_id, v.utm_source, v.utm_campaign,
           report_platform(v.fbc, v.ttclid, v.gclid, v.gbraid, v.wbraid, v.sccid) AS platform,
           1 AS visits, 0 AS invite_clicks, 0 AS joins, 0 AS attributed_joins, 0 AS conversions,
           NULL::text AS currency, NULL::numeric AS value, 0 AS leaves, NULL::date AS join_day, NULL::integer AS lasted_days,
           visit_campaign_key(COALESCE(v.landing_page, v.href)) AS campaign_key
    FROM visits v, b WHERE v.site_id = p_site AND v.created_at >= b.t0 AND v.created_at < b.t1
    UNION ALL
    SELECT (i.assigned_at AT TIME ZONE 'UTC')::date, i.channel_id, v.utm_source, v.utm_campaign,
           report_platform(v.fbc, v.ttclid, v.gclid, v.gbraid, v.wbraid, v.sccid),
           0, 1, 0, 0, 0, NULL, NULL, 0, NULL, NULL, visit_campaign_key(COALESCE(v.landing_page, v.href))
    FROM b, ch JOIN invitations i ON i.channel_id = ch.id LEFT JOIN visits v ON v.id = i.visit_id
    WHERE i.assigned_at >= b.t0 AND i.assigned_at < b.t1
    UNION ALL
    -- An organic join is grouped as organic even when it names a visit (a second join through a
    -- link already credited): only an attributed join carries its visit's campaign.
    SELECT (m.occurred_at AT TIME ZONE 'UTC')::date, m.channel_id, v.utm_source, v.utm_campaign,
           CASE WHEN m.attributed THEN report_platform(v.fbc, v.ttclid, v.gclid, v.gbraid, v.wbraid, v.sccid) ELSE 'none' END,
           0, 0, 1, CASE WHEN m.attributed THEN 1 ELSE 0 END, 0, NULL, NULL, 0, NULL, NULL, visit_campaign_key(COALESCE(v.landing_page, v.href))
    FROM b, ch JOIN memberships m ON m.channel_id = ch.id LEFT JOIN visits v ON m.attributed AND v.id = m.visit_id
    WHERE m.kind = 'join' AND m.occurred_at >= b.t0 AND m.occurred_at < b.t1
    UNION ALL
    SELECT (c.received_at AT TIME ZONE 'UTC')::date, c.channel_id, v.utm_source, v.utm_campaign,
           CASE WHEN v.id IS NULL THEN 'none' ELSE report_platform(v.fbc, v.ttclid, v.gclid, v.gbraid, v.wbraid, v.sccid) END,
           0, 0, 0, 0, 1, CASE WHEN c.value IS NOT NULL THEN c.currency END, c.value, 0, NULL, NULL, visit_campaign_key(COALESCE(v.landing_page, v.href))
    FROM conversions c CROSS JOIN b LEFT JOIN visits v ON v.id = c.visit_id
    WHERE c.site_id = p_site AND c.received_at >= b.t0 AND c.received_at < b.t1
    UNION ALL
    -- A leave ends the user's latest join of that channel, and is grouped as that join was.
    SELECT (l.occurred_at AT TIME ZONE 'UTC')::date, l.channel_id, v.utm_source, v.utm_campaign,
           CASE WHEN j.attributed THEN report_platform(v.fbc, v.ttclid, v.gclid, v.gbraid, v.wbraid, v.sccid) ELSE 'none' END,
           0, 0, 0, 0, 0, NULL, NULL, 1, (j.occurred_at AT TIME ZONE 'UTC')::date,
           floor(extract(epoch FROM l.occurred_at - j.occurred_at) / 86400)::integer, visit_campaign_key(COALESCE(v.landing_page, v.href))
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
         currency, sum(value), sum(leaves), join_day, lasted_days, campaign_key
  FROM facts
  GROUP BY day, channel_id, COALESCE(utm_source, ''), COALESCE(utm_campaign, ''), platform, currency, join_day, lasted_days, campaign_key
$$;

-- Days folded before this column existed have no campaign key. The last 92 (the 90 days a spend
-- source's import goes back, and a margin) are counted again, a day at a time, by the job's next
-- run (domain/reports/rollup.ts reseals dirty days), and read live until then; their raw rows are
-- still whole (RETENTION_DAYS, 400 by default, clears URLs and click ids only of older visits).
-- Older days keep their counts as folded: recounting them could move visits whose identifiers
-- were cleared to no platform. Their visits belong to no campaign in the ROI report.
INSERT INTO report_dirty (site_id, day)
SELECT DISTINCT site_id, day FROM report_rows WHERE day >= current_date - 92
ON CONFLICT DO NOTHING;
