-- The webhook secret a bot had before its latest change, still accepted for a while: updates
-- Telegram queued or had in flight under the old secret arrive after a change, and a setWebhook
-- whose answer was lost leaves it unknown which secret Telegram sends until an update shows it.
ALTER TABLE bots
  ADD COLUMN previous_webhook_secret_hash bytea,
  ADD COLUMN webhook_secret_changed_at timestamptz,
  -- false while a new secret has not been seen on an update (its setWebhook answer was lost).
  ADD COLUMN webhook_secret_confirmed boolean NOT NULL DEFAULT true;
