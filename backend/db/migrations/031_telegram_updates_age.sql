-- Seen webhook updates are only needed while Telegram may still resend them (up to 24 h); the
-- daily purge finds the old ones by age.
CREATE INDEX telegram_updates_age ON telegram_updates (received_at);
