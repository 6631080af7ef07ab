-- Capigram's schema: every entity of the interface, so that later work adds behaviour, not tables.
-- Ids are UUIDs (opaque to callers). Raw PII never lands here: conversions hold SHA-256 hashes.

CREATE TABLE accounts (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sites (
  id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id            uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  website_id            text NOT NULL UNIQUE,               -- the public identifier used by browsers
  name                  text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  url                   text,
  domains               text[] NOT NULL CHECK (cardinality(domains) >= 1),
  default_channel_id    uuid,                               -- FK added below (channels reference sites)
  dedup_window_seconds  integer NOT NULL DEFAULT 86400 CHECK (dedup_window_seconds >= 0),
  settings              jsonb NOT NULL DEFAULT '{}',
  created_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sites_account ON sites (account_id);

CREATE TABLE api_keys (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id    uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  site_id       uuid REFERENCES sites(id) ON DELETE CASCADE,  -- NULL: account-scoped
  name          text,
  prefix        text NOT NULL UNIQUE,                         -- public part, for look-up
  secret_hash   bytea NOT NULL,                               -- SHA-256 of the whole key
  created_at    timestamptz NOT NULL DEFAULT now(),
  revoked_at    timestamptz,
  last_used_at  timestamptz
);
CREATE INDEX api_keys_account ON api_keys (account_id);

CREATE TABLE bots (
  id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  account_id           uuid NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  telegram_bot_id      bigint NOT NULL,
  username             text,
  token_enc            text NOT NULL,                         -- AES-256-GCM with SECRET_KEY
  webhook_secret_hash  bytea NOT NULL,                        -- SHA-256 of the secret given to setWebhook
  webhook_url          text,
  webhook_set_at       timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now(),
  UNIQUE (account_id, telegram_bot_id)
);

CREATE TABLE channels (
  id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  site_id             uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  bot_id              uuid NOT NULL REFERENCES bots(id),
  telegram_chat_id    bigint NOT NULL,
  title               text NOT NULL CHECK (length(title) BETWEEN 1 AND 255),
  username            text,
  funnel_order        integer NOT NULL DEFAULT 0,
  event_type          text NOT NULL DEFAULT 'Subscribe'
                      CHECK (event_type IN ('Contact','Lead','Purchase','CompleteRegistration','Subscribe','Custom')),
  custom_event_name   text,
  fixed_value         numeric(18,4) CHECK (fixed_value IS NULL OR fixed_value >= 0),
  fixed_currency      char(3),
  manual_value        boolean NOT NULL DEFAULT false,
  invite_mode         text NOT NULL DEFAULT 'member_limit' CHECK (invite_mode IN ('member_limit','join_request')),
  invite_ttl_seconds  integer NOT NULL DEFAULT 86400 CHECK (invite_ttl_seconds > 0),
  pool_target         integer NOT NULL DEFAULT 20 CHECK (pool_target BETWEEN 0 AND 1000),
  public_invite_url   text,                                   -- fallback when Telegram is unreachable
  bot_status          text,                                   -- the bot's chat member status, from my_chat_member
  bot_is_admin        boolean,
  bot_can_invite      boolean,
  bot_status_at       timestamptz,
  active              boolean NOT NULL DEFAULT true,
  created_at          timestamptz NOT NULL DEFAULT now(),
  UNIQUE (site_id, telegram_chat_id)
);
CREATE INDEX channels_chat ON channels (bot_id, telegram_chat_id);
ALTER TABLE sites ADD CONSTRAINT sites_default_channel_fk
  FOREIGN KEY (default_channel_id) REFERENCES channels(id) ON DELETE SET NULL;

CREATE TABLE pixels (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  site_id          uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  platform         text NOT NULL CHECK (platform IN ('meta','tiktok','snapchat','google')),
  public_config    jsonb NOT NULL,                            -- pixel id / customer id: not secret
  secrets_enc      text NOT NULL,                             -- access tokens, AES-256-GCM with SECRET_KEY
  test_event_code  text,
  active           boolean NOT NULL DEFAULT true,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pixels_site ON pixels (site_id) WHERE active;

CREATE TABLE visits (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  site_id           uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  temp_id           uuid NOT NULL,
  session_id        uuid NOT NULL,
  visit_request_id  uuid,
  kind              text NOT NULL DEFAULT 'pageview' CHECK (kind IN ('pageview','direct_invite','redirect')),
  href              text,
  landing_page      text,
  referrer          text,
  client_ip         text,
  user_agent        text,
  fbc               text,
  fbp               text,
  gclid             text,
  ttclid            text,
  sccid             text,
  utm_source        text,
  utm_medium        text,
  utm_campaign      text,
  utm_content       text,
  utm_term          text,
  channel_id        uuid REFERENCES channels(id) ON DELETE SET NULL,  -- routing, fixed by the first call
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  UNIQUE (site_id, visit_request_id)
);
CREATE INDEX visits_browser ON visits (site_id, temp_id, created_at DESC);
CREATE INDEX visits_session ON visits (site_id, session_id, created_at DESC);

CREATE TABLE invitations (
  id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  channel_id            uuid NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
  invite_link           text NOT NULL UNIQUE,
  name                  text,
  creates_join_request  boolean NOT NULL DEFAULT false,
  expires_at            timestamptz,
  created_at            timestamptz NOT NULL DEFAULT now(),
  visit_id              uuid REFERENCES visits(id) ON DELETE SET NULL,
  assigned_at           timestamptz,
  used_at               timestamptz,
  used_by               bigint,                               -- Telegram user id
  revoked_at            timestamptz,
  unattributed          boolean NOT NULL DEFAULT false        -- the channel's public link handed out as a fallback
);
CREATE INDEX invitations_pool ON invitations (channel_id, expires_at) WHERE visit_id IS NULL AND revoked_at IS NULL;
CREATE INDEX invitations_visit ON invitations (visit_id);

CREATE TABLE leads (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  site_id           uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  telegram_user_id  bigint NOT NULL,
  external_user_id  text,
  first_seen_at     timestamptz NOT NULL DEFAULT now(),
  last_seen_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (site_id, telegram_user_id)
);
CREATE INDEX leads_user ON leads (telegram_user_id);

-- Joins, leaves and join requests per channel; an attributed join names the invitation and visit.
CREATE TABLE memberships (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  channel_id        uuid NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
  telegram_user_id  bigint NOT NULL,
  lead_id           uuid REFERENCES leads(id) ON DELETE SET NULL,
  kind              text NOT NULL CHECK (kind IN ('join','leave','join_request','approved')),
  invitation_id     uuid REFERENCES invitations(id) ON DELETE SET NULL,
  visit_id          uuid REFERENCES visits(id) ON DELETE SET NULL,
  attributed        boolean NOT NULL DEFAULT false,
  via_join_request  boolean NOT NULL DEFAULT false,
  occurred_at       timestamptz NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memberships_user ON memberships (telegram_user_id, channel_id, occurred_at DESC);

CREATE TABLE conversions (
  id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  site_id                uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  channel_id             uuid REFERENCES channels(id) ON DELETE SET NULL,
  lead_id                uuid REFERENCES leads(id) ON DELETE SET NULL,
  telegram_user_id       bigint NOT NULL,
  visit_id               uuid REFERENCES visits(id) ON DELETE SET NULL,
  event_type             text NOT NULL
                         CHECK (event_type IN ('Contact','Lead','Purchase','CompleteRegistration','Subscribe','Custom')),
  custom_event_name      text,
  value                  numeric(18,4),
  currency               char(3),
  content_name           text,
  pii_hashed             jsonb NOT NULL DEFAULT '{}',         -- SHA-256 hex only, never raw values
  external_user_id       text,
  event_source_url       text,
  client_ip              text,
  user_agent             text,
  api_visit_override     jsonb,                               -- cold lead: fbc, fbp, clientIp, userAgent, click ids
  cold_lead              boolean NOT NULL DEFAULT false,
  event_time             timestamptz NOT NULL,
  attributed_at          timestamptz NOT NULL,
  received_at            timestamptz NOT NULL DEFAULT now(),
  capi_status            text NOT NULL DEFAULT 'pending' CHECK (capi_status IN ('pending','sent','failed','skipped')),
  awaiting_manual_input  boolean NOT NULL DEFAULT false,
  source                 text NOT NULL CHECK (source IN ('tracker','webhook','api')),
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversions_match ON conversions (site_id, telegram_user_id, channel_id, event_type, received_at DESC);
CREATE INDEX conversions_user ON conversions (telegram_user_id, received_at DESC);

-- One row per platform dispatch. A send's subject is a conversion, or a visit (the PageView outbox).
CREATE TABLE sends (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  conversion_id     uuid REFERENCES conversions(id) ON DELETE CASCADE,
  visit_id          uuid REFERENCES visits(id) ON DELETE CASCADE,
  pixel_id          uuid NOT NULL REFERENCES pixels(id) ON DELETE CASCADE,
  platform          text NOT NULL CHECK (platform IN ('meta','tiktok','snapchat','google')),
  event_id          text NOT NULL,                           -- stable across retries: the platform dedups on it
  status            text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending','sent','failed','skipped')),
  attempts          integer NOT NULL DEFAULT 0,
  last_error        text,
  skip_reason       text,
  response_summary  jsonb,
  next_attempt_at   timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  sent_at           timestamptz,
  CHECK ((conversion_id IS NULL) <> (visit_id IS NULL)),
  UNIQUE (conversion_id, pixel_id),
  UNIQUE (visit_id, pixel_id)
);
CREATE INDEX sends_status ON sends (status, created_at);
CREATE INDEX sends_pixel_pending ON sends (pixel_id, created_at) WHERE status = 'pending';

CREATE TABLE idempotency_keys (
  api_key_id     uuid NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
  key            text NOT NULL CHECK (length(key) BETWEEN 1 AND 128),
  status_code    integer,                                    -- NULL while the first request executes
  response_body  jsonb,
  created_at     timestamptz NOT NULL DEFAULT now(),
  completed_at   timestamptz,
  PRIMARY KEY (api_key_id, key)
);
CREATE INDEX idempotency_keys_age ON idempotency_keys (created_at);

CREATE TABLE telegram_updates (
  bot_id       uuid NOT NULL REFERENCES bots(id) ON DELETE CASCADE,
  update_id    bigint NOT NULL,
  kind         text,
  received_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (bot_id, update_id)
);
