-- A chat is one channel of a site while that channel is active. A deactivated channel (its bot
-- removed with `bot remove`) keeps its row for reports and the lead API, and no longer stops the
-- chat from being added again to the site, with the bot added again or another one.
ALTER TABLE channels DROP CONSTRAINT channels_site_id_telegram_chat_id_key;
CREATE UNIQUE INDEX channels_site_chat_active ON channels (site_id, telegram_chat_id) WHERE active;
-- Re-created after it so that PostgreSQL (which checks unique indexes in the order they were
-- created) reports a chat added twice to one site with one bot as "already on this site", not as
-- the bot's chat being on another site.
DROP INDEX channels_bot_chat_active;
CREATE UNIQUE INDEX channels_bot_chat_active ON channels (bot_id, telegram_chat_id) WHERE active;
-- A site whose default channel was deactivated (by a `bot remove` before it cleared the default)
-- names none: its next channel becomes the default, as a site's first does.
UPDATE sites SET default_channel_id = NULL WHERE default_channel_id IN (SELECT id FROM channels WHERE NOT active);
