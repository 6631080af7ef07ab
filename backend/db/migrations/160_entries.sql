-- Entries: a site sends visitors to a bot (`start`) or to a bot's Mini App (`app`) as it sends them
-- to a channel. Each click hands out a fresh payload; `/start <payload>` (or a Mini App opened with
-- it) ties the click's visit to the Telegram user.

CREATE TABLE entries (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  site_id            uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  bot_id             uuid NOT NULL REFERENCES bots(id),
  kind               text NOT NULL DEFAULT 'start' CHECK (kind IN ('start','app')),
  app_short_name     text CHECK (app_short_name ~ '^[A-Za-z0-9_]{3,30}$'),
  -- NULL: the entry ties the visitor to the Telegram user and sends nothing.
  event_type         text CHECK (event_type IN ('Contact','Lead','Purchase','CompleteRegistration','Subscribe','Custom')),
  custom_event_name  text,
  fixed_value        numeric(18,4) CHECK (fixed_value IS NULL OR fixed_value >= 0),
  fixed_currency     char(3),
  channel_id         uuid REFERENCES channels(id) ON DELETE SET NULL,
  welcome_text       text CHECK (length(welcome_text) BETWEEN 1 AND 4096),
  is_default         boolean NOT NULL DEFAULT false,
  active             boolean NOT NULL DEFAULT true,
  created_at         timestamptz NOT NULL DEFAULT now(),
  CHECK ((kind = 'app') = (app_short_name IS NOT NULL)),
  CHECK ((fixed_value IS NULL) = (fixed_currency IS NULL))
);
CREATE INDEX entries_site ON entries (site_id) WHERE active;
CREATE UNIQUE INDEX entries_one_default ON entries (site_id) WHERE is_default AND active;

-- One row per entry click: the payload handed out and, once used, the Telegram user it tied.
-- The payload is random (never derived from the visit), so it tells nothing about the visit.
CREATE TABLE entry_clicks (
  id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  entry_id       uuid NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
  site_id        uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  visit_id       uuid REFERENCES visits(id) ON DELETE SET NULL,
  payload        text NOT NULL UNIQUE CHECK (payload ~ '^[A-Za-z0-9_-]{1,64}$'),
  created_at     timestamptz NOT NULL DEFAULT now(),
  used_by        bigint,                               -- the Telegram user the payload tied
  used_at        timestamptz,
  used_through   text CHECK (used_through IN ('start','app','api')),
  conversion_id  uuid REFERENCES conversions(id) ON DELETE SET NULL,
  CHECK ((used_by IS NULL) = (used_at IS NULL))
);
CREATE INDEX entry_clicks_user ON entry_clicks (used_by, site_id, used_at DESC) WHERE used_by IS NOT NULL;
CREATE INDEX entry_clicks_visit ON entry_clicks (visit_id);

-- What `setWebhook` was last given, so that bots registered before a new update type was asked
-- for are set again without any manual step (NULL: before this column existed).
ALTER TABLE bots ADD COLUMN webhook_allowed_updates text[];
