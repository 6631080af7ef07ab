-- Alerts: a site's operators hear, in a Telegram chat (through the account's own bot) or at a
-- webhook, when a platform refuses a pixel's token, when sends fail for 15 minutes, when a channel
-- that had joins every day stops having them, or when a spend source fails; and when each ends.
CREATE TABLE alerts (
  id                uuid PRIMARY KEY DEFAULT capigram_uuid_v7(),
  site_id           uuid NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  telegram_chat_id  bigint,
  webhook_url       text CHECK (webhook_url IS NULL OR length(webhook_url) BETWEEN 1 AND 2048),
  created_at        timestamptz NOT NULL DEFAULT now(),
  removed_at        timestamptz,
  CHECK ((telegram_chat_id IS NULL) <> (webhook_url IS NULL))
);
CREATE INDEX alerts_site ON alerts (site_id) WHERE removed_at IS NULL;

-- One row per (alert, condition) that ever started: whether it holds now, since when, and which
-- of its start and end have been announced. An end is declared only after the condition has been
-- clear for a while (`clear_since`), so a flapping failure is one start and one end, not a flood.
CREATE TABLE alert_states (
  alert_id            uuid NOT NULL REFERENCES alerts(id) ON DELETE CASCADE,
  condition           text NOT NULL,
  active              boolean NOT NULL,
  detail              text NOT NULL,
  started_at          timestamptz NOT NULL,
  clear_since         timestamptz,
  ended_at            timestamptz,
  start_announced_at  timestamptz,
  end_announced_at    timestamptz,
  last_error          text,
  PRIMARY KEY (alert_id, condition)
);

-- A visit of an erased person keeps its counts but no longer leads to anyone: exports write it
-- without its id. A nullable column without a default costs nothing to add or to the inserts.
ALTER TABLE visits ADD COLUMN erased boolean;
