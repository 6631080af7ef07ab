-- Update forwarding: a bot whose funnel runs on the operator's own backend keeps Capigram as its
-- one webhook, and Capigram hands every update on to the operator's URL after handling it. The
-- secret is sent with each forward (as Telegram sends its own), so it is kept encrypted, not hashed.
ALTER TABLE bots ADD COLUMN forward_url text CHECK (forward_url IS NULL OR length(forward_url) BETWEEN 1 AND 2048);
ALTER TABLE bots ADD COLUMN forward_secret_enc text;

-- The forwards' outbox: one row per update, written in the transaction that records the update,
-- so a forward exists exactly when its update was handled. Rows of one (bot, order_key) go out
-- one at a time, oldest first: an update for a user never overtakes that user's earlier ones.
-- The update's JSON carries names, usernames and message texts, which Capigram otherwise never
-- stores: it is kept encrypted (SECRET_KEY) and only until it is delivered or dropped.
CREATE TABLE telegram_forwards (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  bot_id        uuid NOT NULL REFERENCES bots(id) ON DELETE CASCADE,
  order_key     text NOT NULL,
  update_id     bigint NOT NULL,
  body_enc      text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  attempts      integer NOT NULL DEFAULT 0,
  last_error    text,
  -- After a refusal: not tried again before this (the backoff), nor anything of the same user after it.
  next_attempt_at timestamptz,
  delivered_at  timestamptz,
  -- Given up (older than Telegram itself keeps an update, or forwarding was turned off).
  dropped_at    timestamptz,
  UNIQUE (bot_id, update_id)
);
CREATE INDEX telegram_forwards_pending ON telegram_forwards (bot_id, order_key, id) WHERE delivered_at IS NULL AND dropped_at IS NULL;
CREATE INDEX telegram_forwards_age ON telegram_forwards (created_at);
