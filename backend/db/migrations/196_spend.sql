-- Ad spend beside the funnel (docs/spend.md): the sources a site's spend is read from, and the
-- spend of each campaign (and ad set) per day in the account's currency.
--
-- A source's credentials are sealed like a pixel's token (crypto/secret-box.ts). `status` is ok or
-- failing (the platform refused the credentials, or the last import failed), with the platform's
-- reason in `last_error`; `progress` holds where an interrupted import goes on.
CREATE TABLE spend_sources (
  id              uuid PRIMARY KEY DEFAULT capigram_uuid_v7(),
  site_id         uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  platform        text NOT NULL CHECK (platform IN ('meta', 'google', 'tiktok', 'snapchat')),
  account_ref     text NOT NULL,              -- act_N, customer id, advertiser id, ad account id
  credentials     text NOT NULL,              -- sealed JSON
  currency        text,                       -- the account's currency, as the platform reports it
  time_zone       text,                       -- the account's time zone: its days are the platform's days
  status          text NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'failing')),
  last_error      text,
  last_synced_at  timestamptz,
  backfilled      boolean NOT NULL DEFAULT false,
  progress        jsonb,                      -- the next page of an import in progress
  created_at      timestamptz NOT NULL DEFAULT now(),
  removed_at      timestamptz,
  UNIQUE (site_id, platform, account_ref)
);

-- One row per source, day, campaign and ad set ('' for spend read per campaign). An import writes
-- with ON CONFLICT DO UPDATE, so a day the platform restated replaces what was read before.
CREATE TABLE spend_daily (
  source_id      uuid NOT NULL REFERENCES spend_sources(id) ON DELETE CASCADE,
  day            date NOT NULL,
  campaign_id    text NOT NULL,
  ad_set_id      text NOT NULL DEFAULT '',
  campaign_name  text NOT NULL DEFAULT '',
  currency       text NOT NULL,
  spend          numeric(18, 4) NOT NULL,
  impressions    bigint NOT NULL DEFAULT 0,
  clicks         bigint NOT NULL DEFAULT 0,
  updated_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (source_id, day, campaign_id, ad_set_id)
);
CREATE INDEX spend_daily_day ON spend_daily (source_id, day);

-- A visit's campaign key, read from its landing URL when a report folds it (track/init writes
-- nothing more): `utm_id`, else the platform's own campaign parameter — Google's auto-tagged
-- `gad_campaignid` or the ValueTrack `campaignid={campaignid}`, and the parameters docs/spend.md
-- asks to set in Meta (`fb_campaign_id={{campaign.id}}`), TikTok (`tt_campaign_id=__CAMPAIGN_ID__`)
-- and Snapchat (`sc_campaign_id={{campaign.id}}`). An unexpanded macro ({{campaign.id}}, __CAMPAIGN_ID__) is no key. Null: none; the report then matches the
-- visit's utm_campaign with a campaign's name. Kept equal to domain/spend/campaign-key.ts.
CREATE FUNCTION visit_campaign_key(url text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT NULLIF(COALESCE(
    (regexp_match(url, '[?&]utm_id=([A-Za-z0-9._~-]+)(&|#|$)'))[1],
    (regexp_match(url, '[?&]gad_campaignid=([0-9]+)(&|#|$)'))[1],
    (regexp_match(url, '[?&]campaignid=([0-9]+)(&|#|$)'))[1],
    (regexp_match(url, '[?&]fb_campaign_id=([0-9]+)(&|#|$)'))[1],
    (regexp_match(url, '[?&]tt_campaign_id=([0-9]+)(&|#|$)'))[1],
    (regexp_match(url, '[?&]sc_campaign_id=([0-9a-fA-F-]+)(&|#|$)'))[1]
  ), '')
$$;
