-- `bot remove`: a removed bot keeps its row, because its channels, visits and conversions are
-- history that reports and the lead API still read; the row says when it was removed, and only
-- bots in use are unique per account, so the same bot can be added again later.
ALTER TABLE bots ADD COLUMN removed_at timestamptz;
ALTER TABLE bots DROP CONSTRAINT bots_account_id_telegram_bot_id_key;
CREATE UNIQUE INDEX bots_account_telegram_in_use ON bots (account_id, telegram_bot_id) WHERE removed_at IS NULL;
